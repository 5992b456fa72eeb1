"""A trained vvt run, exported with `vvt export --format hf`, predicts in transformers what `vvt predict` predicts:
a tiny TimeSformer (divided attention, 1x8x8 patches, class token, learned space and time tables) trained a few
steps with EMA on the tiny synthetic data, its EMA params exported; both models are fed the same normalised
views of the same clips."""
import json

import jax
import numpy as np
from PIL import Image
import pytest

from tests import specs
from tests.conftest import REPO
from vvt.cli import main as vvt_main
from vvt.config import loader
from vvt.data.transforms import normalization
from vvt.data.transforms import views
from vvt.data.writing import synthetic
import vvt.models
from vvt.train import checkpoints

torch = pytest.importorskip('torch')
transformers = pytest.importorskip('transformers')

HF_FIELDS = ('--config.model.tubelet=1,8,8', '--config.model.positional_embedding=separable',
             '--config.model.classifier=token')


def _clips(folder):
  """One 16-frame clip of each motion class as a frame folder (PNG: the views are exactly what was drawn)."""
  out = []
  for label in range(4):
    clip = folder / f'clip_{label}'
    clip.mkdir(parents=True)
    for i, frame in enumerate(synthetic.render_clip(label, np.random.default_rng(10 + label), 16, 64)):
      Image.fromarray(np.asarray(frame, np.uint8)).save(clip / f'{i:04d}.png')
    out.append(clip)
  return out


def test_an_exported_run_predicts_the_same_classes_in_transformers(tiny_data, tmp_path, capsys):
  wd, hf = tmp_path / 'run', tmp_path / 'hf'
  assert vvt_main(['train', '--config', f'{REPO / "tests/train/tiny_config.py"}:{tiny_data},divided',
                   '--workdir', str(wd), *HF_FIELDS, '--config.optimizer.ema_decay=0.5',
                   '--config.num_train_steps=6', '--config.checkpoint.every_steps=6', '--config.schedule.base_lr=0.01',
                   '--config.eval.batch_size=8']) == 0
  capsys.readouterr()
  assert vvt_main(['export', '--workdir', str(wd), '--format', 'hf', '--output', str(hf)]) == 0
  assert 'TimesformerForVideoClassification: 49 tensors (ema weights)' in capsys.readouterr().out

  one_view = ['--config.dataset.num_test_clips=1', '--config.dataset.num_spatial_crops=1']
  clips = _clips(tmp_path / 'clips')
  assert vvt_main(['predict', '--workdir', str(wd), *map(str, clips), '--json', '--top_k', '4', *one_view]) == 0
  predicted = json.loads(capsys.readouterr().out)['predictions']

  config = loader.load(str(wd / 'config.json'), [tuple(a[len('--config.'):].split('=')) for a in one_view], files=(),
                       init=False)
  model, info = transformers.TimesformerForVideoClassification.from_pretrained(str(hf), output_loading_info=True)
  assert not any(info.values()), info
  assert model.config.id2label == dict(enumerate(config.class_names))
  data = specs.run_spec(config).data
  clip_views = np.concatenate([views.load_views(str(c), 'frames', data) for c in clips])  # (4, T, S, S, 3)
  inputs = np.asarray(normalization.normalize(clip_views, data.normalization))
  with torch.no_grad():
    theirs = model.eval()(torch.from_numpy(inputs).permute(0, 1, 4, 2, 3)).logits.numpy()
  params, _, weights = checkpoints.load_eval_params(str(wd))
  assert weights == 'ema'
  ours = np.asarray(jax.jit(vvt.models.build(config.model).apply)({'params': params}, inputs))
  print(f'max |logit difference| {np.abs(ours - theirs).max():.2g}')
  assert np.abs(ours - theirs).max() < 1e-5
  top2 = np.sort(ours, axis=-1)[:, -2:]
  assert (top2[:, 1] - top2[:, 0]).min() > 1e-3  # trained: every top class is clear of the next by far more

  probabilities = np.exp(theirs - theirs.max(-1, keepdims=True))
  probabilities /= probabilities.sum(-1, keepdims=True)
  for row, p in zip(probabilities, predicted, strict=True):
    top = p['top']
    assert model.config.id2label[int(row.argmax())] == top[0]['name']
    assert [t['probability'] for t in top] == pytest.approx(sorted(row, reverse=True), abs=1e-5)
