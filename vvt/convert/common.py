"""Shared pieces of every converter: safe file reading, key bookkeeping, layout helpers, the load report.

Nothing here executes code from a file: `.npz` is read with `allow_pickle=False`, `.safetensors` with
safetensors, flax `.msgpack` with `flax.serialization.msgpack_restore` (plain arrays and dicts), and
PyTorch `.pth/.pyth/.pt/.bin` with `torch.load(weights_only=True)` (torch is imported only then).

Every read goes through `load_state`, which turns any failure of a reader on a broken or hostile file
(truncated, huge or inconsistent headers, pickled objects, non-tensor entries, complex / string / object
arrays) into one `WeightFileError` (a ValueError) naming the file and what is wrong. The state it returns
remembers its file (`path_of`), so `Source` names the file when a parameter is missing or not a finite
float tensor, and `naming_file` gives any other converter error the file's name.

Layouts: torch Linear weight (out, in), y = x W^T + b  ->  flax Dense kernel (in, out) = W^T.
A fused torch qkv Linear(D, 3D) holds rows [q | k | v]; head h owns features [h*d_h, (h+1)*d_h) of each,
so the flax query kernel (D, H, d_h) is W[0:D].T.reshape(D, H, d_h) (same for k, v), and the output
projection Linear(D, D) becomes out kernel (H, d_h, D) = W.T.reshape(H, d_h, D).
`TorchState` writes vvt params back in these layouts (Hugging Face export), bit for bit the inverse.
"""
from __future__ import annotations

import contextlib
import dataclasses
import difflib
import functools
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


class WeightFileError(ValueError):
  """A weight file that cannot be read, or holds something other than numeric tensors: the message names it."""


LISTED = 20  # the problems a FitError's message lists (then 'and K more')


class FitError(ValueError):
  """Parameters that do not fit a model: one line, `HEADER (N WHAT): the first LISTED problems; and K more`.
  `items`: every problem."""

  def __init__(self, header: str, items: Iterable[str], what: str = 'problem(s)'):
    self.items = tuple(str(i).strip() for i in items)
    shown = '; '.join(self.items[:LISTED])
    more = f'; and {len(self.items) - LISTED} more' if len(self.items) > LISTED else ''
    super().__init__(f'{header} ({len(self.items)} {what}): {shown}{more}')


class State(dict):
  """A flat {name: array} dict that remembers the file it was read from (`path`)."""

  def __init__(self, items=(), path: str | None = None):
    super().__init__(items)
    self.path = path


def path_of(state) -> str | None:
  """The file a state dict was read from (None for a dict built in memory)."""
  return getattr(state, 'path', None)


def with_path(new: Mapping, old) -> dict:
  """`new` as a State remembering `old`'s file, if it has one."""
  return State(new, path_of(old)) if path_of(old) else dict(new)


def _reason(error: BaseException) -> str:
  """The informative line of a reader's error message, as one short line."""
  lines = [l.strip() for l in str(error).splitlines() if l.strip()]
  for marker in ('Unsupported global', 'Unsupported operand', 'WeightsUnpickler error'):
    hits = [l for l in lines if marker in l]
    if hits:
      lines = hits
      break
  text = lines[0] if lines else ''
  text = text if len(text) <= 300 else text[:297] + '...'
  return f'{type(error).__name__}: {text}' if text else type(error).__name__


@contextlib.contextmanager
def naming_file(path: str | None, what: str = 'weight file'):
  """Any error raised inside (a reader's parse error, a converter's shape or key error) leaves as one
  `WeightFileError` naming `path`; FileNotFoundError and ImportError pass unchanged, as do messages that
  already name the file."""
  try:
    yield
  except (FileNotFoundError, ImportError, WeightFileError):
    raise
  except Exception as e:
    if path is None:
      raise
    text = str(e.args[0]) if isinstance(e, KeyError) and e.args else str(e)
    if path in text:
      raise WeightFileError(text) from e
    if isinstance(e, FitError):  # its list, whole
      raise WeightFileError(f'{path}: {what}: {text}') from e
    raise WeightFileError(f'{path}: {what}: {_reason(e)}') from e


