"""The same run on 8 forced host devices (batch sharded over `data`) equals the 1-device run."""
import json
import subprocess

import chex
import numpy as np

import train_helpers as common
from vvt.train import checkpoints

HELPER = str(common.REPO / 'tests' / 'train' / 'shard_run.py')


def _run(tiny_data, wd, num_devices, accum=1):
  proc = subprocess.run([common.PY, HELPER, str(tiny_data), str(wd), str(num_devices), str(accum)],
                        cwd=common.REPO, env=common.env(devices=8), capture_output=True,
                        text=True, timeout=600)
  assert proc.returncode == 0, proc.stderr[-4000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith('RESULT ')][-1]
  return json.loads(line[len('RESULT '):])


def test_eight_devices_equal_one_device(tiny_data, tmp_path):
  one = _run(tiny_data, tmp_path / 'one', 1)
  eight = _run(tiny_data, tmp_path / 'eight', 8, accum=2)
  assert one['devices'] == eight['devices'] == 8
  for k in ('video_top1', 'clip_top1', 'num_views'):
    assert one[k] == eight[k], k
  p1, _ = checkpoints.load_params(str(tmp_path / 'one'), 4)
  p8, _ = checkpoints.load_params(str(tmp_path / 'eight'), 4)
  chex.assert_trees_all_close(p1, p8, rtol=2e-4, atol=2e-5)
  l1 = [json.loads(l) for l in open(tmp_path / 'one' / 'metrics.jsonl')]
  l8 = [json.loads(l) for l in open(tmp_path / 'eight' / 'metrics.jsonl')]
  for a, b in zip(l1, l8):
    if a['kind'] == 'train':
      np.testing.assert_allclose(a['loss'], b['loss'], rtol=1e-4)
