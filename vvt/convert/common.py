"""Shared pieces of every converter: safe file reading, key bookkeeping, layout helpers, the load report.

Nothing here executes code from a file: `.npz` is read with `allow_pickle=False`, `.safetensors` with
safetensors, flax `.msgpack` with `flax.serialization.msgpack_restore` (plain arrays and dicts), and
PyTorch `.pth/.pyth/.pt/.bin` with `torch.load(weights_only=True)` (torch is imported only then).

Layouts: torch Linear weight (out, in), y = x W^T + b  ->  flax Dense kernel (in, out) = W^T.
A fused torch qkv Linear(D, 3D) holds rows [q | k | v]; head h owns features [h*d_h, (h+1)*d_h) of each,
so the flax query kernel (D, H, d_h) is W[0:D].T.reshape(D, H, d_h) (same for k, v), and the output
projection Linear(D, D) becomes out kernel (H, d_h, D) = W.T.reshape(H, d_h, D).
"""
from __future__ import annotations

import dataclasses
import difflib
import os
from typing import Any, Iterable, Mapping

import numpy as np

TORCH_EXTENSIONS = ('.pth', '.pyth', '.pt', '.bin', '.ckpt')


# ----------------------------------------------------------------------------------------------- reading


def flatten(tree: Mapping, sep: str = '/', prefix: str = '') -> dict[str, Any]:
  """Nested dicts -> {'a/b/c': leaf}."""
  out = {}
  for k, v in tree.items():
    key = f'{prefix}{sep}{k}' if prefix else str(k)
    if isinstance(v, Mapping):
      out.update(flatten(v, sep, key))
    else:
      out[key] = v
  return out


def unflatten(flat: Mapping[str, Any], sep: str = '/') -> dict:
  """{'a/b/c': leaf} -> nested dicts."""
  tree: dict = {}
  for key, v in flat.items():
    node = tree
    parts = key.split(sep)
    for p in parts[:-1]:
      node = node.setdefault(p, {})
      if not isinstance(node, dict):
        raise ValueError(f'parameter name {key!r} clashes with a leaf at {p!r}')
    node[parts[-1]] = v
  return tree


def _torch_load(path: str) -> dict[str, np.ndarray]:
  try:
    import torch  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise ImportError(f'reading the PyTorch checkpoint {path} needs torch (pip install torch); '
                      'vvt needs it for nothing else') from None
  obj = torch.load(path, map_location='cpu', weights_only=True)
  # Official checkpoints wrap the state dict: TimeSformer/SlowFast {'model_state': ...}, others 'state_dict'/'model'.
  for wrapper in ('model_state', 'state_dict', 'model', 'module'):
    if isinstance(obj, Mapping) and wrapper in obj and isinstance(obj[wrapper], Mapping):
      obj = obj[wrapper]
      break
  if not isinstance(obj, Mapping):
    raise ValueError(f'{path}: expected a state dict (name -> tensor), got {type(obj).__name__}')
  out = {}
  for k, v in obj.items():
    if hasattr(v, 'detach'):
      out[str(k)] = v.detach().to(torch.float32).numpy() if v.is_floating_point() else v.detach().numpy()
  return out


