"""`vvt convert` (official / Hugging Face / scenic video checkpoints -> vvt checkpoint) and `vvt export`.

  vvt convert --source SOURCE --checkpoint FILE --config CONFIG[:ARG] --output DIR [--hf-config JSON]
              [--num-frames N] [--image-size S] [--config.model.FIELD=VALUE ...]
  vvt export  --workdir DIR [--step N] [--raw_params] --output FILE.safetensors   (EMA params where the step has them)
  vvt export  --workdir DIR [--step N] [--raw_params] --format hf --output FOLDER   (a transformers folder)
  vvt export  --import FILE.safetensors --output DIR [--config CONFIG]   (safetensors -> vvt checkpoint)

`vvt convert` reads the checkpoint (never executing code from it), converts it, checks every parameter name and
shape against the model, and writes `DIR/checkpoints/0/` (a params-only checkpoint). The model fields that
express the reference exactly (LayerNorm eps, GELU flavour, class-token handling, frames, frame size, classes,
...) replace those of CONFIG (required: the table below says which to pass); the resize fields follow the frame
size at CONFIG's ratios (256 for 224-px crops -> 73 for 64), and `init_from` is None. `DIR/config.json` holds the
resulting run config, so `vvt eval --workdir DIR` and `vvt predict --checkpoint DIR` run the converted weights as
they are. `DIR/convert_report.txt` lists what was loaded and how. Scenic ViViT Models 1,
3 and 4 read their frames and frame size from the split of their T*N position table; where its rows do not tell
the split, --num-frames or --image-size must. A checkpoint without a classifier (a VideoMAE, V-JEPA 2 or VideoPrism
backbone: --source hf_videomae, hf_vjepa2, hf_videoprism) gets a new head of CONFIG's model.num_classes.
--num-frames / --image-size run any checkpoint at another clip length or frame size the tubelet divides: its
learned position tables are resized once as its reference does (TimeSformer: torch nearest; ViViT and the others:
torch bicubic, align_corners=False; VideoMAE's sine-cosine table recomputed; V-JEPA 2's RoPE needs nothing;
VideoPrism resizes at run time; X-ViT as its official code), recorded in config.json and convert_report.txt
(`vvt.convert.retarget`). Each family's license: docs/weights.md.

`vvt export --format hf` writes FOLDER/config.json and FOLDER/model.safetensors, which transformers'
`<Class>.from_pretrained(FOLDER)` loads: TimeSformer divided and joint (TimesformerForVideoClassification), ViViT
Model 1 (VivitForVideoClassification), joint attention without a class token (VideoMAEForVideoClassification),
V-JEPA 2 (VJEPA2ForVideoClassification, with an empty predictor), VideoPrism (VideoPrismForVideoClassification;
a video-text model: VideoPrismClipModel, the run's tokenizer files copied beside), Perception Encoder video
(model family 'pe_video': PeVideoModel, its tokenizer files beside);
labels from the run's class names, `problem_type` multi_label_classification for a multi-label run, a probe run's
backbone with its best linear probe as the classifier (`vvt.convert.hf_export`). A model no transformers class
expresses, a probe it cannot hold, or a FOLDER holding files the export does not write (another model's) is
refused with one line saying why (exit 2) before anything is written. `vvt export --workdir` refuses --config and
--config.FIELD (they apply to --import only): the checkpoint is written as its run saved it.
"""
from __future__ import annotations

import json
import os

from vvt.cli import common


def _fields_diff(model_cfg, fields: dict) -> list[str]:
  import ml_collections

  import vvt.models
  try:
    old = vvt.models.resolve(model_cfg)
  except ValueError:
    old = model_cfg
  new = vvt.models.resolve(vvt.models.get_config(**fields))
  out = []
  for key in sorted(fields):
    a, b = old.get(key), new[key]
    a = a.to_dict() if isinstance(a, ml_collections.ConfigDict) else a
    b = b.to_dict() if isinstance(b, ml_collections.ConfigDict) else b
    a = tuple(a) if isinstance(a, (list, tuple)) else a
    b = tuple(b) if isinstance(b, (list, tuple)) else b
    if a != b:
      out.append(f'model.{key}: {a!r} -> {b!r}')
  return out


