"""vvt models -> Hugging Face transformers folders (config.json + model.safetensors) that `from_pretrained` loads.

Each target is one transformers class and the function that writes a vvt model in its names and layouts, in the
module that reads that class (the exact inverse of its reader):

  to_hf(params, model_cfg) -> (hf_config: dict, state: {name: float32 np.ndarray})

params: the model's params (per-layer layout); model_cfg: the resolved vvt model config. to_hf checks every model
field it depends on and raises `torch_layout.NotExpressible` (one line naming the field and its value) for a value the
class cannot express; the labels (id2label / label2id from the run's class names) are added here.

`TARGETS` (the `exports` of the sources' records, `vvt.convert.sources`) says which vvt models each class expresses
by the fields that pick it (`selects`): exactly one target may select a model. A model no target selects is refused
naming its scheme (or the field that rules each near target out). Fields that no exporter reads (and no target lists
in `reads`) must keep their family defaults, so a field added to vvt later is refused, not silently dropped, until
an exporter reads it. Training-only and
memory fields (dropout, stochastic depth, dtypes, attention_impl, remat, scan_layers) do not change the function
and are not carried: the HF config has transformers' defaults (no dropout).

Adding a model: its `to_hf` in its reader's module and a target in its source's record.
"""
from __future__ import annotations

import json
import os

import numpy as np

from vvt.convert import sources
from vvt.convert import torch_layout
import vvt.models
from vvt.models import layout
from vvt.models import schemes

CONFIG_FILE, WEIGHTS_FILE = 'config.json', 'model.safetensors'
# The transformers classes of the sources' records (`sources.Target`), and why a scheme none selects has no class
# where there is more to say than that.
TARGETS = sources.targets()
NO_CLASS = sources.no_class()

# Model fields every exporter reads and checks (or that only name the model).
READ = frozenset((
    'family', 'variant', 'attention', 'num_frames', 'image_size', 'num_classes', 'tubelet', 'hidden_size',
    'num_layers', 'num_heads', 'mlp_dim', 'classifier', 'pooling', 'class_token', 'positional_embedding',
    'time_embedding_rows', 'temporal_projection', 'representation_size', 'layer_norm_eps', 'encoder_norm_eps',
    'gelu_approximate', 'qkv_bias', 'key_bias'))
# Fields that do not change the function: regularisation (training only), dtypes (exported as float32), memory.
INERT = frozenset(('dropout_rate', 'attention_dropout_rate', 'stochastic_depth', 'dtype', 'param_dtype',
                   'attention_impl', 'remat', 'scan_layers'))
# Fields of schemes no target selects (Model 2's temporal encoder, X-ViT's mixing and TA head, per-frame class
# tokens' aggregation, Model 3's stage order): unused by the selected models.
UNUSED = frozenset(('temporal_layers', 'temporal_num_heads', 'temporal_mlp_dim', 'mixing', 'temporal_head',
                    'frame_aggregation', 'attention_order'))
# Fields read only by a classifier every exporter checks the name of: the attentive pooler's shape is used by
# classifier='attentive' alone (its own exporters read it).
BY_CLASSIFIER = {'attentive_pooler': 'attentive'}


def _scheme(model_cfg) -> str:
  return f'model.attention={model_cfg.attention!r} ({schemes.get(model_cfg.attention).paper})'


