"""Hostile and malformed weight files, made for real: each maker writes one into a directory and returns
(path, vvt convert --source). The fixture weights are a real tiny scenic ViViT Model 2 and a real-named
TimeSformer patch embedding; every file is broken in one way."""
import io
import json
import os
import struct
import zipfile

import numpy as np

# The shared parity fixtures beside the repository (tests/conftest.py: FIXTURES).
SCENIC = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', '..', '..', 'shared',
                                       'fixtures', 'scenic_vivit_model2_fe.npz'))
MARKER = 'EXECUTED_BY_A_WEIGHT_FILE'


def scenic_state(fixture):
  with np.load(fixture, allow_pickle=False) as z:
    return {k: z[k] for k in z.files if k.startswith('params/')}


def _write(path, data):
  with open(path, 'wb') as f:
    f.write(data)
  return str(path)


def _cut(path, fraction=0.5):
  data = open(path, 'rb').read()
  return _write(path, data[:int(len(data) * fraction)])


def _npz(d, name, **arrays):
  path = os.path.join(d, name)
  np.savez(path, **arrays)
  return path


def _scenic_npz(d, name, fixture, change):
  state = scenic_state(fixture)
  change(state)
  return _npz(d, name, **state)


def _first_kernel(state):
  return sorted(k for k in state if k.endswith('/kernel'))[0]


def _set(state, key_fn, value_fn):
  key = key_fn(state)
  state[key] = value_fn(state[key])


def _npy_member(header, payload):
  buf = io.BytesIO()
  np.lib.format.write_array_header_1_0(buf, header)
  return buf.getvalue() + payload


def _zip(path, members):
  with zipfile.ZipFile(path, 'w') as z:
    for name, data in members.items():
      z.writestr(name, data)
  return str(path)


def _safetensors(d, name, tensors):
  from safetensors.numpy import save_file
  path = os.path.join(d, name)
  save_file(tensors, path)
  return path


def _safetensors_raw(d, name, header, payload=b''):
  text = json.dumps(header).encode()
  return _write(os.path.join(d, name), struct.pack('<Q', len(text)) + text + payload)


def _msgpack(d, name, tree):
  from flax import serialization
  return _write(os.path.join(d, name), serialization.msgpack_serialize(tree))


def _torch(d, name, obj, **kwargs):
  import torch
  path = os.path.join(d, name)
  torch.save(obj, path, **kwargs)
  return path


class _RunsCode:
  """Unpickling this would create the marker file: weights_only must refuse it."""

  def __init__(self, marker):
    self.marker = marker

  def __reduce__(self):
    return (open, (self.marker, 'w'))


def _torch_tensor(value, dtype=None):
  import torch
  t = torch.from_numpy(np.asarray(value))
  return t if dtype is None else t.to(dtype)


