"""`vvt predict` on real small video files (mp4, webm, avi written here with PyAV), a frame folder and a
corrupt file; the views are the evaluation pipeline's views."""
import json
import os
import subprocess
import sys

import av
import numpy as np
import pytest

from vvt.cli import main as vvt_main
from vvt.data.transforms import views
from vvt.data.writing import synthetic

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, 'tests', 'train'))
import tiny_config  # noqa: E402

CODECS = {'mp4': ('mpeg4', 'yuv420p'), 'webm': ('libvpx', 'yuv420p'), 'avi': ('mjpeg', 'yuvj420p')}


def write_video(path, frames, fps=8):
  codec, pix = CODECS[str(path).rsplit('.', 1)[-1]]
  with av.open(str(path), 'w') as c:
    s = c.add_stream(codec, rate=fps)
    s.height, s.width = frames.shape[1:3]
    s.pix_fmt = pix
    for f in frames:
      for packet in s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format='rgb24')):
        c.mux(packet)
    for packet in s.encode():
      c.mux(packet)


def clip(motion, seed=0, n=16, size=64):
  return np.asarray(synthetic.render_clip(motion, np.random.default_rng(seed), n, size), np.uint8)


@pytest.fixture(scope='module')
def run_dir(tmp_path_factory, tiny_data):
  """A params-only checkpoint of the tiny model (fresh init) with its config.json: what predict reads."""
  config = tiny_config.get_config(tiny_data)
  config.class_names = None  # the names then come from the dataset's classes.txt
  return save_fresh_run(str(tmp_path_factory.mktemp('predict_run')), config)


def save_fresh_run(wd, config):
  """`config`'s model, freshly initialised, saved in `wd` as a params-only checkpoint (step 3) + config.json."""
  import jax

  from vvt.config import run_file
  from vvt.config import run_spec
  from vvt.train import checkpoints
  from vvt.train import model_state
  run = run_spec.resolve(config)
  params = model_state.init_params(model_state.build_model(run.model), model_state.ClipShape.of(run),
                                   jax.random.PRNGKey(0))
  checkpoints.save_params(wd, params, step=3, config=run.config_values)
  run_file.write(wd, run.config)
  return wd


@pytest.fixture(scope='module')
def inputs(tmp_path_factory):
  d = tmp_path_factory.mktemp('videos')
  for ext, motion in (('mp4', 0), ('webm', 1), ('avi', 2)):
    write_video(d / f'clip_{ext}.{ext}', clip(motion, n=20 + motion))
  frames = d / 'frames'
  frames.mkdir()
  import cv2
  for i, f in enumerate(clip(3, n=12)):
    cv2.imwrite(str(frames / f'{i:04d}.png'), f[..., ::-1])
  (d / 'broken.mp4').write_bytes(b'\x00\x00\x00\x18ftypmp42' + os.urandom(500))
  return d


def test_predict_prints_top_classes_and_skips_unreadable(run_dir, inputs, capsys):
  files = [str(inputs / n) for n in ('clip_mp4.mp4', 'broken.mp4', 'clip_webm.webm', 'clip_avi.avi')]
  rc = vvt_main(['predict', '--workdir', run_dir, *files, str(inputs / 'frames'), '--top_k', '3',
                 '--batch_size', '4'])
  out, err = capsys.readouterr()
  assert rc == 1  # one input failed, after all others were predicted
  lines = out.strip().splitlines()
  assert len(lines) == 4, out
  assert lines[0].startswith(files[0] + ': ') and lines[-1].startswith(str(inputs / 'frames') + ': ')
  names = ('down', 'up', 'down_and_back', 'up_and_back')  # the dataset's classes.txt
  for line in lines:
    top = line.split(': ', 1)[1].split(', ')
    assert len(top) == 3 and all(t.rsplit(' ', 1)[0] in names for t in top)
  assert 'broken.mp4' in err and err.count('skipped') == 1 and '1 of 5 inputs' in err