def _strip_params_prefix(flat: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  """Fixture / scenic files may store `params/<name>` (and other collections): keep the params."""
  if any(k.startswith('params/') for k in flat):
    return {k[len('params/'):]: v for k, v in flat.items() if k.startswith('params/')}
  return flat


def sniff_format(path: str) -> str:
  """Format of a file without a known extension (e.g. flax's `checkpoint_<step>` msgpack files), from its bytes."""
  import zipfile  # pylint: disable=g-import-not-at-top
  with open(path, 'rb') as f:
    head = f.read(16)
  if head[:2] == b'PK':
    with zipfile.ZipFile(path) as z:
      names = z.namelist()
    if names and all(n.endswith('.npy') for n in names):
      return 'npz'
    if any(n.endswith('data.pkl') for n in names):
      return 'torch'
  elif len(head) >= 9 and head[8:9] == b'{':  # safetensors: u64 header length, then a JSON header
    return 'safetensors'
  elif head and (0x80 <= head[0] <= 0x8f or head[0] in (0xde, 0xdf)):  # msgpack map
    return 'msgpack'
  raise ValueError(f'cannot tell the format of {path} (extension or content); expected .npz, .safetensors, '
                   '.msgpack (flax) or a PyTorch .pth/.pyth/.pt/.bin file')


def load_state(path: str, format: str | None = None) -> dict[str, np.ndarray]:  # pylint: disable=redefined-builtin
  """Reads a checkpoint file into a flat {name: float32 array} dict, without executing code from the file.

  format: 'npz' | 'safetensors' | 'msgpack' | 'torch' | None (from the extension). Flax trees are flattened
  with '/', PyTorch state dicts keep their '.'-separated keys. A leading `params/` collection is unwrapped.
  A directory is read as a Hugging Face model folder (model.safetensors, else pytorch_model.bin).
  """
  if not os.path.exists(path):
    raise FileNotFoundError(f'checkpoint file {path} does not exist')
  if os.path.isdir(path):
    for name in ('model.safetensors', 'pytorch_model.bin'):
      if os.path.exists(os.path.join(path, name)):
        return load_state(os.path.join(path, name), format)
    raise FileNotFoundError(f'{path} is a directory without model.safetensors or pytorch_model.bin')
  if format is None:
    lower = path.lower()
    if lower.endswith('.npz'):
      format = 'npz'
    elif lower.endswith('.safetensors'):
      format = 'safetensors'
    elif lower.endswith('.msgpack') or lower.endswith('.flax'):
      format = 'msgpack'
    elif lower.endswith(TORCH_EXTENSIONS):
      format = 'torch'
    else:
      format = sniff_format(path)
  if format == 'npz':
    with np.load(path, allow_pickle=False) as z:
      flat = {k: np.asarray(z[k]) for k in z.files}
  elif format == 'safetensors':
    from safetensors.numpy import load_file  # pylint: disable=g-import-not-at-top
    flat = dict(load_file(path))
  elif format == 'msgpack':
    from flax import serialization  # pylint: disable=g-import-not-at-top
    with open(path, 'rb') as f:
      tree = serialization.msgpack_restore(f.read())
    if not isinstance(tree, Mapping):
      raise ValueError(f'{path}: expected a msgpack dict of parameters, got {type(tree).__name__}')
    if 'params' in tree and isinstance(tree['params'], Mapping):
      tree = tree['params']
    elif 'optimizer' in tree and isinstance(tree['optimizer'], Mapping):  # scenic/flax TrainState
      tree = tree['optimizer'].get('target', tree['optimizer'])
    flat = flatten(tree)
  elif format == 'torch':
    flat = _torch_load(path)
  else:
    raise ValueError(f'unknown checkpoint format {format!r}; expected npz, safetensors, msgpack or torch')
  flat = _strip_params_prefix(flat)
  return {k: (np.asarray(v, np.float32) if np.issubdtype(np.asarray(v).dtype, np.floating) else np.asarray(v))
          for k, v in flat.items()}


# ---------------------------------------------------------------------------------------- bookkeeping


class Source:
  """A flat checkpoint dict that records which names were used, so leftovers can be reported."""

  def __init__(self, state: Mapping[str, np.ndarray], origin: str = 'checkpoint'):
    self.state = dict(state)
    self.origin = origin
    self.used: set[str] = set()

  def __contains__(self, key):
    return key in self.state

  def keys(self):
    return self.state.keys()

  def take(self, key: str) -> np.ndarray:
    if key not in self.state:
      close = difflib.get_close_matches(key, list(self.state), n=3)
      hint = f'; similar names in the file: {", ".join(close)}' if close else ''
      raise KeyError(f'{self.origin}: parameter {key!r} is missing{hint}')
    self.used.add(key)
    return np.asarray(self.state[key], np.float32)

  def get(self, key: str):
    return self.take(key) if key in self.state else None

  def unused(self) -> list[str]:
    return sorted(set(self.state) - self.used)

  def matching(self, prefix: str) -> list[str]:
    return sorted(k for k in self.state if k.startswith(prefix))


@dataclasses.dataclass
class Report:
  """What happened to every parameter: loaded as is, transformed (and how), freshly initialised, unused."""
  loaded: list[tuple[str, str]] = dataclasses.field(default_factory=list)        # (vvt name, file name)
  transformed: list[tuple[str, str]] = dataclasses.field(default_factory=list)   # (vvt name, how)
  initialised: list[tuple[str, str]] = dataclasses.field(default_factory=list)   # (vvt name, why)
  unused: list[str] = dataclasses.field(default_factory=list)                    # file names

  def __str__(self):
    lines = []
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
    import vvt.models  # pylint: disable=g-import-not-at-top
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
    return Converted(unflatten(self.flat), model_fields, self.report)


# ----------------------------------------------------------------------------------- layout helpers


def torch_layer_norm(w: Writer, name: str, key: str):
  """torch LayerNorm weight/bias -> flax scale/bias."""
  w.copy(f'{name}/scale', f'{key}.weight')
  w.copy(f'{name}/bias', f'{key}.bias')


def torch_dense(w: Writer, name: str, key: str, bias: bool = True):
  """torch Linear (out, in) -> flax Dense kernel (in, out)."""
  w.copy(f'{name}/kernel', f'{key}.weight', 'transpose (out,in)->(in,out)', lambda a: a.T)
  if bias:
    w.copy(f'{name}/bias', f'{key}.bias')


def torch_qkv(w: Writer, name: str, key: str, num_heads: int):
  """Fused torch qkv Linear(D, 3D) with rows [q | k | v] -> flax query/key/value (D, H, d_h) + (H, d_h)."""
  weight = w.src.take(f'{key}.weight')
  three_d, d = weight.shape
  if three_d != 3 * d:
    raise ValueError(f'{key}.weight has shape {weight.shape}; a fused qkv needs (3*D, D)')
  if d % num_heads:
    raise ValueError(f'{key}: hidden size {d} is not divisible by num_heads={num_heads}')
  hd = d // num_heads
  bias = w.src.get(f'{key}.bias')
  for i, part in enumerate(('query', 'key', 'value')):
    w.put(f'{name}/{part}/kernel', weight[i * d:(i + 1) * d].T.reshape(d, num_heads, hd), f'{key}.weight',
          f'rows [{i}D:{i + 1}D] ({part}) transposed, split into {num_heads} heads')
    if bias is not None:
      w.put(f'{name}/{part}/bias', bias[i * d:(i + 1) * d].reshape(num_heads, hd), f'{key}.bias',
            f'[{i}D:{i + 1}D] ({part}) split into heads')
  return bias is not None


def torch_separate_qkv(w: Writer, name: str, keys: tuple[str, str, str], num_heads: int):
  """Separate torch q/k/v Linear(D, D) -> flax query/key/value (D, H, d_h) + (H, d_h)."""
  has_bias = True
  for part, key in zip(('query', 'key', 'value'), keys):
    weight = w.src.take(f'{key}.weight')
    d_out, d = weight.shape
    if d_out % num_heads:
      raise ValueError(f'{key}: {d_out} features are not divisible by num_heads={num_heads}')
    w.put(f'{name}/{part}/kernel', weight.T.reshape(d, num_heads, d_out // num_heads), f'{key}.weight',
          'transposed, split into heads')
    bias = w.src.get(f'{key}.bias')
    if bias is not None:
      w.put(f'{name}/{part}/bias', bias.reshape(num_heads, d_out // num_heads), f'{key}.bias', 'split into heads')
    else:
      has_bias = False
  return has_bias


def torch_attention_out(w: Writer, name: str, key: str, num_heads: int):
  """torch output projection Linear(D, D) -> flax out kernel (H, d_h, D) + bias (D,)."""
  weight = w.src.take(f'{key}.weight')
  d, d_in = weight.shape
  w.put(f'{name}/kernel', weight.T.reshape(num_heads, d_in // num_heads, d), f'{key}.weight',
        'transposed, split into heads')
  w.copy(f'{name}/bias', f'{key}.bias')


def torch_vit_block(w: Writer, name: str, key: str, num_heads: int, *, norm: str, attention: str) -> bool:
  """A timm-layout pre-LN block `key.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}` into the vvt block
  `name` (its attention LayerNorm and MSA named `norm` and `attention`). Returns whether the qkv has a bias."""
  torch_layer_norm(w, f'{name}/{norm}', f'{key}.norm1')
  has_bias = torch_qkv(w, f'{name}/{attention}', f'{key}.attn.qkv', num_heads)
  torch_attention_out(w, f'{name}/{attention}/out', f'{key}.attn.proj', num_heads)
  torch_layer_norm(w, f'{name}/mlp_norm', f'{key}.norm2')
  torch_dense(w, f'{name}/mlp/Dense_0', f'{key}.mlp.fc1')
  torch_dense(w, f'{name}/mlp/Dense_1', f'{key}.mlp.fc2')
  return has_bias


def torch_patch_embedding(w: Writer, name: str, key: str):
  """torch Conv2d (D, C, p, p) -> vvt tubelet kernel (1, p, p, C, D); Conv3d (D, C, t, h, w) -> (t, h, w, C, D)."""
  weight = w.src.take(f'{key}.weight')
  if weight.ndim == 4:
    w.put(f'{name}/kernel', weight.transpose(2, 3, 1, 0)[None], f'{key}.weight',
          'Conv2d (D,C,h,w) -> (1,h,w,C,D)')
  elif weight.ndim == 5:
    w.put(f'{name}/kernel', weight.transpose(2, 3, 4, 1, 0), f'{key}.weight', 'Conv3d (D,C,t,h,w) -> (t,h,w,C,D)')
  else:
    raise ValueError(f'{key}.weight has shape {weight.shape}; expected a Conv2d or Conv3d kernel')
  w.copy(f'{name}/bias', f'{key}.bias')
  return weight


def strip_prefix(state: Mapping[str, np.ndarray], prefixes: Iterable[str]) -> dict[str, np.ndarray]:
  """Removes a leading prefix (e.g. DataParallel's 'module.') from every key that has it."""
  out = dict(state)
  for prefix in prefixes:
    if out and all(k.startswith(prefix) for k in out):
      out = {k[len(prefix):]: v for k, v in out.items()}
  return out


def gelu_approximate_of(hidden_act: str) -> bool:
  """Hugging Face `hidden_act` -> vvt gelu_approximate (exact erf GELU or the tanh formula)."""
  if hidden_act == 'gelu':
    return False
  if hidden_act in ('gelu_fast', 'gelu_new', 'gelu_pytorch_tanh'):
    return True
  raise ValueError(f"hidden_act={hidden_act!r} is not a GELU vvt supports (use 'gelu' for exact, "
                   "'gelu_fast'/'gelu_new'/'gelu_pytorch_tanh' for the tanh approximation)")


def variant_name(hidden_size: int, patch: int, tubelet_t: int = 1) -> str:
  """The ViT size name for a hidden size ('B/16', 'L/16x2'); 'B' when the width is not a standard one (the
  explicit hidden_size/num_layers/num_heads/mlp_dim fields of the converted config decide anyway)."""
  sizes = {192: 'Ti', 384: 'S', 768: 'B', 1024: 'L', 1280: 'H'}
  name = f'{sizes.get(int(hidden_size), "B")}/{int(patch)}'
  return name + (f'x{int(tubelet_t)}' if tubelet_t > 1 else '')