def select(model_cfg) -> sources.Target:
  """The one target that selects the resolved `model_cfg`; NotExpressible naming the scheme, or for the targets
  that select its scheme the field that rules each out."""
  chosen = [t for t in TARGETS if not t.mismatches(model_cfg)]
  if len(chosen) > 1:
    raise ValueError(f'internal error: {", ".join(t.hf_class for t in chosen)} all select {_scheme(model_cfg)}')
  if chosen:
    return chosen[0]
  near = [t for t in TARGETS if model_cfg.attention in dict(t.selects).get('attention', (model_cfg.attention,))
          and model_cfg.get('family') in dict(t.selects).get('family', (model_cfg.get('family'),))]  # pe_video's
  if not near:
    written = sorted({a for t in TARGETS for a in dict(t.selects).get('attention', ())})
    why = NO_CLASS.get(model_cfg.attention, 'no transformers class expresses it')
    raise torch_layout.NotExpressible(f'{_scheme(model_cfg)}: {why}; --format hf writes attention {", ".join(written)}')
  reasons, got = {}, {}
  for t in near:
    field, allowed = t.mismatches(model_cfg)[0]
    reasons.setdefault(f'{t.hf_class} needs model.{field}={" or ".join(repr(a) for a in allowed)}', None)
    got[field] = model_cfg[field]
  got_text = ' and '.join(f'model.{f}={v!r}' for f, v in got.items())
  raise torch_layout.NotExpressible(f'{got_text} with {_scheme(model_cfg)}: no transformers class expresses it '
                              f'({"; ".join(reasons)})')


def _check_generic(model_cfg, t: sources.Target) -> None:
  """The head (one linear classifier, no pre-logits) and every field no exporter reads at its family default."""
  m = model_cfg
  if m.get('text') is None and not isinstance(m.num_classes, int):
    raise torch_layout.NotExpressible(f'model.num_classes={dict(m.num_classes)!r}: {t.hf_class} has one classifier, '
                                'not several heads')
  torch_layout.require(m, 'representation_size', None, t.hf_class, 'no pre-logits layer')
  defaults = vvt.models.get_config(m.family)
  plain = lambda v: v.to_dict() if hasattr(v, 'to_dict') else v
  unused = {f for f, classifier in BY_CLASSIFIER.items() if m.classifier != classifier}
  for field in sorted(set(m.keys()) - READ - INERT - UNUSED - unused - set(t.reads)):
    value, default = plain(m[field]), plain(defaults.get(field, None))
    if value != default:
      raise torch_layout.NotExpressible(f'model.{field}={value!r}: {t.hf_class} has no such setting (vvt export '
                                  f'--format hf knows {field} only at its default {default!r})')


def labels(class_names, num_labels: int) -> dict:
  """id2label / label2id of the class names (transformers' placeholders LABEL_i where they are not known or do not
  fit the classifier)."""
  names = list(class_names) if class_names is not None and len(class_names) == num_labels else None
  names = [str(n) for n in names] if names else [f'LABEL_{i}' for i in range(num_labels)]
  return dict(id2label={str(i): n for i, n in enumerate(names)}, label2id={n: i for i, n in enumerate(names)})


def check(model_cfg):
  """(target, resolved config) of a vvt model config: NotExpressible (one line naming the scheme or field) for what
  no transformers class expresses, ValueError for an invalid config. The target's own fields are checked by its
  to_hf."""
  m = vvt.models.resolve(model_cfg)
  t = select(m)
  _check_generic(m, t)
  return t, m


def to_hf(params, model_cfg, class_names=None, multi_label: bool = False) -> tuple[str, dict, dict[str, np.ndarray]]:
  """vvt params + model config (+ the run's class names) -> (transformers class, config dict, state dict).
  multi_label: the classes are independent (a multi-label task, sigmoid per class): the config's `problem_type`
  says so (transformers then applies no softmax: its loss is BCEWithLogitsLoss); a single-label model keeps
  transformers' default (none, read as single-label classification)."""
  t, m = check(model_cfg)
  config, state = t.to_hf(layout.to_per_layer(params), m)
  if m.get('text') is None:  # a video-text model has no classifier, no labels
    config = {**config, **labels(class_names, int(m.num_classes))}
  config = {**config, 'dtype': 'float32'}
  if multi_label:
    config['problem_type'] = MULTI_LABEL
  return t.hf_class, config, state


MULTI_LABEL = 'multi_label_classification'  # transformers' problem_type of independent (sigmoid) classes


