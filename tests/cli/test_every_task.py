"""Every command that reads a run, on a run of every task (`vvt.tasks`): classification, multilabel, and probes
with a classification and a multilabel base. One tiny run per task (one step, in-process), then `vvt predict`,
`attention`, `features`, `summary`, `memory` and `export` on it; and the refusals of what has no meaning."""
import json
import math
import os
import shutil
import sys

import numpy as np
import pytest

from tests.conftest import REPO
from vvt.cli import main as vvt_main
from vvt.data.writing import synthetic
from vvt.inspection import features

sys.path.insert(0, str(REPO / 'tests' / 'train'))
import tiny_config  # noqa: E402

TASKS = ('classification', 'multilabel', 'probe_classification', 'probe_multilabel')
NAMES = list(synthetic.CLASS_NAMES[:4])  # the data's classes (its classes.txt)


def _data(path, multi_label):
  synthetic.write_synthetic(str(path), num_classes=4, train_clips=8, test_clips=4, num_frames=8, frame_size=32,
                            seed=2, train_shards=1, test_shards=1, multi_label=multi_label)
  return path


def _config(data, task, backbone):
  c = tiny_config.get_config(f'{data},divided')
  c.num_frames, c.image_size, c.dataset.stride = 8, 32, 1
  c.dataset.train_min_resize, c.dataset.train_max_resize, c.dataset.eval_resize = 34, 36, 34
  c.dataset.num_test_clips, c.dataset.num_spatial_crops = 2, 1
  c.batch_size, c.eval.batch_size, c.schedule.warmup_steps = 4, 4, 0
  c.num_train_steps, c.checkpoint.every_steps, c.log_every_steps = 1, 1, 1
  multi = task.endswith('multilabel')
  c.dataset.multi_label = multi
  if task == 'multilabel':
    c.task.name = 'multilabel'
  if task.startswith('probe'):
    c.task.name, c.task.probe.backbone = 'probe', backbone
    c.task.probe.base = 'multilabel' if multi else 'classification'
    c.task.probe.lrs, c.task.probe.weight_decays = (1.0, 0.01), (0.0,)
  return c


@pytest.fixture(scope='session')
def runs(tmp_path_factory):
  """{task: workdir} of a one-step run of each task, and 'frames': a folder of PNG frames to predict. The probe
  runs are evaluated at their end (the evaluation names their best probe, which predict reads); the others stop at
  their step's checkpoint (`stop_after_step`): no test reads their evaluation."""
  from vvt.config import run_spec
  from vvt.train import trainer
  tmp = tmp_path_factory.mktemp('every_task')
  data = {False: _data(tmp / 'single', False), True: _data(tmp / 'multi', True)}
  out = {}
  for task in TASKS:
    c = _config(data[task.endswith('multilabel')], task, out.get('classification'))
    out[task] = str(tmp / task)
    stop = -1 if task.startswith('probe') else 1
    trainer.train_and_evaluate(run_spec.resolve(c), out[task], log=lambda *a: None, stop_after_step=stop)
  import cv2
  (tmp / 'frames').mkdir()
  for i, f in enumerate(synthetic.render_clip(1, np.random.default_rng(0), 12, 40)):
    cv2.imwrite(str(tmp / 'frames' / f'{i:04d}.png'), np.asarray(f, np.uint8)[..., ::-1])
  out['frames'] = str(tmp / 'frames')
  return out


def _call(capsys, *argv):
  rc = vvt_main(list(argv))
  out, err = capsys.readouterr()
  return rc, out, err


def _best_probe(workdir):
  return json.load(open(os.path.join(workdir, 'checkpoints', 'eval_1_test.json')))['best_probe']


def _sigmoid(x):
  return 1 / (1 + np.exp(-np.asarray(x, np.float64)))


def _softmax(x):
  e = np.exp(np.asarray(x, np.float64) - np.max(x))
  return e / e.sum()


