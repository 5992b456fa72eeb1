"""Fault class 6: hostile or malformed weight files.

Each file is made for real (npz, safetensors, flax msgpack, PyTorch; truncated, huge or inconsistent headers,
pickled code, object / string / complex / int / bool arrays, NaN, wrong shapes, wrong keys) and fed to the real
command, `vvt convert` (in process, through its CLI entry point), and to `init_from` (image and vvt video
checkpoints). Each must end with one line naming the file and what is wrong, exit non-zero, write no
checkpoint, and execute nothing from the file (a pickled payload would create a marker file).
"""
import contextlib
import io
import os

import hostile_weights as hw
import jax
import numpy as np
import pytest

from vvt.cli import main as vvt_main

CONFIG = 'configs/kinetics400/vivit_b_fe.py'
NEEDS_VIDEO_PY = {}


def _convert(tmp_path, path, source):
  err = io.StringIO()
  with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
    code = vvt_main(['convert', '--source', source, '--checkpoint', path, '--config', CONFIG,
                     '--output', str(tmp_path / 'out')])
  return code, err.getvalue()


@pytest.mark.parametrize('case', sorted(hw.makers()))
def test_vvt_convert_refuses_with_one_line_naming_the_file(tmp_path, case):
  if case in NEEDS_VIDEO_PY:
    pytest.xfail(NEEDS_VIDEO_PY[case])
  path, source = hw.makers()[case](str(tmp_path))
  code, err = _convert(tmp_path, path, source)
  lines = err.strip().splitlines()
  assert code == 1, err
  assert len(lines) == 1 and lines[0].startswith('vvt convert: error: '), err
  assert path in lines[0], err
  assert 'Traceback' not in err
  assert not os.path.exists(tmp_path / hw.MARKER), 'the weight file executed code'
  assert not os.path.exists(tmp_path / 'out' / 'checkpoints'), 'a checkpoint was written from a bad file'


def test_the_unbroken_fixture_converts(tmp_path):
  """The control: the same real file, unbroken, converts (so the failures above are the faults')."""
  code, err = _convert(tmp_path, hw.SCENIC, 'scenic_vivit')
  assert code == 0, err
  assert os.path.isdir(tmp_path / 'out' / 'checkpoints' / '0')


# ------------------------------------------------------------------------------------------- init_from
def _tiny_image_model():
  """(the ModelSpec of a tiny image model, its zero params)."""
  from vvt.convert import video
  import vvt.models
  from vvt.models import spec
  cfg = vvt.models.get_config(family='timesformer', attention='space', variant='Ti/8', hidden_size=16,
                              num_heads=2, mlp_dim=32, num_layers=1, image_size=16, num_frames=1,
                              num_classes=3, class_token='global', positional_embedding='spatial')
  params = jax.tree_util.tree_map(lambda s: np.zeros(s.shape, np.float32), video.abstract_params(cfg))
  return spec.spec_of(vvt.models.resolve(cfg)), params


def _timm(params, change=None):
  """The tiny model's params in timm names (an image ViT file), optionally broken by `change`."""
  from vvt.convert import weight_files
  f = weight_files.flatten(params)
  d = 16
  a = 'encoder/layers/block_0/space_attention'
  out = {'patch_embed.proj.weight': f['embedding/conv/kernel'][0].transpose(3, 2, 0, 1),
         'patch_embed.proj.bias': f['embedding/conv/bias'], 'cls_token': f['encoder/cls'],
         'pos_embed': f['encoder/posembed/pos_embedding'], 'norm.weight': f['encoder/encoder_norm/scale'],
         'norm.bias': f['encoder/encoder_norm/bias'],
         'blocks.0.attn.qkv.weight': np.concatenate([f[f'{a}/{n}/kernel'].reshape(d, d).T
                                                     for n in ('query', 'key', 'value')]),
         'blocks.0.attn.qkv.bias': np.zeros(3 * d, np.float32),
         'blocks.0.attn.proj.weight': f[f'{a}/out/kernel'].reshape(d, d).T,
         'blocks.0.attn.proj.bias': f[f'{a}/out/bias']}
  b = 'encoder/layers/block_0'
  for ln, name in (('space_norm', 'norm1'), ('mlp_norm', 'norm2')):
    out[f'blocks.0.{name}.weight'], out[f'blocks.0.{name}.bias'] = f[f'{b}/{ln}/scale'], f[f'{b}/{ln}/bias']
  for dense, name in (('Dense_0', 'fc1'), ('Dense_1', 'fc2')):
    out[f'blocks.0.mlp.{name}.weight'] = f[f'{b}/mlp/{dense}/kernel'].T
    out[f'blocks.0.mlp.{name}.bias'] = f[f'{b}/mlp/{dense}/bias']
  out = {k: np.ascontiguousarray(v, np.float32) for k, v in out.items()}
  if change:
    change(out)
  return out