def _with_model(run_config, model, class_names=None):
  """The run config with `model` replacing its model; the shared fields follow the model, and every field that
  depends on them with them: the resize fields scale with the frame size at the base config's ratios
  (`vvt.config.dataset.scaled_sizes`), and `init_from` is None (the converted weights are the run's).

  `class_names` (e.g. a Hugging Face config's id2label) replace the config's when they fit the classes;
  names of another number of classes than the converted head are dropped."""
  from vvt.config import dataset
  from vvt.config import run_file
  from vvt.config import schema
  values = json.loads(run_config.to_json_best_effort())
  values['model'] = json.loads(model.to_json_best_effort())
  base_size = values.get('image_size')
  for field in schema.SHARED_FIELDS:
    if field in values['model']:
      values[field] = values['model'][field]
  new_size = values.get('image_size')
  if isinstance(values.get('dataset'), dict) and base_size and new_size and base_size != new_size:
    values['dataset'].update(dataset.scaled_sizes(values['dataset'], base_size, new_size))
  values['init_from'] = None
  nc = values.get('num_classes')
  names = class_names if class_names is not None else values.get('class_names')
  values['class_names'] = list(names) if names is not None and isinstance(nc, int) and len(names) == nc else None
  if 'class_names' in values['model']:
    values['model']['class_names'] = values['class_names']
  return run_file.from_dict(values)


def hf_class_names(hf_config) -> list | None:
  """Class names in label order from a Hugging Face config's `id2label`.

  None when it has none, when its ids are not 0..n-1, or when they are transformers' placeholders ('LABEL_0',
  'LABEL_1', ...: what a config without label names holds)."""
  if not isinstance(hf_config, dict) or not isinstance(hf_config.get('id2label'), dict):
    return None
  try:
    labels = {int(k): str(v) for k, v in hf_config['id2label'].items()}
  except (TypeError, ValueError):
    return None
  if sorted(labels) != list(range(len(labels))):
    return None
  names = [labels[i] for i in range(len(labels))]
  return None if names == [f'LABEL_{i}' for i in range(len(names))] else names


def _summary(model_fields: dict, class_names) -> str:
  """One line: the frames, frame size and classes the converted checkpoint records."""
  m = model_fields
  names = list(class_names or ())
  shown = f' ({", ".join(map(str, names[:3]))}{", ..." if len(names) > 3 else ""})' if names else ''
  from vvt.models import frame_size
  size = m.get('image_size')
  size = frame_size.label(size) if size is not None else None
  return f'[convert] {m.get("num_frames")} frames of {size}px, {m.get("num_classes")} classes{shown}'


def convert_to_checkpoint(source: str, checkpoint: str, config, output: str, hf_config=None, log=print,
                          num_frames=None, image_size=None):
  """Converts `checkpoint` and writes a params-only vvt checkpoint (step 0) to `output`; returns Converted.

  `num_frames` / `image_size`: the clip length and frame size to run the weights at (their position tables resized
  as the reference does, `vvt.convert.retarget`), or to say which split of a scenic Model 1/3/4 table is meant.
  The frames and frame size the conversion arrives at are the checkpoint meta's and config.json's (model, dataset, run).
  """
  from vvt.convert import sources
  from vvt.convert import video
  from vvt.tasks import registry
  from vvt.train import checkpoints
  is_run = config is not None and 'model' in config
  model_cfg = config.model if is_run else config
  pretraining = is_run and 'task' in config and registry.hooks_of(config).hf_pretraining  # its task's modules kept
  result = video.convert(source, checkpoint, model_cfg, hf_config, num_frames=num_frames, image_size=image_size,
                         pretraining=pretraining)
  changes = _fields_diff(model_cfg, result.model_fields) if model_cfg is not None else []
  names = None
  if sources.get(source).hf_folder:
    names = hf_class_names(video.hf_config_of(checkpoint, hf_config))
  full = _with_model(config, result.model_config(), names) if is_run else result.model_config()
  os.makedirs(output, exist_ok=True)
  path = checkpoints.save_params(output, result.params, step=0, config=json.loads(full.to_json_best_effort()))
  with open(os.path.join(output, 'convert_report.txt'), 'w') as f:
    f.write(f'source: {source}\ncheckpoint: {os.path.abspath(checkpoint)}\n\n')
    f.write('model fields that express the reference exactly:\n')
    f.write(json.dumps(result.model_fields, indent=1, sort_keys=True, default=str) + '\n\n')
    f.write('changes to the given config:\n' + ''.join(f'  {c}\n' for c in changes) + '\n')
    f.write(str(result.report) + '\n')
  config_path = os.path.join(output, 'config.json')
  with open(config_path, 'w') as f:
    f.write(full.to_json_best_effort(indent=2))
  r = result.report
  log(f'[convert] {source}: {len(r.loaded)} loaded, {len(r.transformed)} transformed, '
      f'{len(r.unused)} unused in the file -> {path}')
  log(_summary(result.model_fields, full.get('class_names') if is_run else names))
  for c in changes:
    log(f'[convert] config changed: {c}')
  if result.model_fields.get('text') is not None and os.path.isdir(checkpoint):
    log(carry_tokenizer(checkpoint, output))
  log(f'[convert] report: {os.path.join(output, "convert_report.txt")}; config: {config_path}')
  return result


