"""Two processes with jax.distributed.initialize on 127.0.0.1: each feeds its share of the
batch, both end with the same model, and a single-process `vvt eval` of the final
checkpoint reproduces the multi-host multi-view evaluation. Data-parallel (1 device per process)
and FSDP over both processes (2 devices each: the params' shards live on both hosts, each host
writes its own shards of the checkpoint)."""
import json
import socket
import subprocess

import pytest
import train_helpers as common

from vvt.cli import train as cli
from vvt.train import checkpoints

HELPER = str(common.REPO / 'tests' / 'train' / 'multihost_run.py')


def _free_port():
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    return s.getsockname()[1]


@pytest.mark.parametrize('mesh', ['data', 'fsdp'])
def test_two_processes_train_and_evaluate(tiny_data, tmp_path, mesh):
  wd, port = tmp_path / 'run', _free_port()
  extra, devices = ([], None) if mesh == 'data' else (["{'fsdp': -1}"], 2)
  procs = [subprocess.Popen([common.PY, HELPER, str(tiny_data), str(wd), str(port), str(i), *extra],
                            cwd=common.REPO, env=common.env(devices), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True) for i in range(2)]
  results = []
  for p in procs:
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err[-4000:]
    results.append(json.loads([l for l in out.splitlines() if l.startswith('RESULT ')][-1][7:]))
  assert sorted(r['process'] for r in results) == [0, 1]
  assert all(r['processes'] == 2 and r['devices'] == 2 * (devices or 1) for r in results)
  for k in ('video_top1', 'clip_top1', 'num_views', 'step'):
    assert results[0][k] == results[1][k], k
  assert results[0]['num_views'] == 3 * common.TEST_CLIPS
  assert checkpoints.all_steps(str(wd)) == [2, 4]
  # the same checkpoint evaluated by one process gives the same numbers
  multi = json.load(open(checkpoints.eval_results_path(str(wd), 4, 'test')))
  assert cli.eval_main(['--config', f'{common.TINY}:{tiny_data}', '--workdir', str(wd)]) == 0
  single = json.load(open(checkpoints.eval_results_path(str(wd), 4, 'test')))
  for k in ('video_top1', 'clip_top1', 'num_views', 'video_mean_class_accuracy'):
    assert single[k] == multi[k], k