@pytest.mark.parametrize('task', TASKS)
def test_predict(runs, task, capsys):
  """Top-k of the task's probabilities: a softmax over the classes (single-label), each class's sigmoid
  (multi-label); a probe run's of its best probe, as `vvt eval` picked it; --logits gives the views' logits."""
  wd = runs[task]
  rc, out, err = _call(capsys, 'predict', '--workdir', wd, runs['frames'], '--json', '--logits')
  assert rc == 0, err
  got = json.loads(out)
  rec = got['predictions'][0]
  multi = task.endswith('multilabel')
  assert got['probabilities'] == ('sigmoid' if multi else 'softmax') and rec['views'] == 2
  assert got['probe'] == (_best_probe(wd) if task.startswith('probe') else None)
  logits = np.asarray(rec['logits'])
  assert logits.shape == (2, 4)  # (views, classes)
  probs = {t['class']: t['probability'] for t in rec['top']}
  assert sorted(probs) == [0, 1, 2, 3] and [t['name'] for t in rec['top']] == [NAMES[t['class']] for t in rec['top']]
  # each class's own sigmoid averaged over the views, or the softmax of the averaged logits
  expected = _sigmoid(logits).mean(0) if multi else _softmax(logits.mean(0))
  assert [probs[c] for c in range(4)] == pytest.approx(expected.tolist(), abs=1e-5)
  if not multi:
    assert math.isclose(sum(probs.values()), 1.0, abs_tol=1e-5)
  rc, text, err = _call(capsys, 'predict', '--workdir', wd, runs['frames'], '--top_k', '2')
  assert rc == 0 and err == '', err
  shown = [(t['name'], f'{t["probability"]:.3f}') for t in rec['top'][:2]]
  assert text == f'{runs["frames"]}: {", ".join(" ".join(s) for s in shown)}\n'


def test_a_probe_runs_other_probes_and_refusals(runs, tmp_path, capsys):
  """--probe NAME predicts with that probe; an unknown probe, --probe on a run without probes, a probe run whose
  step has no evaluation to pick by, and --logits with --window: one line each, exit 2."""
  wd = runs['probe_classification']
  other = next(p for p in ('probe_0', 'probe_1') if p != _best_probe(wd))
  args = ('predict', '--workdir', wd, runs['frames'], '--json', '--logits')
  best = json.loads(_call(capsys, *args)[1])['predictions'][0]['logits']
  rc, out, err = _call(capsys, *args, '--probe', other)
  assert rc == 0 and json.loads(out)['probe'] == other, err
  assert not np.allclose(json.loads(out)['predictions'][0]['logits'], best)  # another probe's head
  unevaluated = tmp_path / 'probe'
  shutil.copytree(wd, unevaluated)
  for name in os.listdir(unevaluated / 'checkpoints'):
    if name.startswith('eval_'):
      os.remove(unevaluated / 'checkpoints' / name)
  refusals = [
      ((wd, '--probe', 'probe_7'), '--probe probe_7: not a probe of this run (probe_0 ... probe_1)'),
      ((runs['classification'], '--probe', 'probe_0'),
       "--probe probe_0: only a probe run (task.name='probe') has probes; this run's task is 'classification'"),
      ((str(unevaluated),), 'a probe run predicts with its best probe, which its evaluation of step 1 names: no '
                            f'best_probe in {unevaluated}/checkpoints/eval_1_test.json (run `vvt eval --workdir '
                            f'{unevaluated} --step 1` first, or give --probe: probe_0 ... probe_1)'),
      ((wd, '--logits', '--window', '8f'),
       "--logits gives the views' logits of whole videos: it does not combine with --window"),
  ]
  for extra, message in refusals:
    rc, out, err = _call(capsys, 'predict', '--workdir', *extra[:1], runs['frames'], *extra[1:])
    assert (rc, out, err) == (2, '', f'vvt predict: error: {message}\n')