def names_its_file(convert):
  """Decorator of a converter `convert(state, ...)`: any error it raises on the weights of a file names that
  file (`naming_file` with the state's `path_of`)."""
  @functools.wraps(convert)
  def wrapper(state, *args, **kwargs):
    with naming_file(path_of(state), 'cannot convert its weights'):
      return convert(state, *args, **kwargs)
  return wrapper


def _torch_load(path: str) -> dict[str, np.ndarray]:
  try:
    import torch
  except ImportError:
    raise ImportError(f'reading the PyTorch checkpoint {path} needs torch (pip install torch); '
                      'vvt needs it for nothing else') from None
  try:
    obj = torch.load(path, map_location='cpu', weights_only=True)
  except Exception as e:
    if 'Unsupported global' in str(e) or 'not an allowed global' in str(e):
      raise WeightFileError(f'{path}: refused (weights_only): it holds objects other than tensors and plain '
                            f'containers, which would run code to load; {_reason(e)}') from e
    raise
  # Official checkpoints wrap the state dict: TimeSformer/SlowFast {'model_state': ...}, others 'state_dict'/'model'.
  for wrapper in ('model_state', 'state_dict', 'model', 'module'):
    if isinstance(obj, Mapping) and wrapper in obj and isinstance(obj[wrapper], Mapping):
      obj = obj[wrapper]
      break
  if not isinstance(obj, Mapping):
    raise WeightFileError(f'{path}: expected a state dict (name -> tensor), got {type(obj).__name__}')
  out = {}
  for k, v in obj.items():
    if hasattr(v, 'detach'):
      if v.is_complex():
        raise WeightFileError(f'{path}: tensor {k!r} is complex ({v.dtype}); weights must be real numbers')
      out[str(k)] = v.detach().to(torch.float32).numpy() if v.is_floating_point() else v.detach().numpy()
  return out


class NpyMember(np.lib.mixins.NDArrayOperatorsMixin):
  """A `.npy` member of an npz file, its header read and checked, its data inflated on first use (`np.asarray`,
  arithmetic, any array method or index). `shape`, `ndim`, `dtype` and `size` come from the header, so a converter
  refuses a member of the wrong shape before inflating it: a zip bomb (a 512 MB array of zeros deflated into a
  small file) costs nothing until a converter takes it."""

  def __init__(self, path: str, name: str, shape, dtype):
    self._array = None
    self.path, self.name, self.shape, self.dtype = path, name, tuple(int(d) for d in shape), np.dtype(dtype)

  @property
  def ndim(self) -> int:
    return len(self.shape)

  @property
  def size(self) -> int:
    return int(np.prod(self.shape, dtype=np.int64))

  def load(self) -> np.ndarray:
    """The member's array (inflated once)."""
    if self._array is None:
      import zipfile
      with zipfile.ZipFile(self.path) as z, z.open(self.name) as f:
        self._array = np.lib.format.read_array(f, allow_pickle=False)
    return self._array

  def __array__(self, dtype=None, copy=None):
    array = self.load()
    return array if dtype is None else array.astype(dtype, copy=False)

  def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
    inputs = tuple(x.load() if isinstance(x, NpyMember) else x for x in inputs)
    return getattr(ufunc, method)(*inputs, **kwargs)

  def __getattr__(self, name: str):  # reshape, transpose, T, astype, ...: the inflated array's
    if name.startswith('_'):
      raise AttributeError(name)
    return getattr(self.load(), name)

  def __getitem__(self, index):
    return self.load()[index]

  def __len__(self) -> int:
    return self.shape[0]

  def __repr__(self) -> str:
    return f'NpyMember({self.path}:{self.name}, shape={self.shape}, dtype={self.dtype})'