def makers(fixture=SCENIC):
  """{case: fn(directory) -> (path, source)}."""
  import torch
  emb = 'patch_embed.proj.weight'
  conv = np.zeros((8, 3, 4, 4), np.float32)
  cases = {
      # -- npz
      'npz_object_array': lambda d: (_npz(d, 'obj.npz', w=np.array([{'a': 1}], dtype=object)), 'scenic_vivit'),
      'npz_truncated': lambda d: (_cut(_scenic_npz(d, 'cut.npz', fixture, lambda s: None)), 'scenic_vivit'),
      'npz_header_claims_huge_array': lambda d: (_zip(os.path.join(d, 'huge.npz'), {'w.npy': _npy_member(
          {'descr': '<f4', 'fortran_order': False, 'shape': (10 ** 12,)}, b'\0' * 16)}), 'scenic_vivit'),
      'npz_member_not_an_array': lambda d: (_zip(os.path.join(d, 'member.npz'), {'w.txt': b'hello'}),
                                            'scenic_vivit'),
      'npz_complex_dtype': lambda d: (_scenic_npz(d, 'complex.npz', fixture, lambda s: _set(
          s, _first_kernel, lambda v: v.astype(np.complex64))), 'scenic_vivit'),
      'npz_string_array': lambda d: (_npz(d, 'str.npz', w=np.array(['a', 'b'])), 'scenic_vivit'),
      'npz_no_arrays': lambda d: (_npz(d, 'empty.npz'), 'scenic_vivit'),
      'npz_random_bytes': lambda d: (_write(os.path.join(d, 'random.npz'), os.urandom(4096)), 'scenic_vivit'),
      'npz_int64_weight': lambda d: (_scenic_npz(d, 'int.npz', fixture, lambda s: _set(
          s, _first_kernel, lambda v: (v * 100).astype(np.int64))), 'scenic_vivit'),
      'npz_bool_weight': lambda d: (_scenic_npz(d, 'bool.npz', fixture, lambda s: _set(
          s, _first_kernel, lambda v: v > 0)), 'scenic_vivit'),
      'npz_nan_weight': lambda d: (_scenic_npz(d, 'nan.npz', fixture, lambda s: _set(
          s, _first_kernel, lambda v: np.full_like(v, np.nan))), 'scenic_vivit'),
      'npz_wrong_shape': lambda d: (_scenic_npz(d, 'shape.npz', fixture, lambda s: _set(
          s, _first_kernel, lambda v: v.reshape(-1)[:, None])), 'scenic_vivit'),
      'npz_missing_key': lambda d: (_scenic_npz(d, 'missing.npz', fixture, lambda s: s.pop(_first_kernel(s))),
                                    'scenic_vivit'),
      'npz_wrong_keys': lambda d: (_npz(d, 'keys.npz', **{k.replace('params/', 'params/Other'): v for k, v in
                                                          scenic_state(fixture).items()}), 'scenic_vivit'),
      # -- safetensors
      'safetensors_truncated': lambda d: (
          _cut(_safetensors(d, 'cut.safetensors', {'w': np.ones((64, 64), np.float32)})), 'hf_vivit'),
      'safetensors_huge_header_length': lambda d: (_write(os.path.join(d, 'hugeheader.safetensors'),
                                                          struct.pack('<Q', 2 ** 62) + b'{}'), 'hf_vivit'),
      'safetensors_offsets_beyond_file': lambda d: (_safetensors_raw(d, 'offsets.safetensors', {'w': {
          'dtype': 'F32', 'shape': [250000, 1000000], 'data_offsets': [0, 10 ** 12]}}, b'\0' * 16), 'hf_vivit'),
      'safetensors_bad_json_header': lambda d: (_write(os.path.join(d, 'json.safetensors'),
                                                       struct.pack('<Q', 9) + b'{not json'), 'hf_vivit'),
      'safetensors_empty_file': lambda d: (_write(os.path.join(d, 'empty.safetensors'), b''), 'hf_vivit'),
      'safetensors_int64_weight': lambda d: (_safetensors(d, 'int.safetensors', {
          'vivit.embeddings.patch_embeddings.projection.weight': np.ones((8, 3, 2, 4, 4), np.int64)}), 'hf_vivit'),
      'safetensors_wrong_keys': lambda d: (_safetensors(d, 'keys.safetensors', {'some.other.weight': conv}),
                                           'hf_vivit'),
      # -- flax msgpack
      'msgpack_truncated': lambda d: (_cut(_msgpack(d, 'cut.msgpack', {'params': {
          k[len('params/'):]: v for k, v in scenic_state(fixture).items()}})), 'scenic_vivit'),
      'msgpack_not_a_dict': lambda d: (_msgpack(d, 'list.msgpack', [1, 2, 3]), 'scenic_vivit'),
      'msgpack_random_bytes': lambda d: (_write(os.path.join(d, 'random.msgpack'), b'\x85' + os.urandom(512)),
                                         'scenic_vivit'),
      'msgpack_string_leaves': lambda d: (_msgpack(d, 'str.msgpack', {'params': {'w': 'not a tensor'}}),
                                          'scenic_vivit'),
      'msgpack_array_header_claims_4g': lambda d: (_write(os.path.join(d, 'huge.msgpack'),
                                                          b'\x81\xa1w\xdd\xff\xff\xff\xff'), 'scenic_vivit'),
      # -- PyTorch
      'torch_pickled_code': lambda d: (_torch(d, 'code.pth', {'model_state': {
          'x': _RunsCode(os.path.join(d, MARKER))}}), 'timesformer'),
      'torch_legacy_pickled_code': lambda d: (_torch(d, 'legacy.pth', {'x': _RunsCode(os.path.join(d, MARKER))},
                                                     _use_new_zipfile_serialization=False), 'timesformer'),
      'torch_truncated': lambda d: (_cut(_torch(d, 'cut.pth', {emb: _torch_tensor(np.ones((64, 3, 16, 16),
                                                                                          np.float32))})),
                                    'timesformer'),
      'torch_not_a_state_dict': lambda d: (_torch(d, 'list.pth', [1, 2, 3]), 'timesformer'),
      'torch_complex_weight': lambda d: (_torch(d, 'complex.pth', {emb: _torch_tensor(conv, torch.complex64)}),
                                         'timesformer'),
      'torch_int64_weight': lambda d: (_torch(d, 'int.pth', {emb: _torch_tensor(conv, torch.int64)}),
                                       'timesformer'),
      'torch_wrong_keys': lambda d: (_torch(d, 'keys.pth', {'some.other.weight': _torch_tensor(conv)}),
                                     'timesformer'),
      'torch_wrong_shape': lambda d: (_torch(d, 'shape.pth', {emb: _torch_tensor(conv[0])}), 'timesformer'),
      'torch_random_bytes': lambda d: (_write(os.path.join(d, 'random.pth'), os.urandom(4096)), 'timesformer'),
      # -- neither
      'unknown_format': lambda d: (_write(os.path.join(d, 'weights'), os.urandom(256)), 'scenic_vivit'),
  }
  return cases


def zip_bomb(d, fixture=SCENIC, member='params/embedding/kernel', items=2 ** 27):
  """The fixture's npz with `member` replaced by `items` float32 zeros (512 MB), deflated to a few megabytes;
  streamed through zipfile in 1 MiB chunks (the test never holds the array)."""
  path = os.path.join(d, 'bomb.npz')
  chunk = bytes(2 ** 20)
  with zipfile.ZipFile(fixture) as src, zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED, compresslevel=1) as z:
    for name in src.namelist():
      if name != member + '.npy':
        z.writestr(name, src.read(name))
    with z.open(member + '.npy', 'w', force_zip64=True) as f:
      np.lib.format.write_array_header_1_0(f, {'descr': '<f4', 'fortran_order': False, 'shape': (items,)})
      for _ in range(items * 4 // len(chunk)):
        f.write(chunk)
  return path
