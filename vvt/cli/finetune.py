"""`vvt train --init SOURCE`: a run that starts from any checkpoint, on the classes of its own data.

SOURCE is one of
  a vvt run or `vvt convert` folder (config.json + checkpoints/): its latest step's params (the EMA ones where the
      checkpoint has them), the model and preprocessing of its config;
  a file written by `vvt export` (.safetensors, format 'vvt'), the config in its metadata;
  a Hugging Face folder (config.json with a `model_type` a source of `vvt.convert.sources` reads: videomae,
      timesformer, vivit, vjepa2, videoprism), converted as `vvt convert --source` of that source converts it.

The run takes from SOURCE what the weights need, unless the command line sets it (`--config.FIELD=...`, applied
after): the model (every field but the regularisation and memory ones, `RECIPE_FIELDS`, which stay CONFIG's), the
frames and frame size, and the preprocessing: `dataset.normalization` and the resize fields (a vvt run's own;
a Hugging Face model's normalisation, its source's record's, with CONFIG's resize fields scaled to its frame size).
The classes come from the data (its manifest or classes.txt): the classifier is kept when they are the
checkpoint's (same number, and the same names where both have names), else it is re-initialised; one line says
which. The weights go to WORKDIR/init/weights.safetensors (`init_from.checkpoint`, format 'vvt'; an exported file
is read where it is); a second `vvt train --init` of the same SOURCE into the same WORKDIR reuses them. Frames or a
frame size other than the checkpoint's: as `init_from` with format 'vvt' (vvt.convert.image_init) allows them (a
patch grid resized, VideoMAE's fixed sine-cosine table at any clip length), else refused naming the tables.
"""
from __future__ import annotations

import dataclasses
import json
import os

import ml_collections

from vvt.config import dataset as dataset_lib
from vvt.config import schema
from vvt.config.errors import ConfigError
from vvt.convert import init_options

INIT_FILE = os.path.join('init', 'weights.safetensors')
# Model fields of the training recipe (CONFIG's), not of the weights: regularisation, dtypes and memory.
RECIPE_FIELDS = ('dropout_rate', 'attention_dropout_rate', 'stochastic_depth', 'dtype', 'param_dtype',
                 'attention_impl', 'remat', 'scan_layers')
PREPROCESSING = ('normalization', *dataset_lib.SIZE_FIELDS)


@dataclasses.dataclass(frozen=True)
class Start:
  """What a run starts from: the weights file and what it says about them."""
  source: str                 # SOURCE as given
  kind: str                   # 'run', 'file', or the converter source ('hf_videomae', ...)
  weights: str                # the safetensors file init_from reads
  model: dict                 # the checkpoint's model fields
  num_classes: int | None     # its classifier's classes (None: a new classifier, e.g. a bare backbone)
  class_names: tuple | None   # their names, where known
  preprocessing: dict         # dataset fields of PREPROCESSING it was trained with (those it knows)
  image_size: int | None = None  # the frame size its preprocessing's resize fields are for


def kind_of(source: str, what: str = '--init') -> str:
  """'run', 'file' or the converter source of a Hugging Face folder ('hf_videomae', ...) for SOURCE
  (`vvt.convert.init_options.source_kind`); ConfigError (one line starting with `what SOURCE`, exit 2) for anything
  else."""
  try:
    return init_options.source_kind(source, what)
  except ValueError as e:
    raise ConfigError(str(e)) from None


def _metadata(path: str) -> dict:
  from vvt.convert import weight_files
  return dict(weight_files.safetensors_header(path)[1])


def init_source(path: str):
  """The absolute path of the source whose weights the converted file `path` (WORKDIR/init/weights.safetensors)
  holds, None where it records none."""
  return _metadata(path).get('init_source')


def _plain(value):
  return json.loads(value.to_json_best_effort()) if hasattr(value, 'to_json_best_effort') else value


def _hf_normalization(folder: str, kind: str) -> str | None:
  """'imagenet' / 'zero_centre' from the mean and std of the folder's preprocessor config
  (`hf_folder.normalization`: preprocessor_config.json or video_preprocessor_config.json), else the family's."""
  from vvt.convert import hf_folder
  from vvt.convert import sources
  from vvt.data import mean_std
  given = hf_folder.normalization(folder)
  if given is not None:
    for name in ('imagenet', 'zero_centre'):
      mean, std = mean_std(name)
      if all(abs(a * 255 - b) < 0.3 for a, b in zip(given[0] + given[1], mean + std, strict=True)):
        return name
  return sources.get(kind).normalization


def _write_hf(source: str, kind: str, base, out: str, log) -> None:
  """Converts a Hugging Face folder into `out` (vvt safetensors; the metadata says what `read` needs)."""
  from vvt.cli import convert as convert_cli
  from vvt.convert import export
  from vvt.convert import video
  from vvt.tasks import registry
  pretraining = 'task' in base and registry.hooks_of(base).hf_pretraining  # a jepa run keeps V-JEPA 2's predictor
  result = video.convert(kind, source, base.model, pretraining=pretraining)
  new_head = any(name.startswith('head/output_projection') for name, _ in result.report.initialised)
  model = _plain(result.model_config())
  names = convert_cli.hf_class_names(video.hf_config_of(source, None))
  norm = _hf_normalization(source, kind)
  config = dict(model=model, num_classes=None if new_head else model['num_classes'],
                class_names=None if new_head else names,
                dataset={'normalization': norm} if norm else {})
  export.to_safetensors(result.params, out, json.dumps(config), metadata={'init_source': os.path.abspath(source)})
  r = result.report
  log(f'[init] {source}: {kind} converted ({len(r.loaded)} loaded, {len(r.transformed)} transformed, '
      f'{len(r.unused)} unused) -> {out}')


