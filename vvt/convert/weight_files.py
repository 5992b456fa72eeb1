"""Weight files read safely: one flat {name: array} state per file, every failure one line naming the file.

Nothing here executes code from a file: `.npz` is read with `allow_pickle=False` (lazily: `NpyMember`),
`.safetensors` with safetensors (its header checked first: `safetensors_header`), flax `.msgpack` with
`flax.serialization.msgpack_restore` (plain arrays and dicts), and PyTorch `.pth/.pyth/.pt/.bin` with
`torch.load(weights_only=True)` (torch is imported only then).

Every read goes through `load_state`, which turns any failure of a reader on a broken or hostile file
(truncated, huge or inconsistent headers, pickled objects, non-tensor entries, complex / string / object
arrays) into one `WeightFileError` (a ValueError) naming the file and what is wrong. The state it returns
remembers its file (`path_of`), so `conversion.Source` names the file when a parameter is missing or not a finite
float tensor, and `naming_file` gives any other converter error the file's name. `flatten` / `unflatten`: the
'/'-joined names of nested params, as files hold them.
"""
from __future__ import annotations

import contextlib
import functools
import os
from typing import Any, Iterable, Mapping

import numpy as np

TORCH_EXTENSIONS = ('.pth', '.pyth', '.pt', '.bin', '.ckpt')


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