def carry_tokenizer(folder: str, output: str) -> str:
  """Copies a video-text model's tokenizer files from `folder` to `output` (vvt.data.TOKENIZER_FILES, those
  present); the log line saying which, or that the folder has no tokenizer.json."""
  from vvt.data import copy_tokenizer_files
  copied = copy_tokenizer_files(folder, output)
  if 'tokenizer.json' not in copied:
    return (f'[convert] {folder} has no tokenizer.json: texts for this model need its tokenizer.json in '
            f'{output}' + (f' (copied: {", ".join(copied)})' if copied else ''))
  return f'[convert] tokenizer: {", ".join(copied)} -> {output}'


def export_checkpoint(workdir: str, output: str, step: int | None = None, raw_params: bool = False):
  """The params of a vvt checkpoint (full training state or params-only) -> safetensors file: the EMA params of
  a step that has them unless `raw_params` (metadata "weights": 'ema' | 'raw' | 'params', `vvt.train.ema`)."""
  from vvt.convert import export
  from vvt.models import layout
  from vvt.train import checkpoints
  params, step, weights = checkpoints.load_eval_params(workdir, step, raw=raw_params)
  params = layout.to_per_layer(params)  # files hold one tensor per layer, whether the run scanned its layers or not
  config = checkpoints.read_meta(workdir, step).get('config')
  n = export.to_safetensors(params, output, json.dumps(config) if config is not None else None,
                            metadata={'weights': weights})
  return output, n


def _run_config(workdir: str, step: int):
  """The run config (a dict) a checkpoint step was written with, else WORKDIR/config.json's; None without."""
  from vvt import fileio
  from vvt.config import run_file
  from vvt.train import checkpoints
  config = checkpoints.read_meta(workdir, step).get('config')
  if config is None and fileio.exists(run_file.path(workdir)):
    config = json.loads(fileio.read_text(run_file.path(workdir)))
  return config


def export_hf(workdir: str, output: str, step: int | None = None, raw_params: bool = False):
  """A vvt checkpoint (the EMA params of a step that has them unless `raw_params`) -> a Hugging Face transformers
  folder (`vvt.convert.hf_export.write`): a multi-label run's config says `problem_type`, a probe run exports its
  backbone with the best linear probe as the classifier (`_probe_params`). common.UsageError (exit 2) for a model
  no transformers class expresses, a probe that cannot be the class's classifier, or an --output folder holding
  other files, before anything is written. Returns (transformers class, number of tensors, weights: 'ema' | 'raw'
  | 'params')."""
  from vvt.convert import hf_export
  from vvt.convert.torch_layout import NotExpressible
  import vvt.models
  from vvt.tasks import registry
  from vvt.train import checkpoints
  step = checkpoints.resolve_step(workdir, step)
  config = _run_config(workdir, step)
  if not isinstance(config, dict) or not isinstance(config.get('model'), dict):
    raise common.UsageError(f'{workdir}: checkpoint step {step} has no model config (nor has {workdir}/config.json); '
                            '--format hf writes the model the config describes')
  model_cfg = vvt.models.get_config(**config['model'])
  if registry.hooks_of(config).hf_pretraining:  # a pretraining run: its encoder and predictor, no classifier
    return _export_pretraining(workdir, output, step, raw_params, model_cfg,
                               registry.hooks_of(config).hf_pretraining_fields(config))
  try:
    target, model = hf_export.check(model_cfg)
    grid = registry.hooks_of(config).best_of_grid  # a probe run: its best probe is the classifier
    best = _best_probe(workdir, step, config, model, target.hf_class) if grid else None
    hf_export.check_output(output)
    params, step, weights = checkpoints.load_eval_params(workdir, step, raw=raw_params)
    if best is not None:
      params = {**{k: v for k, v in params.items() if k != 'probes'},
                'head': {'output_projection': dict(params['probes'][best]['output_projection'])}}
    hf_class, n = hf_export.write(params, model_cfg, output, config.get('class_names'), _multi_label(config))
    if model.get('text') is not None:
      carry_tokenizer(workdir, output)
  except (NotExpressible, hf_export.OutputFolderError) as e:
    raise common.UsageError(f'cannot export to Hugging Face: {e}') from None
  return hf_class, n, weights