def _save(path, tensors):
  from safetensors.numpy import save_file
  save_file(tensors, path)
  return path


INIT_CASES = {
    'truncated_image_safetensors': lambda d, p: hw._cut(_save(f'{d}/cut.safetensors', _timm(p))),
    'int64_image_weight': lambda d, p: _save(f'{d}/int.safetensors', _timm(p, lambda s: s.update(
        {'blocks.0.mlp.fc1.weight': s['blocks.0.mlp.fc1.weight'].astype(np.int64)}))),
    'wrong_shape_image_weight': lambda d, p: _save(f'{d}/shape.safetensors', _timm(p, lambda s: s.update(
        {'pos_embed': np.zeros((1, 7, 16), np.float32)}))),
    'wrong_keys_image_file': lambda d, p: _save(f'{d}/keys.safetensors', {'x.weight': np.zeros((2, 2), np.float32)}),
    'pickled_npz_image_file': lambda d, p: hw._npz(d, 'obj.npz', w=np.array([{'a': 1}], dtype=object)),
    'truncated_vvt_video_file': lambda d, p: hw._cut(_vvt_export(d, p)),
}


def _vvt_export(d, params):
  from vvt.convert import export
  path = f'{d}/video.safetensors'
  export.to_safetensors(params, path)
  return path


def test_init_from_control_loads():
  import tempfile

  from vvt.convert import image_init
  from vvt.convert import init_options
  model, params = _tiny_image_model()
  with tempfile.TemporaryDirectory() as d:
    init = init_options.validate(dict(checkpoint=_save(f'{d}/ok.safetensors', _timm(params))))
    new, report = image_init.initialise(params, init, model)
  assert report.loaded and jax.tree_util.tree_structure(new) == jax.tree_util.tree_structure(params)


@pytest.mark.parametrize('case', sorted(INIT_CASES))
def test_init_from_refuses_naming_the_file(tmp_path, case):
  from vvt.convert import image_init
  from vvt.convert import init_options
  model, params = _tiny_image_model()
  path = INIT_CASES[case](str(tmp_path), params)
  fmt = 'vvt' if 'vvt' in case else 'auto'
  with pytest.raises(ValueError) as info:
    image_init.initialise(params, init_options.validate(dict(checkpoint=path, format=fmt)), model)
  assert path in str(info.value)


def test_a_zip_bomb_member_is_refused_by_its_header_before_it_is_inflated(tmp_path):
  """A 512 MB member of zeros behind a small npz, of the wrong rank: refused from its header's shape (the
  traced memory stays far below the member's size), in one line naming the file."""
  import tracemalloc
  path = hw.zip_bomb(str(tmp_path))
  assert os.path.getsize(path) < 2 ** 22  # 4 MiB, the fixture's own members included
  tracemalloc.start()
  try:
    code, err = _convert(tmp_path, path, 'scenic_vivit')
    _, peak = tracemalloc.get_traced_memory()
  finally:
    tracemalloc.stop()
  assert code == 1, err
  assert err.strip() == (f'vvt convert: error: {path}: cannot convert its weights: ValueError: scenic '
                         'embedding/kernel has shape (134217728,); expected 4 or 5 dimensions')
  assert peak < 2 ** 27, f'{peak / 2 ** 20:.0f} MiB traced: the member was inflated'
  assert not os.path.exists(tmp_path / 'out' / 'checkpoints')