class OutputFolderError(ValueError):
  """An --output folder that holds files the export does not write (another model's): one line naming them."""
  bad_input = True


def check_output(output: str) -> None:
  """Nothing to say for a new or empty folder, or one holding only the files an export writes (a previous export,
  replaced); OutputFolderError naming the other files (e.g. another model's preprocessor_config.json, which
  would stay beside the new model), or a file where the folder should be."""
  if os.path.exists(output) and not os.path.isdir(output):
    raise OutputFolderError(f'{output} is a file; --format hf writes a folder (config.json, model.safetensors)')
  from vvt.data import TOKENIZER_FILES  # a video-text model's export carries its tokenizer's files
  written = {CONFIG_FILE, WEIGHTS_FILE, *TOKENIZER_FILES}
  others = sorted(set(os.listdir(output)) - written) if os.path.isdir(output) else []
  if others:
    more = f' and {len(others) - 3} more' if len(others) > 3 else ''
    raise OutputFolderError(f'{output} holds files the export does not write ({", ".join(others[:3])}{more}): they '
                            f'would stay beside the new {CONFIG_FILE} and {WEIGHTS_FILE} as if of this model; '
                            'choose a new or empty folder')


def write(params, model_cfg, output: str, class_names=None, multi_label: bool = False) -> tuple[str, int]:
  """Writes `output/config.json` and `output/model.safetensors` (float32, save_pretrained's names, metadata
  format 'pt'); nothing is written when the model is refused or the folder holds other files (`check_output`).
  Returns (transformers class, number of tensors)."""
  hf_class, config, state = to_hf(params, model_cfg, class_names, multi_label)
  return hf_class, _save(config, state, output)


def _save(config: dict, state: dict, output: str) -> int:
  """config.json and model.safetensors in `output` (checked by `check_output` first); returns the tensor count."""
  from safetensors.numpy import save_file
  check_output(output)
  os.makedirs(output, exist_ok=True)
  save_file(state, os.path.join(output, WEIGHTS_FILE), metadata={'format': 'pt'})
  with open(os.path.join(output, CONFIG_FILE), 'w') as f:
    f.write(json.dumps(config, indent=2, sort_keys=True) + '\n')
  return len(state)


def write_pretraining(params, model_cfg, output: str, fields=None) -> tuple[str, int]:
  """As `write`, of a pretraining run's model (the encoder and the task's own modules, e.g. V-JEPA 2's predictor:
  a `VJEPA2Model`) instead of a classifier: the model's target module's `to_hf_pretraining`; `fields`: the
  config.json fields the run's task options decide (its `hf_pretraining_fields` hook), over the module's defaults.
  NotExpressible for a model whose transformers class has no pretraining model vvt writes."""
  hf_class, config, state = to_hf_pretraining(params, model_cfg)
  config = {**config, **(fields or {})}
  return hf_class, _save(config, state, output)


def pretraining_module(model_cfg):
  """The exporter module of the resolved `model_cfg`'s transformers target that writes its pretraining model
  (`to_hf_pretraining`); NotExpressible naming the class where there is none."""
  import importlib
  t = select(model_cfg)
  module = importlib.import_module(t.module)
  if not hasattr(module, 'to_hf_pretraining'):
    raise torch_layout.NotExpressible(f'{_scheme(model_cfg)}: vvt writes no pretraining model of {t.hf_class}')
  return module


def to_hf_pretraining(params, model_cfg) -> tuple[str, dict, dict[str, np.ndarray]]:
  """(transformers class, config dict, state dict) of a pretraining run's params (`write_pretraining`)."""
  m = vvt.models.resolve(model_cfg)
  module = pretraining_module(m)
  config, state = module.to_hf_pretraining(layout.to_per_layer(params), m)
  return module.PRETRAINING_CLASS, {**config, 'dtype': 'float32'}, state