def _write_run(source: str, out: str, log) -> None:
  from vvt.cli import convert as convert_cli
  from vvt.convert import export
  path, n = convert_cli.export_checkpoint(source, out + '.tmp')
  params, metadata = export.from_safetensors(path)
  export.to_safetensors(params, out, metadata.get('config'),
                        metadata={'weights': metadata.get('weights', ''), 'init_source': os.path.abspath(source)})
  os.remove(path)
  log(f'[init] {source}: {n} tensors ({metadata.get("weights")} params) -> {out}')


def _write(source: str, kind: str, base, weights: str, log) -> None:
  """The weights of SOURCE converted into `weights`; the folders made for it are removed again (where they stayed
  empty) when that fails, so that a SOURCE that cannot be read leaves nothing behind."""
  folder = os.path.dirname(weights)
  made = [d for d in (folder, os.path.dirname(folder)) if d and not os.path.isdir(d)]  # the init folder, WORKDIR
  os.makedirs(folder, exist_ok=True)
  try:
    (_write_run(source, weights, log) if kind == 'run' else _write_hf(source, kind, base, weights, log))
  except BaseException:
    for d in made:
      if not os.listdir(d):
        os.rmdir(d)
    raise


def prepare(source: str, base, workdir: str, log=print, what: str = '--init') -> Start:
  """The weights of SOURCE as a vvt safetensors file (written to WORKDIR/init/ unless SOURCE is one), and what
  they say. `base`: the run's config before `--init` (its model fills in what a converter needs); `what`: the
  option or field that named SOURCE (in the messages)."""
  kind = kind_of(source, what)
  weights = source if kind == 'file' else os.path.join(workdir, INIT_FILE)
  if kind != 'file':
    reuse = os.path.isfile(weights) and init_source(weights) == os.path.abspath(source)
    if reuse:
      log(f'[init] {weights}: the weights of {source}, written before')
    else:
      _write(source, kind, base, weights, log)
  meta = _metadata(weights)
  if meta.get('format') != 'vvt' or 'config' not in meta:
    raise ConfigError(f'{what} {source}: not a file written by `vvt export` (no format=vvt and config metadata)')
  values = json.loads(meta['config'])
  model = values.get('model', values)
  nc = values.get('num_classes', model.get('num_classes'))
  names = values.get('class_names')
  data = values.get('dataset') or {}
  return Start(source=source, kind=kind, weights=weights, model=model,
               num_classes=nc if isinstance(nc, int) and nc > 0 else None,
               class_names=tuple(names) if names else None,
               preprocessing={k: data[k] for k in PREPROCESSING if data.get(k) is not None},
               image_size=data.get('image_size') or values.get('image_size'))


def adapt(config: ml_collections.ConfigDict, start: Start) -> None:
  """`config` (before the command line's overrides) changed to run `start`'s weights: its model but the recipe's
  fields, frames and frame size, preprocessing, classes left to the data, `init_from` reading the weights."""
  model = start.model
  for field, value in model.items():
    if field in RECIPE_FIELDS or field in schema.SHARED_FIELDS or field not in config.model:
      continue
    config.model[field] = ml_collections.ConfigDict(value) if isinstance(value, dict) else (
        tuple(value) if isinstance(value, list) else value)
  base_size = config.image_size
  config.num_frames, config.image_size = model['num_frames'], model['image_size']
  d = config.dataset
  sizes = {k: v for k, v in start.preprocessing.items() if k in dataset_lib.SIZE_FIELDS}
  if len(sizes) == len(dataset_lib.SIZE_FIELDS) and start.image_size and start.image_size != config.image_size:
    sizes = dataset_lib.scaled_sizes(sizes, start.image_size, config.image_size)
  elif len(sizes) != len(dataset_lib.SIZE_FIELDS) and base_size and base_size != config.image_size:
    sizes = dataset_lib.scaled_sizes(d, base_size, config.image_size)
  for field, value in sizes.items():
    d[field] = value
  if 'normalization' in start.preprocessing:
    d.normalization = start.preprocessing['normalization']
  data_classes(config)
  config.init_from = schema.init_from_config(checkpoint=start.weights, format='vvt')


def data_classes(config: ml_collections.ConfigDict) -> None:
  """`config`'s classes left to the data (its manifest or classes.txt), as a run from a checkpoint takes them."""
  config.num_classes, config.class_names = 0, None


def head_line(config, start: Start) -> str:
  """Sets `config.init_from.reinit_head` (the checkpoint's classifier kept only for the data's classes) and says
  which, in one line."""
  nc, names = config.num_classes, config.class_names
  same = (start.num_classes is not None and nc == start.num_classes
          and (start.class_names is None or names is None or tuple(names) == tuple(start.class_names)))
  config.init_from.reinit_head = not same
  theirs = ('no classifier' if start.num_classes is None else
            f'{start.num_classes} classes' + (f' ({", ".join(start.class_names[:4])}'
                                              f'{", ..." if len(start.class_names) > 4 else ""})'
                                              if start.class_names else ''))
  if same:
    return f'[init] classifier kept: the data\'s {nc} classes are the checkpoint\'s'
  return f'[init] new classifier for the data\'s {nc} classes (the checkpoint has {theirs})'