def _read_npy_member(z, path: str, name: str) -> NpyMember:
  """One `.npy` member of the npz zip `z` (of file `path`), its header's shape checked against the member's size;
  its data is not read (`NpyMember`)."""
  info = z.getinfo(name)
  with z.open(name) as f:
    version = np.lib.format.read_magic(f)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(f)  # numpy refuses headers over 10 kB
    if dtype.hasobject:
      raise WeightFileError(f'{name}: an object array (pickled Python objects), refused: '
                            'Object arrays cannot be loaded when allow_pickle=False')
    header = f.tell()
    need = int(np.prod(shape, dtype=np.float64)) * dtype.itemsize
    if need != info.file_size - header:
      raise WeightFileError(f'{name}: header declares shape {tuple(shape)} {dtype} ({need} bytes) but the member '
                            f'holds {info.file_size - header} bytes')
  return NpyMember(path, name, shape, dtype)


def _read_npz(path: str) -> dict[str, NpyMember]:
  import zipfile
  with zipfile.ZipFile(path) as z:
    names = z.namelist()
    bad = [n for n in names if not n.endswith('.npy')]
    if bad:
      raise WeightFileError(f'{path}: not an npz of arrays: member {bad[0]!r} is not a .npy array')
    try:
      return {n[:-len('.npy')]: _read_npy_member(z, path, n) for n in names}
    except WeightFileError as e:
      raise WeightFileError(f'{path}: {e}') from e


_SAFETENSORS_ITEMSIZE = {'F64': 8, 'F32': 4, 'F16': 2, 'BF16': 2, 'I64': 8, 'I32': 4, 'I16': 2, 'I8': 1, 'U64': 8,
                         'U32': 4, 'U16': 2, 'U8': 1, 'BOOL': 1, 'F8_E4M3': 1, 'F8_E5M2': 1}


def safetensors_header(path: str) -> tuple[dict, dict]:
  """(tensors {name: {dtype, shape, data_offsets}}, metadata) of a safetensors file, each tensor's byte range
  checked against the file's size before any data is read: WeightFileError naming the file and the tensor whose
  data offsets lie past the end of the file, overlap the header or disagree with its shape."""
  import json
  import struct
  size = os.path.getsize(path)
  with open(path, 'rb') as f:
    head = f.read(8)
    if len(head) < 8:
      raise WeightFileError(f'{path}: not a safetensors file: {size} bytes, shorter than its 8-byte header length')
    (n,) = struct.unpack('<Q', head)
    if n > size - 8:
      raise WeightFileError(f'{path}: the safetensors header claims {n} bytes, the file holds {size - 8} after '
                            'its length field (truncated or not a safetensors file)')
    try:
      header = json.loads(f.read(n))
    except ValueError as e:
      raise WeightFileError(f'{path}: the safetensors header is not valid JSON ({_reason(e)})') from None
  if not isinstance(header, dict):
    raise WeightFileError(f'{path}: the safetensors header is not a JSON object')
  metadata = header.pop('__metadata__', None) or {}
  data = size - 8 - n
  for name, info in header.items():
    begin, end = (info.get('data_offsets') or (None, None)) if isinstance(info, dict) else (None, None)
    if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end):
      raise WeightFileError(f'{path}: tensor {name!r} has no valid data offsets in the safetensors header')
    if end > data:
      raise WeightFileError(f'{path}: tensor {name!r}: its data offsets [{begin}, {end}] lie past the end of the '
                            f'file (its data section holds {data} bytes: truncated or a wrong header)')
    itemsize = _SAFETENSORS_ITEMSIZE.get(info.get('dtype'))
    shape = info.get('shape')
    if itemsize and isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape):
      need = int(np.prod(shape, dtype=np.float64)) * itemsize
      if need != end - begin:
        raise WeightFileError(f'{path}: tensor {name!r}: shape {tuple(shape)} {info["dtype"]} needs {need} bytes, '
                              f'its data offsets span {end - begin}')
  return header, metadata


