"""`vvt attention`: maps of a checkpoint on a video file and a frame folder (PNG grids, GIF, npz)."""
import os
import sys

import numpy as np
import pytest

from vvt.cli import main as vvt_main
from vvt.data.writing import synthetic

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, 'tests', 'train'))
sys.path.insert(0, os.path.join(REPO, 'tests', 'cli'))
from test_predict import save_fresh_run  # noqa: E402
from test_predict import write_video  # noqa: E402
import tiny_config  # noqa: E402


def _run_dir(root, data, attention, **model):
  config = tiny_config.get_config(f'{data},{attention}')
  for k, v in model.items():
    config.model[k] = v
  return save_fresh_run(str(root), config)


@pytest.fixture(scope='module')
def clip_file(tmp_path_factory):
  d = tmp_path_factory.mktemp('attention_videos')
  frames = synthetic.render_clip(0, np.random.default_rng(0), 16, 64)
  write_video(d / 'clip.mp4', frames)
  import cv2
  (d / 'frames').mkdir()
  for i, f in enumerate(frames):
    cv2.imwrite(str(d / 'frames' / f'{i:04d}.png'), f[..., ::-1])
  return d


@pytest.mark.parametrize('attention,model,source', [
    ('divided', {}, 'clip.mp4'),
    ('factorised_encoder', dict(classifier='token'), 'frames'),
])
def test_attention_writes_grid_gif_and_normalised_maps(tmp_path, tiny_data, clip_file, attention, model, source,
                                                      capsys):
  wd = _run_dir(tmp_path / 'run', tiny_data, attention, **model)
  out = tmp_path / 'maps'
  rc = vvt_main(['attention', '--workdir', wd, str(clip_file / source), '--out', str(out)])
  assert rc == 0, capsys.readouterr().err
  for name in ('attention_grid.png', 'attention_heads.png', 'attention_frames.png', 'attention.gif'):
    assert (out / name).stat().st_size > 1000, name
  from PIL import Image
  with Image.open(out / 'attention.gif') as gif:
    assert gif.n_frames == 8  # the config's 8 frames
  z = np.load(out / 'attention.npz')
  assert z['final'].shape == (4, 4, 4)  # (T / tubelet_t, H / 8, W / 8)
  np.testing.assert_allclose(z['final'].sum(), 1.0, atol=1e-6)
  assert (z['final'] >= 0).all()
  for k in z.files:
    if k.startswith('frames/'):
      np.testing.assert_allclose(z[k].sum(-1), 1.0, atol=1e-6)
    if k.startswith('per_stage/'):
      np.testing.assert_allclose(z[k].sum(axis=(1, 2, 3)), 1.0, atol=1e-6)
  assert ('rollout' if attention == 'divided' else 'class_token') in capsys.readouterr().out


def test_attention_bad_input_is_one_line(tmp_path, tiny_data, capsys):
  wd = _run_dir(tmp_path / 'run', tiny_data, 'divided')
  rc = vvt_main(['attention', '--workdir', wd, str(tmp_path / 'nothing.mp4'), '--out', str(tmp_path / 'o')])
  assert rc == 1
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and 'nothing.mp4' in err[0]
