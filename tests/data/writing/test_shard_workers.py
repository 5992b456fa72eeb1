"""`vvt data convert --worker I/N`: three workers give the shards and the manifest of one machine; re-runs keep
finished shards; `--assemble` names the missing workers; a SLURM array task's default worker."""
import json
import os

import pytest

from vvt.data.writing import shard_workers
from vvt.data.writing import video_shards

ARGS = dict(num_shards=4, short_side=32, workers=1, progress=False, check=False)


def _run(video_dir, out, worker=None):
  return video_shards.convert(str(video_dir / 'videos.csv'), out, str(video_dir / 'classes.txt'), worker=worker, **ARGS)


def _shard_bytes(out, n=4):
  return [open(video_shards.shard_path(out, s, n), 'rb').read() for s in range(n)]


def test_three_workers_equal_one_machine(video_dir):
  one = _run(video_dir, str(video_dir / 'one' / 'train'))
  out = str(video_dir / 'many' / 'train')
  parts = [_run(video_dir, out, (i, 3)) for i in (2, 0)]
  assert not os.path.exists(out + '.manifest.json')   # worker 1 has not run: nothing assembled
  assert parts[0]['worker'] == [2, 3] and [sh['file'] for sh in parts[0]['shards']] == [
      'train.tfrecord-00002-of-00004']
  with pytest.raises(ValueError, match=r'worker\(s\) 1/3 not finished'):
    shard_workers.assemble(out, 3)
  last = _run(video_dir, out, (1, 3))   # the last worker writes the one manifest
  manifest = json.load(open(out + '.manifest.json'))
  assert last == manifest
  assert _shard_bytes(out) == _shard_bytes(str(video_dir / 'one' / 'train'))
  for key in ('totals', 'failures', 'classes', 'options', 'complete'):
    assert manifest[key] == one[key], key
  assert manifest['videos'] == one['videos'] and manifest['shards'] == one['shards']
  assert set(manifest) == set(one) and manifest['path'] == out + '.manifest.json'

  # Re-run worker 0 (shards 0 and 3): a shard without failed rows is kept as it is (one with failed rows is
  # retried, as on one machine); the manifest assembled again is the same but for those shards' status.
  before = {s: os.path.getmtime(video_shards.shard_path(out, s, 4)) for s in (0, 3)}
  again = _run(video_dir, out, (0, 3))
  kept = [sh for sh in again['shards'] if sh['status'] == 'existing']
  assert kept and again['totals']['existing'] == sum(sh['videos'] for sh in kept)
  for sh in kept:
    s = int(sh['file'].split('-')[1])
    assert os.path.getmtime(video_shards.shard_path(out, s, 4)) == before[s]
  assert shard_workers.worker_count(out) == 3
  assembled = shard_workers.assemble(out, 3)
  assert assembled['videos'] == one['videos'] and assembled['totals']['ok'] == one['totals']['ok']


def test_worker_arguments_and_slurm_default():
  assert shard_workers.parse_worker('2/3') == (2, 3)
  for bad in ('3/3', '1', 'a/b', '-1/2'):
    with pytest.raises(ValueError, match='--worker'):
      shard_workers.parse_worker(bad)
  env = {'SLURM_ARRAY_TASK_ID': '5', 'SLURM_ARRAY_TASK_COUNT': '3', 'SLURM_ARRAY_TASK_MIN': '4',
         'SLURM_ARRAY_TASK_MAX': '6'}
  assert shard_workers.from_slurm(env) == (1, 3)
  assert shard_workers.from_slurm({}) is None
  with pytest.raises(ValueError, match='one range'):
    shard_workers.from_slurm(dict(env, SLURM_ARRAY_TASK_MAX='9'))
  with pytest.raises(ValueError, match='more workers than shards'):
    shard_workers.checked_worker((0, 5), 4)
  assert shard_workers.shards_of((1, 3), 7) == {1, 4}


def test_worker_and_assemble_on_the_command_line(video_dir, capsys):
  from vvt.cli import main as vvt_main
  out = str(video_dir / 'cli' / 'train')
  args = ['data', 'convert', '--input', str(video_dir / 'videos.csv'), '--classes', str(video_dir / 'classes.txt'),
          '--output', out, '--shards', '4', '--short-side', '32', '--workers', '1', '--no-progress']
  assert vvt_main([*args, '--worker', '0/2']) == 1   # its rows include failed videos: said, everything written
  capsys.readouterr()
  assert vvt_main([*args, '--assemble']) == 1
  err = capsys.readouterr().err.strip().splitlines()
  assert err == [f'vvt data: error: {out}: worker(s) 1/2 not finished (their manifests are missing or incomplete): '
                 'run them, then assemble']
  vvt_main([*args, '--worker', '1/2'])
  os.remove(out + '.manifest.json')
  capsys.readouterr()
  assert vvt_main([*args, '--assemble']) == 0
  said = json.loads(capsys.readouterr().out)
  assert said['manifest'] == out + '.manifest.json' and said['videos'] == 10 and said['ok'] == 7
  assert vvt_main([*args, '--worker', '2/2']) == 1
  assert capsys.readouterr().err.strip() == "vvt data: error: --worker '2/2': expected I/N with 0 <= I < N, e.g. 0/4"
