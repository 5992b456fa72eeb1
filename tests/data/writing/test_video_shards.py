"""`vvt data convert`: tiny videos made with PyAV -> TFRecords + manifest."""
import json
import os

from data_helpers import small_config
import numpy as np
import pytest

from vvt.cli import main as vvt_main
from vvt.data import pipeline
from vvt.data.reading import video_lists
from vvt.data.writing import video_shards


def test_convert_writes_shards_manifest_and_records_failures(video_dir):
  out = str(video_dir / 'out' / 'train')
  manifest = video_shards.convert(str(video_dir / 'videos.csv'), out,
                             str(video_dir / 'classes.txt'), num_shards=3,
                             short_side=32, workers=1, progress=False, check=False)
  assert manifest['totals'] == {'videos': 10, 'ok': 7, 'failed': 3, 'partial': 0,
                                'existing': 0, 'frames': 8 + 9 + 10 + 11 + 12 + 13 + 9}
  assert sorted(f['path'] for f in manifest['failures']) == ['corrupt.mp4', 'missing.mp4', 'v0.mp4']
  by_path = {(v['path'], v['label']): v for v in manifest['videos']}
  assert by_path[('missing.mp4', 'blue')]['reason'].startswith('FileNotFoundError')
  assert by_path[('corrupt.mp4', 'red')]['status'] == 'failed'
  assert by_path[('corrupt.mp4', 'red')]['reason']
  assert 'not in the class list' in by_path[('v0.mp4', 'purple')]['reason']
  assert by_path[('v1.mp4', '1')]['label_index'] == 1  # an index is a label too
  assert by_path[('v2.mp4', 'blue')]['participant'] == 'p0'
  assert [s['videos'] for s in manifest['shards']] == [3, 3, 1]
  for shard in manifest['shards']:
    assert len(shard['sha256']) == 64
  with open(f'{out}.manifest.json') as f:
    assert json.load(f)['totals'] == manifest['totals']

  cfg = small_config(eval_files=manifest['pattern'], num_classes=3,
                     normalization='zero_centre', num_frames=4, stride=2)
  assert pipeline.num_videos(cfg, 'test') == 7
  batches = list(pipeline.make_eval_iterator(cfg, 'test', 8, process_index=0,
                                             process_count=1))
  b = batches[0]
  real = np.nonzero(b['mask'] == 1)[0]
  real = real[np.argsort(b['video_index'][real])]  # files are read interleaved
  np.testing.assert_array_equal(b['video_index'][real], np.arange(7))
  expected = [0, 1, 2, 1, 0, 2, 1]
  np.testing.assert_array_equal(b['label'][real], expected)
  # The frames carry the right colour: label c is brightest in channel c.
  rgb = b['inputs'][real].mean(axis=(1, 2, 3))
  np.testing.assert_array_equal(rgb.argmax(-1), expected)


def test_convert_is_resumable_and_resamples_fps(video_dir):
  out = str(video_dir / 'out' / 'all')
  args = dict(video_list=str(video_dir / 'videos.csv'), output=out,
              classes=str(video_dir / 'classes.txt'), num_shards=2,
              short_side=0, fps=5.0, workers=2, progress=False, check=False)
  first = video_shards.convert(**args)
  frames = {v['path']: v['frames'] for v in first['videos'] if v['status'] == 'ok'}
  assert frames['v0.mp4'] == 4  # 8 frames at 10 fps -> 0.8 s at 5 fps
  os.remove(video_shards.shard_path(out, 1, 2))
  again = video_shards.convert(**args)
  # Shard 0 holds only good videos and is kept; shard 1 was removed (and has failures): rewritten.
  assert [s['status'] for s in again['shards']] == ['existing', 'written']
  assert [s['sha256'] for s in again['shards']] == [s['sha256'] for s in first['shards']]
  assert again['totals']['ok'] == first['totals']['ok']
  assert again['totals']['existing'] == first['shards'][0]['videos']


def test_convert_cli_and_bad_lists(video_dir, capsys):
  out = str(video_dir / 'cli' / 'test')
  code = vvt_main(['data', 'convert', '--input', str(video_dir / 'videos.csv'),
                   '--classes', str(video_dir / 'classes.txt'), '--output', out,
                   '--shards', '1', '--short-side', '24', '--workers', '1',
                   '--no-progress'])
  assert code == 1  # some videos failed: everything else is written, the command says so
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and '3 of 10 videos failed or were partial' in err[0]
  assert os.path.exists(f'{out}.tfrecord-00000-of-00001')
  (video_dir / 'bad.tsv').write_text('a.mp4\tred\nonly-a-path\n')  # one column on every line: paths only
  with pytest.raises(ValueError, match='bad.tsv: line 2'):
    video_lists.read_video_list(str(video_dir / 'bad.tsv'))
  rows = video_lists.read_video_list(_write(video_dir / 'x.tsv', 'a.mp4\tred\n'))
  assert rows == [('a.mp4', 'red', {})]


def _write(path, text):
  path.write_text(text)
  return str(path)


def test_the_failure_summary_counts_every_kind_of_reason_and_names_its_first_file(video_dir, capsys):
  with open(video_dir / 'videos.csv', 'a') as f:
    f.write('missing_b.mp4,red,p0\nv2.mp4,orange,p1\n')
  code = vvt_main(['data', 'convert', '--input', str(video_dir / 'videos.csv'), '--classes',
                   str(video_dir / 'classes.txt'), '--output', str(video_dir / 'out' / 'train'), '--shards', '1',
                   '--short-side', '24', '--workers', '1', '--no-progress'])
  assert code == 1
  err = capsys.readouterr().err.strip().splitlines()
  assert len(err) == 1 and '5 of 12 videos failed or were partial' in err[0], err
  kinds = err[0].split('.manifest.json): ')[1].split('; ')
  assert kinds[:2] == ['2 x FileNotFoundError: file not found (first: missing.mp4)',
                       "2 x label 'purple' is not in the class list (3 classes) (first: v0.mp4)"]
  assert len(kinds) == 3 and kinds[2].startswith('1 x ') and kinds[2].endswith('(first: corrupt.mp4)'), kinds