def _export_pretraining(workdir: str, output: str, step: int, raw_params: bool, model_cfg, fields: dict):
  """`export_hf` of a pretraining run (its task's `hf_pretraining` hook): `hf_export.write_pretraining`, with the
  config.json `fields` its task's options decide (`hf_pretraining_fields`)."""
  from vvt.convert import hf_export
  from vvt.convert.torch_layout import NotExpressible
  import vvt.models
  from vvt.train import checkpoints
  try:
    hf_export.pretraining_module(vvt.models.resolve(model_cfg))
    hf_export.check_output(output)
    params, step, weights = checkpoints.load_eval_params(workdir, step, raw=raw_params)
    hf_class, n = hf_export.write_pretraining(params, model_cfg, output, fields)
  except (NotExpressible, hf_export.OutputFolderError) as e:
    raise common.UsageError(f'cannot export to Hugging Face: {e}') from None
  return hf_class, n, weights


def _multi_label(config: dict) -> bool:
  """Whether a run's classes are independent (sigmoid per class): its task's `multi_hot_labels` hook (a multi-label
  task, or probes judged by one)."""
  from vvt.tasks import registry
  return registry.hooks_of(config).multi_hot_labels(config)


def _best_probe(workdir: str, step: int, config: dict, model, hf_class: str) -> str:
  """The probe of a probe run that `vvt export --format hf` writes as the classifier: the best one of the step's
  evaluation (its `best_probe`). UsageError (one line saying why) where the class cannot hold it: an attentive
  probe (its own pooler), a linear probe on a backbone whose classifier is attentive (the probe reads the tokens'
  mean, the class's classifier its pooler's output), or no evaluation of the step."""
  from vvt import fileio
  from vvt.train import checkpoints
  probe = (config.get('task') or {}).get('probe') or {}
  if probe.get('head', 'linear') != 'linear':
    raise common.UsageError(f"cannot export to Hugging Face: task.probe.head={probe.get('head')!r}: each probe has "
                            f'its own attentive pooler over the tokens, which {hf_class} has no place for (a linear '
                            'probe on the pooled features exports)')
  if model.classifier == 'attentive':
    raise common.UsageError("cannot export to Hugging Face: model.classifier='attentive': a linear probe reads the "
                            f"mean of the backbone's tokens, {hf_class}'s classifier the output of its attentive "
                            'pooler')
  split = (config.get('eval') or {}).get('split') or 'test'
  path = checkpoints.eval_results_path(workdir, step, split)
  best = json.loads(fileio.read_text(path)).get('best_probe') if fileio.exists(path) else None
  if not best:
    raise common.UsageError(f'cannot export to Hugging Face: {path}: no evaluation of step {step} names the best '
                            f'probe (`vvt eval --workdir {workdir} --step {step}` writes it)')
  return str(best)


def import_safetensors(path: str, output: str, config=None, step: int = 0) -> str:
  """safetensors (vvt flat names) -> params-only vvt checkpoint in `output`; checked against `config` if given."""
  from vvt.convert import export
  from vvt.convert import video
  from vvt.train import checkpoints
  params, metadata = export.from_safetensors(path)
  values = None
  if config is not None:
    video.check_params(params, config.model if 'model' in config else config)
    values = json.loads(config.to_json_best_effort())
  elif 'config' in metadata:
    from vvt.config import run_file
    values = json.loads(metadata['config'])
    if 'model' in values and 'dataset' in values:  # a run config: the fields added since it was written, too
      values = json.loads(run_file.as_json(run_file.from_dict(values)))
  return checkpoints.save_params(output, params, step=step, config=values)


# The base config of any source (the others: each source's record, `vvt.convert.sources`).
ANY_SOURCE = ('configs/synthetic.py', 'any source, on the synthetic data (tiny tests)')


def base_configs_help() -> str:
  """The --help table: which --config to pass for each source (its record's `base_config` and `base_note`)."""
  from vvt.convert import sources
  rows = ['which --config to pass (its model fields, and the sizes that follow them, become the checkpoint\'s):']
  for s in sources.SOURCES.values():
    rows += [f'  {s.name:<15} {s.base_config}'] + ([f'  {"":<15}   {s.base_note}'] if s.base_note else [])
  return '\n'.join(rows + [f'  {"(any)":<15} {ANY_SOURCE[0]}', f'  {"":<15}   {ANY_SOURCE[1]}'])