def test_predict_json_folder_and_checkpoint_path(run_dir, inputs, capsys):
  rc = vvt_main(['predict', '--checkpoint', os.path.join(run_dir, 'checkpoints', '3'), str(inputs),
                 '--json', '--config.dataset.num_test_clips=2', '--config.dataset.num_spatial_crops=1'])
  data = json.loads(capsys.readouterr().out)
  assert rc == 1 and data['step'] == 3 and data['views_per_video'] == 2
  got = {os.path.basename(p['input']): p for p in data['predictions']}
  assert set(got) == {'clip_avi.avi', 'clip_mp4.mp4', 'clip_webm.webm', 'frames'}
  for p in got.values():
    assert p['views'] == 2 and len(p['top']) == 4  # top_k capped at the number of classes
    assert sum(t['probability'] for t in p['top']) == pytest.approx(1.0, abs=1e-5)
  assert [os.path.basename(f['input']) for f in data['failed']] == ['broken.mp4']


def test_predict_with_scanned_layers_gives_the_same_scores(run_dir, inputs, capsys):
  """The per-layer checkpoint predicted by a `model.scan_layers=True` model: converted to its layout."""
  args = ['predict', '--workdir', run_dir, str(inputs / 'clip_mp4.mp4'), '--json',
          '--config.dataset.num_test_clips=1', '--config.dataset.num_spatial_crops=1']
  tops = []
  for extra in ([], ['--config.model.scan_layers=True']):
    assert vvt_main(args + extra) == 0
    tops.append(json.loads(capsys.readouterr().out)['predictions'][0]['top'])
  # two programs (a loop of layers, a scan): the same probabilities up to float32 rounding (~1e-7), compared per
  # class, so that two classes within rounding of each other may come in either order
  assert {t['class']: t['probability'] for t in tops[1]} == pytest.approx(
      {t['class']: t['probability'] for t in tops[0]}, abs=1e-5)


def test_predict_bad_arguments_are_one_line(run_dir, capsys):
  assert vvt_main(['predict', 'x.mp4']) == 2
  assert 'exactly one of --workdir' in capsys.readouterr().err
  assert vvt_main(['predict', '--checkpoint', '/nonexistent/dir', 'x.mp4']) == 2
  err = capsys.readouterr().err.strip()
  assert len(err.splitlines()) == 1 and '/nonexistent/dir' in err


def test_views_are_the_evaluation_pipelines(tmp_path):
  """Frames stored losslessly (PNG) in a TFRecord and in a folder give the same views."""
  import cv2
  import tensorflow as tf

  from vvt.config import dataset as data_config
  from vvt.data import pipeline
  from vvt.data.spec import DataSpec
  from vvt.data.writing import dmvr_records
  frames = clip(2, n=21, size=48)[:, :, :40]  # landscape 48x40 -> portrait: crops along the height
  (tmp_path / 'f').mkdir()
  for i, f in enumerate(frames):
    cv2.imwrite(str(tmp_path / 'f' / f'{i:03d}.png'), f[..., ::-1])
  pngs = [tf.io.encode_png(f).numpy() for f in frames]
  dmvr_records.write_records(str(tmp_path / 'v.tfrecord'), [dmvr_records.encode_sequence_example(pngs, 1)])
  cfg = data_config.get_config()
  cfg.update(eval_files=str(tmp_path / 'v.tfrecord'), num_classes=4, num_frames=4, stride=2,
             image_size=16, eval_resize=20, num_test_clips=2, num_spatial_crops=3)
  cfg = DataSpec.of(cfg)
  batch = next(pipeline.make_eval_iterator(cfg, global_batch_size=6, process_index=0, process_count=1))
  mine = views.load_views(str(tmp_path / 'f'), 'frames', cfg)
  assert mine.shape == (6, 4, 16, 16, 3)
  np.testing.assert_array_equal(mine, batch['inputs'])


def test_paths_that_do_not_exist_are_refused_before_the_model_loads(run_dir, tmp_path):
  """One line naming every missing input, exit 2, before JAX (or the model) is even imported."""
  (tmp_path / 'empty').mkdir()
  code = ('import sys; from vvt.cli import main; rc = main(sys.argv[1:]); '
          'print("jax imported:", "jax" in sys.modules); sys.exit(rc)')
  env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get('PYTHONPATH', ''))
  res = subprocess.run([sys.executable, '-c', code, 'predict', '--workdir', run_dir, str(tmp_path / 'nope.mp4'),
                        str(tmp_path / 'empty')], env=env, capture_output=True, text=True, timeout=300)
  assert res.returncode == 2, res.stderr
  assert res.stderr.strip().splitlines() == [
      f'vvt predict: error: no video file or frame folder at {tmp_path / "nope.mp4"}, {tmp_path / "empty"} '
      '(a folder must hold videos, frames, or folders of frames)']
  assert 'jax imported: False' in res.stdout