def _read_safetensors(path: str) -> dict[str, np.ndarray]:
  from safetensors.numpy import load_file
  safetensors_header(path)
  return dict(load_file(path))


def _read_msgpack(path: str) -> dict[str, np.ndarray]:
  from flax import serialization
  with open(path, 'rb') as f:
    tree = serialization.msgpack_restore(f.read())
  if not isinstance(tree, Mapping):
    raise WeightFileError(f'{path}: expected a msgpack dict of parameters, got {type(tree).__name__}')
  if 'params' in tree and isinstance(tree['params'], Mapping):
    tree = tree['params']
  elif 'optimizer' in tree and isinstance(tree['optimizer'], Mapping):  # scenic/flax TrainState
    tree = tree['optimizer'].get('target', tree['optimizer'])
  return flatten(tree)


_READERS = {'npz': _read_npz, 'safetensors': _read_safetensors, 'msgpack': _read_msgpack, 'torch': _torch_load}


def checked_array(path: str, key: str, value) -> np.ndarray:
  """A value read from `path` as a numeric array (floats as float32), or WeightFileError naming the file, the
  key and what it is instead (complex, strings, objects, not an array)."""
  if isinstance(value, (bytes, str)) or value is None:
    raise WeightFileError(f'{path}: entry {key!r} is a {type(value).__name__}, not a tensor')
  if isinstance(value, NpyMember):  # checked by its header, inflated when taken (floats as float32 then)
    if value.dtype.kind not in 'biuf':
      raise WeightFileError(f'{path}: tensor {key!r} has dtype {value.dtype}; weights must be real numbers')
    return value
  try:
    array = np.asarray(value)
  except Exception as e:
    raise WeightFileError(f'{path}: entry {key!r} is not an array ({_reason(e)})') from e
  if array.dtype.kind not in 'biuf':
    raise WeightFileError(f'{path}: tensor {key!r} has dtype {array.dtype}; weights must be real numbers')
  return array.astype(np.float32) if array.dtype.kind == 'f' else array


def float_parameter(origin: str, key: str, value) -> np.ndarray:
  """`value` as a float32 parameter, or WeightFileError naming `origin` (the file) and `key` when it is not a
  floating-point tensor (int64, bool: a buffer or a wrong file) or holds NaN / infinite values."""
  value = np.asarray(value)
  if value.dtype.kind != 'f':
    raise WeightFileError(f'{origin}: parameter {key!r} has dtype {value.dtype}; expected floating point')
  value = value.astype(np.float32)
  if not np.isfinite(value).all():
    raise WeightFileError(f'{origin}: parameter {key!r} has {int((~np.isfinite(value)).sum())} NaN or '
                          'infinite values')
  return value


