"""`vvt convert` (official / Hugging Face / scenic video checkpoints -> vvt checkpoint) and `vvt export`.

  vvt convert --source SOURCE --checkpoint FILE --config CONFIG[:ARG] --output DIR [--hf-config JSON]
              [--config.model.FIELD=VALUE ...]
  vvt export  --workdir DIR [--step N] --output FILE.safetensors
  vvt export  --import FILE.safetensors --output DIR [--config CONFIG]   (safetensors -> vvt checkpoint)

`vvt convert` reads the checkpoint (never executing code from it), converts it, checks every parameter name and
shape against the model, and writes `DIR/checkpoints/0/` with `vvt.train.checkpoints.save_params`. The model
fields that express the reference exactly (LayerNorm eps, GELU flavour, class-token handling, ...) replace
those of CONFIG; `DIR/config.py` holds the resulting run config, so `vvt eval --config DIR/config.py
--workdir DIR` evaluates the converted weights. `DIR/convert_report.txt` lists what was loaded and how.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

from absl import flags
import ml_collections
from ml_collections import config_flags


def _load_config(spec: str, overrides: list[str]):
  """CONFIG[:ARG] (+ --config.a.b=v overrides) through ml_collections' config_flags, in private flag values."""
  fv = flags.FlagValues()
  config_flags.DEFINE_config_file('config', None, 'config file', flag_values=fv, lock_config=False)
  fv(['vvt convert', f'--config={spec}'] + overrides)
  return fv.config


def _split_model(config):
  if 'model' in config and isinstance(config.model, ml_collections.ConfigDict):
    return config, config.model
  return None, config


def _fields_diff(model_cfg, fields: dict) -> list[str]:
  import vvt.models  # pylint: disable=g-import-not-at-top
  try:
    old = vvt.models.resolve(model_cfg)
  except ValueError:
    old = model_cfg
  new = vvt.models.resolve(vvt.models.get_config(**fields))
  out = []
  for key in sorted(fields):
    a = old.get(key) if hasattr(old, 'get') else None
    b = new[key]
    a = a.to_dict() if isinstance(a, ml_collections.ConfigDict) else a
    b = b.to_dict() if isinstance(b, ml_collections.ConfigDict) else b
    if isinstance(a, (list, tuple)):
      a = tuple(a)
    if isinstance(b, (list, tuple)):
      b = tuple(b)
    if a != b:
      out.append(f'model.{key}: {a!r} -> {b!r}')
  return out


def _write_config_py(path: str, config) -> None:
  text = config.to_json_best_effort(indent=1, sort_keys=True)
  with open(path, 'w') as f:
    f.write('"""Written by `vvt convert`: the run config with the converted model\'s exact fields."""\n'
            'import json\n\nimport ml_collections\n\n'
            f'_CONFIG = json.loads(r"""{text}""")\n\n\n'
            'def get_config(arg=None):\n  del arg\n  return ml_collections.ConfigDict(_CONFIG)\n')


