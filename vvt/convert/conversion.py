"""The bookkeeping of a conversion: what is asked (`Ask`), the file's names taken once (`Source`), the vvt params
written with what happened to each (`Writer`, `Report`), and the result (`Converted`); a fresh head or pooler where
the file has none.
"""
from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Iterable, Mapping

import numpy as np

from vvt.convert import weight_files
from vvt.convert.weight_files import WeightFileError


@dataclasses.dataclass(frozen=True)
class Ask:
  """What a converter is asked for (`vvt.convert.video.convert_state` builds it): the clip length and frame size to
  run at (None: the weights'), the Hugging Face config (a dict; None without), and `model_cfg`, a vvt model config
  (or None) that fills in what the weights do not say (`hint`); `pretraining`: the conversion is for a run whose task
  pretrains (its `hf_pretraining` hook: a pretraining model's own modules, V-JEPA 2's predictor, are kept)."""
  model_cfg: Any = None
  hf_config: Mapping | None = None
  num_frames: int | None = None
  image_size: Any = None
  pretraining: bool = False

  def hint(self, field: str):
    """`field` of the model config, resolved (its own value where it does not resolve; None without a config)."""
    if self.model_cfg is None:
      return None
    try:
      import vvt.models
      return vvt.models.resolve(self.model_cfg)[field]
    except (ValueError, KeyError, AttributeError):
      return self.model_cfg.get(field) if hasattr(self.model_cfg, 'get') else None

  def raw(self, *path: str):
    """A field of the model config as written (None where unset): X-ViT's num_segments None means "= num_frames"."""
    node = self.model_cfg
    for p in path:
      if node is None or not hasattr(node, 'get'):
        return None
      node = node.get(p)
    return node

  @property
  def frames_hint(self) -> int | None:
    """The clip length asked, else the config's."""
    return self.num_frames or self.hint('num_frames')


class Source:
  """A flat checkpoint dict that records which names were used, so leftovers can be reported."""

  def __init__(self, state: Mapping[str, np.ndarray], origin: str = 'checkpoint'):
    self.state = dict(state)
    path = weight_files.path_of(state)
    self.origin = f'{origin} {path}' if path and path not in origin else origin
    self.used: set[str] = set()

  def __contains__(self, key):
    return key in self.state

  def keys(self):
    return self.state.keys()

  def shape(self, key: str) -> tuple:
    """The shape of parameter `key`, read from the file's header where it has one (npz: nothing inflated)."""
    if key not in self.state:
      self.take(key)  # the missing parameter's error
    return tuple(np.shape(self.state[key]))

  def take(self, key: str) -> np.ndarray:
    if key not in self.state:
      close = difflib.get_close_matches(key, list(self.state), n=3)
      hint = f'; similar names in the file: {", ".join(close)}' if close else ''
      raise KeyError(f'{self.origin}: parameter {key!r} is missing{hint}')
    self.used.add(key)
    return weight_files.float_parameter(self.origin, key, self.state[key])

  def matrix(self, key: str, ndim: int = 2) -> np.ndarray:
    """`take(key)`, which must have `ndim` dimensions (a clear error naming the file otherwise; checked before the
    data is read)."""
    shape = self.shape(key)
    if len(shape) != ndim:
      raise WeightFileError(f'{self.origin}: parameter {key!r} has shape {shape}; expected {ndim} dimensions')
    return self.take(key)

  def get(self, key: str):
    return self.take(key) if key in self.state else None

  def unused(self) -> list[str]:
    return sorted(set(self.state) - self.used)


@dataclasses.dataclass
class Report:
  """What happened to every parameter: loaded as is, transformed (and how), freshly initialised, unused."""
  loaded: list[tuple[str, str]] = dataclasses.field(default_factory=list)        # (vvt name, file name)
  transformed: list[tuple[str, str]] = dataclasses.field(default_factory=list)   # (vvt name, how)
  initialised: list[tuple[str, str]] = dataclasses.field(default_factory=list)   # (vvt name, why)
  unused: list[str] = dataclasses.field(default_factory=list)                    # file names
  notes: list[str] = dataclasses.field(default_factory=list)                     # e.g. another clip length

  def __str__(self):
    lines = [f'note: {n}' for n in self.notes]
    for title, rows in (('loaded', self.loaded), ('transformed', self.transformed),
                        ('freshly initialised', self.initialised)):
      lines.append(f'{title}: {len(rows)}')
      lines.extend(f'  {a}  <-  {b}' for a, b in rows)
    lines.append(f'in the file but unused: {len(self.unused)}')
    lines.extend(f'  {u}' for u in self.unused)
    return '\n'.join(lines)

  def to_dict(self):
    return dataclasses.asdict(self)


@dataclasses.dataclass
class Converted:
  """Result of a video converter: vvt params (nested, float32 numpy), the model config fields that express
  the reference exactly (to update `vvt.models.get_config(...)` with), and the report."""
  params: dict
  model_fields: dict
  report: Report

  def model_config(self, **overrides):
    """The full vvt model config (`vvt.models.get_config(**fields)`), updated by `overrides`."""
    import vvt.models
    fields = dict(self.model_fields)
    fields.update(overrides)
    return vvt.models.get_config(**fields)