def _convert(argv):
  from vvt.convert import sources
  p = common.Parser('vvt convert', __doc__, config='required', epilog=base_configs_help())
  p.add_argument('--source', required=True, choices=tuple(sources.SOURCES))
  p.add_argument('--checkpoint', required=True, help='checkpoint file (or Hugging Face model folder)')
  p.add_argument('--output', required=True, help='directory for the vvt checkpoint (the eval workdir)')
  p.add_argument('--hf-config', default=None, help='Hugging Face config.json (default: the folder\'s)')
  p.add_argument('--num-frames', type=int, default=None,
                 help='clip length to run the weights at, any the tubelet divides: the time tables resized as the '
                      'reference does (TimeSformer nearest, ViViT bicubic; X-ViT: a multiple of its 8-row table, '
                      'used periodically; scenic Models 1/3/4: also which split of the T*N table is meant)')
  p.add_argument('--image-size', type=_image_size, default=None, metavar='S|H,W',
                 help='frame size to run the weights at, S (square) or H,W: the patch grids of the position tables '
                      'resized likewise')
  args, spec, overrides = common.parse(p, argv)
  config = common.run_config(spec, overrides, validate=False, files=(), init=False)
  convert_to_checkpoint(args.source, args.checkpoint, config, args.output, args.hf_config,
                        num_frames=args.num_frames, image_size=args.image_size)


def _image_size(text: str):
  """--image-size: S or H,W (`vvt.models.frame_size.from_text`), an argparse error (exit 2) otherwise."""
  import argparse

  from vvt.models import frame_size
  try:
    return frame_size.from_text(text)
  except ValueError as e:
    raise argparse.ArgumentTypeError(str(e)) from None


def _export(argv):
  p = common.Parser('vvt export', 'vvt checkpoint <-> safetensors (flat names: "/"-joined parameter paths, '
                    'float32); --format hf: a Hugging Face transformers folder', config=True)
  p.add_argument('--workdir', help='vvt workdir whose checkpoint to export')
  p.add_argument('--step', type=int, default=None, help='checkpoint step (default: latest)')
  p.add_argument('--import', dest='import_file', default=None,
                 help='read this safetensors file and write a vvt checkpoint to --output instead')
  p.add_argument('--output', required=True,
                 help='the safetensors file (--format safetensors), or the folder (--format hf)')
  p.add_argument('--format', default='safetensors', choices=('safetensors', 'hf'),
                 help="safetensors: vvt's names ('/'-joined parameter paths); hf: a Hugging Face transformers "
                      'folder, config.json + model.safetensors')
  p.add_argument('--raw_params', action='store_true',
                 help='export the trained params even where the checkpoint has EMA ones')
  args, spec, overrides = common.parse(p, argv)
  if not args.import_file and (spec or overrides):
    given = f'--config {spec}' if spec else f'--config.{overrides[0][0]}={overrides[0][1]}'
    raise common.UsageError(f'{given}: vvt export --workdir writes the checkpoint as its run saved it; --config and '
                            '--config.FIELD apply to --import only')
  if args.import_file and args.format == 'hf':
    from vvt.convert import sources
    hf = '|'.join(s.name for s in sources.SOURCES.values() if s.hf_folder)
    raise common.UsageError(f'--import reads vvt safetensors files; a Hugging Face folder is read by '
                            f'`vvt convert --source {hf}`')
  if args.import_file:
    config = common.run_config(spec, overrides, purpose='summary') if spec else None
    path = import_safetensors(args.import_file, args.output, config)
    print(f'[export] {args.import_file} -> {path}')
  else:
    if not args.workdir:
      raise common.UsageError('--workdir is required (or --import FILE)')
    if args.format == 'hf':
      hf_class, n, weights = export_hf(args.workdir, args.output, step=args.step, raw_params=args.raw_params)
      print(f'[export] {hf_class}: {n} tensors ({weights} weights) -> {args.output}/config.json, model.safetensors')
      return
    path, n = export_checkpoint(args.workdir, args.output, step=args.step, raw_params=args.raw_params)
    print(f'[export] {n} tensors -> {path}')


def main(argv) -> int:
  return common.run('vvt convert', _convert, argv)


def export_main(argv) -> int:
  return common.run('vvt export', _export, argv)