def _strip_params_prefix(flat: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
  """Fixture / scenic files may store `params/<name>` (and other collections): keep the params."""
  if any(k.startswith('params/') for k in flat):
    return {k[len('params/'):]: v for k, v in flat.items() if k.startswith('params/')}
  return flat


def sniff_format(path: str) -> str:
  """Format of a file without a known extension (e.g. flax's `checkpoint_<step>` msgpack files), from its bytes."""
  import zipfile
  with open(path, 'rb') as f:
    head = f.read(16)
  if head[:2] == b'PK':
    with naming_file(path, 'not a readable zip file'):
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
  raise WeightFileError(f'cannot tell the format of {path} (extension or content); expected .npz, .safetensors, '
                        '.msgpack (flax) or a PyTorch .pth/.pyth/.pt/.bin file')


def format_of(path: str) -> str:
  """'npz' | 'safetensors' | 'msgpack' | 'torch', from the extension or else the bytes."""
  lower = path.lower()
  if lower.endswith('.npz'):
    return 'npz'
  if lower.endswith('.safetensors'):
    return 'safetensors'
  if lower.endswith('.msgpack') or lower.endswith('.flax'):
    return 'msgpack'
  if lower.endswith(TORCH_EXTENSIONS):
    return 'torch'
  return sniff_format(path)


def load_state(path: str, format: str | None = None) -> State:
  """Reads a checkpoint file into a flat {name: array} State (floats as float32), without executing code from
  the file.

  format: 'npz' | 'safetensors' | 'msgpack' | 'torch' | None (from the extension). Flax trees are flattened
  with '/', PyTorch state dicts keep their '.'-separated keys. A leading `params/` collection is unwrapped.
  A directory is read as a Hugging Face model folder (model.safetensors, else pytorch_model.bin).
  Any failure to read the file, and any entry that is not a real-valued array, raises one `WeightFileError`
  naming the file and what is wrong. An npz's values are `NpyMember`s (their header checked, their data inflated
  on first use, in their own dtype: `np.asarray` gives the array; `Source.take` the float32 parameter).
  """
  if not os.path.exists(path):
    raise FileNotFoundError(f'checkpoint file {path} does not exist')
  if os.path.isdir(path):
    for name in ('model.safetensors', 'pytorch_model.bin'):
      if os.path.exists(os.path.join(path, name)):
        return load_state(os.path.join(path, name), format)
    raise FileNotFoundError(f'{path} is a directory without model.safetensors or pytorch_model.bin')
  format = format or format_of(path)
  if format not in _READERS:
    raise ValueError(f'unknown checkpoint format {format!r}; expected npz, safetensors, msgpack or torch')
  with naming_file(path, f'not a readable {format} weight file'):
    flat = _strip_params_prefix(_READERS[format](path))
  if not flat:
    raise WeightFileError(f'{path}: the {format} file holds no tensors')
  return State({k: checked_array(path, k, v) for k, v in flat.items()}, path)


# ---------------------------------------------------------------------------------------- bookkeeping


class Source:
  """A flat checkpoint dict that records which names were used, so leftovers can be reported."""

  def __init__(self, state: Mapping[str, np.ndarray], origin: str = 'checkpoint'):
    self.state = dict(state)
    path = path_of(state)
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
    return float_parameter(self.origin, key, self.state[key])

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
    return Converted(unflatten(self.flat), model_fields, self.report)


# ----------------------------------------------------------------------------------- layout helpers


def torch_layer_norm(w: Writer, name: str, key: str):
  """torch LayerNorm weight/bias -> flax scale/bias."""
  w.copy(f'{name}/scale', f'{key}.weight')
  w.copy(f'{name}/bias', f'{key}.bias')


def torch_dense(w: Writer, name: str, key: str, bias: bool = True):
  """torch Linear (out, in) -> flax Dense kernel (in, out)."""
  w.put(f'{name}/kernel', w.src.matrix(f'{key}.weight').T, f'{key}.weight', 'transpose (out,in)->(in,out)')
  if bias:
    w.copy(f'{name}/bias', f'{key}.bias')


def torch_qkv(w: Writer, name: str, key: str, num_heads: int):
  """Fused torch qkv Linear(D, 3D) with rows [q | k | v] -> flax query/key/value (D, H, d_h) + (H, d_h)."""
  weight = w.src.matrix(f'{key}.weight')
  three_d, d = weight.shape
  if three_d != 3 * d:
    raise WeightFileError(f'{w.src.origin}: {key}.weight has shape {weight.shape}; a fused qkv needs (3*D, D)')
  if d % num_heads:
    raise WeightFileError(f'{w.src.origin}: {key}: hidden size {d} is not divisible by num_heads={num_heads}')
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
  for part, key in zip(('query', 'key', 'value'), keys, strict=True):
    weight = w.src.matrix(f'{key}.weight')
    d_out, d = weight.shape
    if d_out % num_heads:
      raise WeightFileError(f'{w.src.origin}: {key}: {d_out} features are not divisible by num_heads={num_heads}')
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
  weight = w.src.matrix(f'{key}.weight')
  d, d_in = weight.shape
  if d_in % num_heads:
    raise WeightFileError(f'{w.src.origin}: {key}: {d_in} features are not divisible by num_heads={num_heads}')
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
    raise WeightFileError(f'{w.src.origin}: {key}.weight has shape {weight.shape}; expected a Conv2d or Conv3d '
                          'kernel')
  w.copy(f'{name}/bias', f'{key}.bias')
  return weight


def strip_prefix(state: Mapping[str, np.ndarray], prefixes: Iterable[str]) -> dict[str, np.ndarray]:
  """Removes a leading prefix (e.g. DataParallel's 'module.') from every key that has it."""
  out = dict(state)
  for prefix in prefixes:
    if out and all(k.startswith(prefix) for k in out):
      out = {k[len(prefix):]: v for k, v in out.items()}
  return with_path(out, state)


def gelu_approximate_of(hidden_act: str) -> bool:
  """Hugging Face `hidden_act` -> vvt gelu_approximate (exact erf GELU or the tanh formula)."""
  if hidden_act in ('gelu', 'gelu_python'):  # gelu_python: the erf formula written out (VideoPrism)
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


# ------------------------------------------------------------------ vvt -> PyTorch layouts (Hugging Face export)


class NotExpressible(ValueError):
  """A vvt model, or a value of one of its fields, that the target format cannot express: one line naming the
  field (or scheme) and its value."""


class TorchState:
  """Builds a PyTorch-layout state dict {name: float32 array} from vvt params: the inverse of the torch_* helpers
  above (so a file read by them and written back by these is bit-identical). Every vvt parameter is taken once;
  `result()` refuses params left over (a part of the vvt model the target has no place for)."""

  def __init__(self, params, target: str):
    self.flat = {k: np.asarray(v, np.float32) for k, v in flatten(params).items()}
    self.target = target
    self.used: set[str] = set()
    self.state: dict[str, np.ndarray] = {}

  def take(self, name: str) -> np.ndarray:
    if name not in self.flat:
      raise KeyError(f'vvt parameter {name} is missing (the params do not fit the model config)')
    self.used.add(name)
    return self.flat[name]

  def drop(self, name: str) -> None:
    """A vvt parameter the target does without (the caller says why that changes nothing)."""
    self.take(name)

  def put(self, key: str, value: np.ndarray) -> None:
    if key in self.state:
      raise ValueError(f'internal error: {key} written twice')
    self.state[key] = np.ascontiguousarray(value, np.float32)

  def copy(self, key: str, name: str) -> None:
    self.put(key, self.take(name))

  def layer_norm(self, key: str, name: str) -> None:
    """flax LayerNorm scale/bias -> torch weight/bias."""
    self.copy(f'{key}.weight', f'{name}/scale')
    self.copy(f'{key}.bias', f'{name}/bias')

  def dense(self, key: str, name: str) -> None:
    """flax Dense kernel (in, out) -> torch Linear weight (out, in), and the bias."""
    self.put(f'{key}.weight', self.take(f'{name}/kernel').T)
    self.copy(f'{key}.bias', f'{name}/bias')

  def projection(self, name: str, part: str, bias: bool | None) -> tuple[np.ndarray, np.ndarray | None]:
    """flax query/key/value (D, H, d_h) [+ (H, d_h)] -> torch (H*d_h, D) weight and (H*d_h,) bias. bias: True
    takes the bias, False gives zeros where vvt has none (a key bias that is zero changes nothing), None: none."""
    kernel = self.take(f'{name}/{part}/kernel')
    d = kernel.shape[0]
    weight = kernel.reshape(d, -1).T
    if bias is None:
      return weight, None
    return weight, (self.take(f'{name}/{part}/bias').reshape(-1) if bias else np.zeros(weight.shape[0], np.float32))

  def fused_qkv(self, key: str, name: str, biases: tuple) -> None:
    """flax query/key/value -> one torch qkv Linear(D, 3D), rows [q | k | v]."""
    parts = [self.projection(name, part, b) for part, b in zip(('query', 'key', 'value'), biases, strict=True)]
    self.put(f'{key}.weight', np.concatenate([w for w, _ in parts]))
    if parts[0][1] is not None:
      self.put(f'{key}.bias', np.concatenate([b for _, b in parts]))

  def attention_out(self, key: str, name: str) -> None:
    """flax out kernel (H, d_h, D) + bias -> torch Linear(D, D)."""
    kernel = self.take(f'{name}/kernel')
    self.put(f'{key}.weight', kernel.reshape(-1, kernel.shape[-1]).T)
    self.copy(f'{key}.bias', f'{name}/bias')

  def patch_embedding(self, key: str, name: str, conv2d: bool = False) -> None:
    """vvt tubelet kernel (t, h, w, C, D) -> torch Conv3d (D, C, t, h, w); conv2d (t = 1): Conv2d (D, C, h, w)."""
    kernel = self.take(f'{name}/kernel')
    self.put(f'{key}.weight', kernel[0].transpose(3, 2, 0, 1) if conv2d else kernel.transpose(4, 3, 0, 1, 2))
    self.copy(f'{key}.bias', f'{name}/bias')

  def result(self) -> dict[str, np.ndarray]:
    left = sorted(set(self.flat) - self.used)
    if left:
      more = f' and {len(left) - 3} more' if len(left) > 3 else ''
      raise NotExpressible(f'{self.target} has no place for the vvt parameters {", ".join(left[:3])}{more}')
    return self.state


def hf_activation(gelu_approximate: bool, tanh_name: str = 'gelu_new') -> str:
  """vvt gelu_approximate -> Hugging Face hidden_act: 'gelu' (exact erf) or a name of the tanh formula."""
  return tanh_name if gelu_approximate else 'gelu'


def require(model_cfg, field: str, allowed, target: str, why: str = '') -> None:
  """NotExpressible naming `model.field` and its value unless the value is one of `allowed` (a value or a tuple)."""
  allowed = allowed if isinstance(allowed, tuple) else (allowed,)
  value = model_cfg[field]
  if value not in allowed:
    need = ' or '.join(repr(a) for a in allowed)
    raise NotExpressible(f'model.{field}={value!r}: {target} needs {need}' + (f' ({why})' if why else ''))


def hf_image_size(model_cfg, target: str, pair_ok: bool):
  """The model's frame size as a transformers config writes it: an int (square), or [H, W] where the class takes a
  pair (`pair_ok`); NotExpressible naming model.image_size otherwise."""
  from vvt.models import frame_size
  h, w = frame_size.parse(model_cfg['image_size'])
  if h == w:
    return int(h)
  if not pair_ok:
    raise NotExpressible(f'model.image_size={(h, w)}: {target} needs square frames (an int image_size)')
  return [int(h), int(w)]


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
  return {f'pooler/{k}': np.asarray(v, np.float32) for k, v in flatten(params).items()}


def new_classifier(w: Writer, hidden: int, num_classes, what: str) -> None:
  """A new zero classifier (every fresh vvt head starts at zero) of `num_classes` (an int, or a dict of heads) on a
  `hidden`-wide representation, reported as freshly initialised."""
  heads = {'': num_classes} if isinstance(num_classes, int) else {f'_{k}': v for k, v in dict(num_classes).items()}
  for suffix, n in heads.items():
    for name, value in ((f'head/output_projection{suffix}/kernel', np.zeros((hidden, int(n)), np.float32)),
                        (f'head/output_projection{suffix}/bias', np.zeros(int(n), np.float32))):
      w.flat[name] = value
      w.report.initialised.append((name, f'new classifier ({what})'))