class Writer:
  """Builds the flat vvt param dict and the report at the same time."""

  def __init__(self, src: Source):
    self.src = src
    self.flat: dict[str, np.ndarray] = {}
    self.report = Report()

  def put(self, name: str, value: np.ndarray, sources: str | Iterable[str], how: str | None = None):
    if name in self.flat:
      raise ValueError(f'internal error: vvt parameter {name} written twice')
    self.flat[name] = np.asarray(value, np.float32)
    src = sources if isinstance(sources, str) else ' + '.join(sources)
    if how is None:
      self.report.loaded.append((name, src))
    else:
      self.report.transformed.append((name, f'{how} of {src}'))

  def copy(self, name: str, key: str, how: str | None = None, fn=None):
    v = self.src.take(key)
    self.put(name, v if fn is None else fn(v), key, how)

  def result(self, model_fields: dict) -> Converted:
    self.report.unused = self.src.unused()
    return Converted(weight_files.unflatten(self.flat), model_fields, self.report)


def strip_prefix(state: Mapping[str, np.ndarray], prefixes: Iterable[str]) -> dict[str, np.ndarray]:
  """Removes a leading prefix (e.g. DataParallel's 'module.') from every key that has it."""
  out = dict(state)
  for prefix in prefixes:
    if out and all(k.startswith(prefix) for k in out):
      out = {k[len(prefix):]: v for k, v in out.items()}
  return weight_files.with_path(out, state)


def variant_name(hidden_size: int, patch: int, tubelet_t: int = 1) -> str:
  """The ViT size name for a hidden size ('B/16', 'L/16x2'); 'B' when the width is not a standard one (the
  explicit hidden_size/num_layers/num_heads/mlp_dim fields of the converted config decide anyway)."""
  sizes = {192: 'Ti', 384: 'S', 768: 'B', 1024: 'L', 1280: 'H'}
  name = f'{sizes.get(int(hidden_size), "B")}/{int(patch)}'
  return name + (f'x{int(tubelet_t)}' if tubelet_t > 1 else '')


def fresh_pooler(model_fields: dict, seed: int = 0) -> dict[str, np.ndarray]:
  """The attentive pooler (classifier='attentive') of a model of `model_fields`, freshly initialised by vvt's own
  initialisers (what training such a model from scratch starts from): flat names under `pooler/`. For a bare
  encoder converted with a new classification head."""
  import jax
  import jax.numpy as jnp

  import vvt.models
  from vvt.models import spec as spec_lib
  from vvt.models import video_transformer
  cfg = vvt.models.resolve(vvt.models.get_config(**model_fields))
  pooler = video_transformer.attentive_pooler(spec_lib.spec_of(cfg))
  tokens = jnp.zeros((1, 1, cfg.hidden_size), jnp.float32)
  params = jax.jit(pooler.init)(jax.random.key(seed), tokens)['params']
  return {f'pooler/{k}': np.asarray(v, np.float32) for k, v in weight_files.flatten(params).items()}


def new_classifier(w: Writer, hidden: int, num_classes, what: str) -> None:
  """A new zero classifier (every fresh vvt head starts at zero) of `num_classes` (an int, or a dict of heads) on a
  `hidden`-wide representation, reported as freshly initialised."""
  heads = {'': num_classes} if isinstance(num_classes, int) else {f'_{k}': v for k, v in dict(num_classes).items()}
  for suffix, n in heads.items():
    for name, value in ((f'head/output_projection{suffix}/kernel', np.zeros((hidden, int(n)), np.float32)),
                        (f'head/output_projection{suffix}/bias', np.zeros(int(n), np.float32))):
      w.flat[name] = value
      w.report.initialised.append((name, f'new classifier ({what})'))


def new_attentive_head(w: Writer, model_fields: dict, hidden: int, num_classes, what: str) -> None:
  """A bare encoder's new head: a `fresh_pooler` and a zero `new_classifier`, reported as freshly initialised;
  `what`: why the checkpoint has none."""
  for name, value in fresh_pooler(model_fields).items():
    w.flat[name] = value
    w.report.initialised.append((name, f"new attentive pooler ({what}): vvt's initialisation"))
  new_classifier(w, hidden, num_classes, what)


def check_layer_count(found: Iterable[int], n: int, field: str) -> None:
  """ValueError naming hf_config.`field` where the checkpoint has layers (their indices `found`) beyond its `n`."""
  extra = sorted(set(found) - set(range(n)))
  if extra:
    raise ValueError(f'hf_config.{field}={n} but the checkpoint also has layers {extra}')


def at_clip_asked(convert):
  """A source module's `convert_for(state, ask)` for a `convert(state, hf_config, *, num_frames, image_size,
  num_classes)` that runs at any clip: at the clip asked (None: config.json's); a backbone's new head has the
  config's classes."""
  def convert_for(state: Mapping[str, np.ndarray], ask: Ask) -> Converted:
    return convert(state, ask.hf_config, num_frames=ask.num_frames, image_size=ask.image_size,
                   num_classes=ask.hint('num_classes'))
  return convert_for


def check_hf_sizes(cfg: Mapping, names: Iterable[str], channels: str, zero_ok: str = '') -> None:
  """ValueError naming hf_config.NAME where a field in `names` is not a positive int (`zero_ok`: the one that may
  be 0), or hf_config.`channels` where the video is not RGB."""
  for name in names:
    value = cfg[name]
    if not isinstance(value, int) or isinstance(value, bool) or value < (0 if name == zero_ok else 1):
      raise ValueError(f'hf_config.{name} must be a positive int, got {value!r}')
  if cfg[channels] != 3:
    raise ValueError(f'hf_config.{channels}={cfg[channels]}: vvt models take RGB video (3 channels)')