def convert_to_checkpoint(source: str, checkpoint: str, config, output: str, hf_config=None, log=print):
  """Converts `checkpoint` and writes a params-only vvt checkpoint (step 0) to `output`; returns Converted."""
  from vvt.convert import video  # pylint: disable=g-import-not-at-top
  run_config, model_cfg = _split_model(config) if config is not None else (None, None)
  result = video.convert(source, checkpoint, model_cfg, hf_config)
  changes = _fields_diff(model_cfg, result.model_fields) if model_cfg is not None else []
  merged_model = result.model_config()
  if run_config is not None:
    run_config = ml_collections.ConfigDict(run_config.to_dict())
    run_config.model = merged_model
    if 'dataset' in run_config and isinstance(run_config.dataset, ml_collections.ConfigDict):
      for field in ('num_frames', 'image_size', 'num_classes'):
        if field in run_config.dataset and run_config.dataset[field] != merged_model[field]:
          changes.append(f'dataset.{field}: {run_config.dataset[field]!r} -> {merged_model[field]!r}')
          run_config.dataset[field] = merged_model[field]
  full = run_config if run_config is not None else merged_model
  from vvt.train import checkpoints  # pylint: disable=g-import-not-at-top
  os.makedirs(output, exist_ok=True)
  path = checkpoints.save_params(output, result.params, step=0, config=full)
  with open(os.path.join(output, 'convert_report.txt'), 'w') as f:
    f.write(f'source: {source}\ncheckpoint: {os.path.abspath(checkpoint)}\n\n')
    f.write('model fields that express the reference exactly:\n')
    f.write(json.dumps(result.model_fields, indent=1, sort_keys=True, default=str) + '\n\n')
    f.write('changes to the given config:\n' + ''.join(f'  {c}\n' for c in changes) + '\n')
    f.write(str(result.report) + '\n')
  config_path = os.path.join(output, 'config.py')
  _write_config_py(config_path, full)
  r = result.report
  log(f'[convert] {source}: {len(r.loaded)} loaded, {len(r.transformed)} transformed, '
      f'{len(r.unused)} unused in the file -> {path}')
  for c in changes:
    log(f'[convert] config changed: {c}')
  log(f'[convert] report: {os.path.join(output, "convert_report.txt")}; config: {config_path}')
  return result


def main(argv) -> int:
  parser = argparse.ArgumentParser(prog='vvt convert', description=__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
  from vvt.convert.video import SOURCES  # pylint: disable=g-import-not-at-top
  parser.add_argument('--source', required=True, choices=SOURCES)
  parser.add_argument('--checkpoint', required=True, help='checkpoint file (or Hugging Face model folder)')
  parser.add_argument('--config', required=True, help='vvt config file FILE[:ARG] (run config or model config)')
  parser.add_argument('--output', required=True, help='directory for the vvt checkpoint (the eval workdir)')
  parser.add_argument('--hf-config', default=None, help='Hugging Face config.json (default: the folder\'s)')
  args, rest = parser.parse_known_args(argv)
  bad = [a for a in rest if not a.startswith('--config.')]
  if bad:
    parser.error(f'unrecognized arguments: {" ".join(bad)}')
  try:
    config = _load_config(args.config, rest)
    convert_to_checkpoint(args.source, args.checkpoint, config, args.output, args.hf_config)
  except (ValueError, KeyError, FileNotFoundError, ImportError, flags.Error) as e:
    print(f'vvt convert: error: {e}', file=sys.stderr)
    return 1
  return 0


def export_main(argv) -> int:
  parser = argparse.ArgumentParser(prog='vvt export', description='vvt checkpoint <-> safetensors '
                                   '(flat names: "/"-joined parameter paths, float32)')
  parser.add_argument('--workdir', help='vvt workdir whose checkpoint to export')
  parser.add_argument('--step', type=int, default=None, help='checkpoint step (default: latest)')
  parser.add_argument('--import', dest='import_file', default=None,
                      help='read this safetensors file and write a vvt checkpoint to --output instead')
  parser.add_argument('--config', default=None, help='with --import: config FILE[:ARG] to check shapes against')
  parser.add_argument('--output', required=True)
  args = parser.parse_args(argv)
  from vvt.convert import export  # pylint: disable=g-import-not-at-top
  try:
    if args.import_file:
      config = _load_config(args.config, []) if args.config else None
      path = export.import_safetensors(args.import_file, args.output, config)
      print(f'[export] {args.import_file} -> {path}')
    else:
      if not args.workdir:
        parser.error('--workdir is required (or --import FILE)')
      path, n = export.export_checkpoint(args.workdir, args.output, step=args.step)
      print(f'[export] {n} tensors -> {path}')
  except (ValueError, KeyError, FileNotFoundError) as e:
    print(f'vvt export: error: {e}', file=sys.stderr)
    return 1
  return 0