@pytest.mark.parametrize('task', TASKS)
def test_attention_features_summary_memory_and_export(runs, task, tmp_path, capsys):
  """The backbone's attention maps, the per-video embeddings (multi-hot labels of multi-label data), the model's
  summary, the train step's memory plan and the safetensors export: each works on a run of every task."""
  wd, multi = runs[task], task.endswith('multilabel')
  rc, out, err = _call(capsys, 'attention', '--workdir', wd, runs['frames'], '--out', str(tmp_path / 'maps'))
  assert rc == 0 and (tmp_path / 'maps' / 'attention.npz').is_file(), err
  rc, out, err = _call(capsys, 'features', '--workdir', wd, '--output', str(tmp_path / 'feats'))
  assert rc == 0, err
  emb, ids, rest = features.read(str(tmp_path / 'feats'))
  assert emb.shape == (4, 32) and len(ids) == 4
  assert rest['label'].shape == ((4, 4) if multi else (4,))
  for returned in ('embeddings', 'video_ids', *rest):  # `read` says what it returns, with shapes
    assert returned in features.read.__doc__, returned
  index = json.loads((tmp_path / 'feats' / 'features.json').read_text())
  assert index['class_names'] == NAMES and index['class_names_from'] == 'dataset'
  rc, out, err = _call(capsys, 'summary', '--config', wd)
  assert rc == 0 and 'params' in out and 'GFLOPs/view' in out, err
  probes = "task probe: the figures above are the frozen backbone's; 2 linear probe(s)"
  assert (probes in out) == task.startswith('probe'), out  # what the figures leave out
  rc, out, err = _call(capsys, 'memory', '--config', wd, '--topology', 'cpu:1')
  assert rc == 0 and json.loads(out.strip().splitlines()[-1])['fits'] is True, err
  rc, out, err = _call(capsys, 'export', '--workdir', wd, '--output', str(tmp_path / 'w.safetensors'))
  assert rc == 0 and (tmp_path / 'w.safetensors').stat().st_size > 0, err


def test_features_name_the_classes_of_the_data_not_of_the_checkpoint(runs, tmp_path, capsys):
  """A checkpoint whose config names other classes (a converted one: archery ... juggling) pointed at this data:
  features.json names the classes the data's labels index, from the data's own classes.txt."""
  theirs = "('archery', 'bowling', 'cooking', 'juggling')"
  rc, out, err = _call(capsys, 'features', '--workdir', runs['classification'], '--output', str(tmp_path / 'f'),
                       f'--config.class_names={theirs}')
  assert rc == 0, err
  index = json.loads((tmp_path / 'f' / 'features.json').read_text())
  assert index['class_names'] == NAMES
  assert index['class_names_from'] == 'dataset'


def test_features_of_layers_inside_the_network(runs, tmp_path, capsys):
  """--layers: the listed layers' final-normed tokens, averaged or concatenated along D (features.json says which);
  the last layer alone is what --tokens writes by default (what a probe reads); a layer the model does not have is
  one line, exit 2, nothing written. On a probe run: its backbone's layers."""
  wd = runs['probe_classification']
  got = {}
  for name, extra in (('default', ()), ('last', ('--layers', '-1')), ('mean', ('--layers', '0,-1')),
                      ('concat', ('--layers', '0,-1', '--combine', 'concat'))):
    rc, out, err = _call(capsys, 'features', '--workdir', wd, '--output', str(tmp_path / name), '--tokens', *extra)
    assert rc == 0, err
    emb, _, rest = features.read(str(tmp_path / name))
    index = json.loads((tmp_path / name / 'features.json').read_text())
    got[name] = emb, rest['tokens'], index
  assert (got['mean'][2]['layers'], got['mean'][2]['combine'], got['concat'][2]['combine']) == ([0, -1], 'mean',
                                                                                                  'concat')
  assert (got['default'][2]['layers'], got['default'][2]['combine']) == ([], None)
  np.testing.assert_allclose(got['last'][1], got['default'][1], rtol=1e-5, atol=1e-5)
  concat, mean = got['concat'][1], got['mean'][1]
  assert concat.shape == mean.shape[:-1] + (64,) and got['concat'][0].shape == (4, 64)
  np.testing.assert_allclose(mean, (concat[..., :32] + concat[..., 32:]) / 2, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(concat[..., 32:], got['last'][1], rtol=1e-5, atol=1e-5)
  rc, out, err = _call(capsys, 'features', '--workdir', wd, '--output', str(tmp_path / 'bad'), '--layers', '0,2')
  assert (rc, out, err) == (2, '', "vvt features: error: --layers[1] must be a layer of the model's 2 "
                                   "(0 ... 1, or -2 ... -1), got 2\n")
  assert not (tmp_path / 'bad').exists()
