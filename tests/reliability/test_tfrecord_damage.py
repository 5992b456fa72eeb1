"""Damaged TFRecord files and cut JPEG frames, through `vvt eval` and `vvt train`.

A tiny synthetic set (the project's own writer) with its 10 test videos in two shards; a 2-step run gives the
checkpoint. Each test copies the shards, damages them as a disk, a copy or a converter would, and runs the
command in both modes:

* `dataset.on_error=raise`: exit 1 and one line naming the file, the record and (for TFRecord damage) the byte;
* `dataset.on_error=skip`: exit 0, one console line saying how many videos were skipped in which file and why,
  the same in the results JSON, and the evaluated videos exactly the intact ones.

Faults: a shard cut 100 bytes short, one byte of a record's length header changed, a shard of random bytes
beside the good ones, 64 random bytes in the middle of a record (its checksum broken: the rest of that file is
unreadable, the other file is read on), a frame holding the first half of its JPEG (only the sampled frames are
decoded: unsampled, it went through in both modes without a word).
"""
import csv
import json
import os
import re
import shutil
import sys

import numpy as np
import pytest
import tensorflow as tf

from vvt.cli import train as cli_train
from vvt.data.reading import image_frames
from vvt.data.reading import tfrecord_framing
from vvt.data.writing import dmvr_records

sys.path.insert(0, str(__import__('pathlib').Path(__file__).resolve().parents[1] / 'train'))
import train_helpers as helpers  # noqa: E402

PER_SHARD = 5  # test videos per shard: videos 0-4 in shard 0, 5-9 in shard 1


def _read(path):
  return [r.numpy() for r in tf.data.TFRecordDataset(path)]


def _video_id(raw):
  return tf.train.SequenceExample.FromString(raw).context.feature['video_id'].bytes_list.value[0].decode()


def _shard(directory, i):
  return str(directory / f'test-{i:05d}-of-00002.tfrecord')


@pytest.fixture(scope='module')
def run(tmp_path_factory):
  """(workdir of a 2-step run, directory of the intact test shards, ids of the 10 test videos in order)."""
  base = tmp_path_factory.mktemp('faults')
  data = base / 'data'
  helpers.write_tiny_dataset(data)
  test = _read(str(data / 'test-00000-of-00001.tfrecord'))
  assert len(test) == 2 * PER_SHARD
  good = base / 'good'
  good.mkdir()
  for i in range(2):
    dmvr_records.write_records(_shard(good, i), test[i * PER_SHARD:(i + 1) * PER_SHARD])
  wd = base / 'run'
  assert cli_train.train_main([
      '--config', f'{helpers.TINY}:{data}', '--workdir', str(wd), '--config.num_train_steps=2',
      '--config.schedule.warmup_steps=1', '--config.checkpoint.every_steps=2',
      f'--config.dataset.eval_files={good}/test-*-of-*.tfrecord']) == 0
  return wd, good, [_video_id(r) for r in test]


def _copy(run_, tmp_path):
  data = tmp_path / 'test'
  shutil.copytree(run_[1], data)
  return data


def _eval(run_, data, mode, capsys):
  """(exit code, stdout, stderr, results JSON or None, ids of the evaluated videos or None)."""
  wd = run_[0]
  results = wd / 'checkpoints' / 'eval_2_test.json'
  for f in (wd / 'checkpoints').glob('eval_*'):
    f.unlink()
  capsys.readouterr()
  rc = cli_train.eval_main(['--workdir', str(wd), f'--config.dataset.eval_files={data}/test-*-of-*.tfrecord',
                            f'--config.dataset.on_error={mode}'])
  out, err = capsys.readouterr()
  if not results.exists():
    return rc, out, err, None, None
  rows = csv.DictReader(open(wd / 'checkpoints' / 'eval_2_test_1x3_videos.csv'))
  return rc, out, err, json.loads(results.read_text()), [r['video_id'] for r in rows]


def _error_line(err):
  lines = [x for x in err.splitlines() if x.startswith('vvt eval: error:')]
  assert len(lines) == 1, err[-2000:]
  return lines[0]


def _skip_line(out):
  lines = [x for x in out.splitlines() if x.startswith('[eval] test: skipped')]
  assert len(lines) == 1, out[-2000:]
  return lines[0]


def _check_raise(run_, data, capsys, expected):
  rc, _, err, results, _ = _eval(run_, data, 'raise', capsys)
  assert rc == 1 and results is None
  line = _error_line(err)
  assert re.fullmatch('vvt eval: error: ' + expected + '.*', line), line


def _check_skip(run_, data, capsys, intact, skipped, line_pattern, reasons):
  """Exit 0; the evaluated videos are exactly `intact` (indices); `skipped` videos counted and said."""
  rc, out, _, res, ids = _eval(run_, data, 'skip', capsys)
  assert rc == 0, out[-2000:]
  all_ids = run_[2]
  assert ids == [all_ids[k] for k in intact]
  assert res['num_videos'] == len(intact) and res['videos_skipped'] == skipped
  assert res['data_skipped'] == reasons
  assert sum(len(f['records']) + f['not_indexed'] for f in res['skipped_files']) == skipped
  line = _skip_line(out)
  assert line.startswith(f'[eval] test: skipped {skipped} of {len(intact) + skipped} videos under '
                         'dataset.on_error=skip, in 1 file: '), line
  assert re.search(line_pattern, line), line
  assert f'{len(intact)} videos, {skipped} skipped as bad records' in out
  return res


def test_a_shard_cut_short(run, tmp_path, capsys):
  data = _copy(run, tmp_path)
  path = _shard(data, 1)
  last = tfrecord_framing.scan_records(path).offsets[-1]
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) - 100)
  _check_raise(run, data, capsys, re.escape(f'{path}: record 4: record at byte {last} declares'))
  res = _check_skip(run, data, capsys, range(9), 1,
                    re.escape(f'{path}: 1 record past its damage (damaged_file 1: record at byte {last} declares'),
                    {'damaged_file': 1})
  assert res['skipped_files'][0]['not_indexed'] == 1


def test_one_byte_of_a_length_header_changed(run, tmp_path, capsys):
  data = _copy(run, tmp_path)
  path = _shard(data, 0)
  at = tfrecord_framing.scan_records(path).offsets[2]
  with open(path, 'r+b') as f:
    f.seek(at + 1)
    byte = f.read(1)[0]
    f.seek(at + 1)
    f.write(bytes([byte ^ 0x40]))
  why = re.escape(f'the length field of the record at byte {at} does not match its checksum')
  _check_raise(run, data, capsys, re.escape(f'{path}: record 2: ') + why)
  # records 2-4 of shard 0 cannot be read (framing cannot resume past the header): counted, the rest evaluated
  _check_skip(run, data, capsys, [0, 1, 5, 6, 7, 8, 9], 3,
              re.escape(f'{path}: 3 records past its damage (damaged_file 3: ') + why, {'damaged_file': 3})


def test_a_shard_of_random_bytes_beside_the_good_ones(run, tmp_path, capsys):
  data = _copy(run, tmp_path)
  path = str(data / 'test-00002-of-00002.tfrecord')
  with open(path, 'wb') as f:
    f.write(np.random.default_rng(0).bytes(5000))
  _check_raise(run, data, capsys, re.escape(f'{path}: record 0: the length field of the record at byte 0'))
  _check_skip(run, data, capsys, range(10), 1, re.escape(f'{path}: 1 record past its damage (damaged_file 1:'),
              {'damaged_file': 1})


def test_random_bytes_inside_a_record_end_its_file_and_the_other_file_is_read(run, tmp_path, capsys):
  data = _copy(run, tmp_path)
  path = _shard(data, 0)
  scan = tfrecord_framing.scan_records(path)
  at = scan.offsets[2]
  middle = (at + scan.offsets[3]) // 2
  with open(path, 'r+b') as f:
    f.seek(middle)
    f.write(np.random.default_rng(1).bytes(64))
  why = f'record 2: the data of the record at byte {at} do not match their checksum'
  _check_raise(run, data, capsys, re.escape(f'{path}: record 2: TFRecord data cannot be read: {why}'))
  res = _check_skip(run, data, capsys, [0, 1, 5, 6, 7, 8, 9], 3,
                    re.escape(f'{path}: records 2-4 (unreadable_tfrecord 3: {why}'), {'unreadable_tfrecord': 3})
  assert res['skipped_video_indices'] == [2, 3, 4]
  assert res['skipped_files'][0]['records'] == [2, 3, 4]


def _cut_frame(path, record, frame):
  """Rewrites `path` with frame `frame` of record `record` cut to the first half of its JPEG."""
  recs = _read(path)
  ex = tf.train.SequenceExample.FromString(recs[record])
  value = ex.feature_lists.feature_list['image/encoded'].feature[frame].bytes_list.value
  value[0] = value[0][:len(value[0]) // 2]
  recs[record] = ex.SerializeToString()
  dmvr_records.write_records(path, recs)
  return len(value[0])


def test_a_frame_with_half_its_jpeg(run, tmp_path, capsys):
  data = _copy(run, tmp_path)
  path = _shard(data, 1)
  size = _cut_frame(path, 2, 3)  # video 7
  why = re.escape(f'frame 3 of 16 ({size} bytes) does not end with the JPEG end-of-image marker FF D9')
  _check_raise(run, data, capsys, re.escape(f'{path}: record 2: JPEG frame cut short: ') + why)
  res = _check_skip(run, data, capsys, [0, 1, 2, 3, 4, 5, 6, 8, 9], 1,
                    re.escape(f'{path}: record 2 (truncated_frame 1: ') + why, {'truncated_frame': 1})
  assert res['skipped_video_indices'] == [7]


def test_frames_of_the_projects_encoders_end_with_the_marker():
  """The check refuses no frame an encoder the project uses writes (PIL: converters and the synthetic set;
  TensorFlow; OpenCV), and only a JPEG without its end is refused."""
  import cv2

  from vvt.data.writing import synthetic
  image = np.random.default_rng(0).integers(0, 255, (24, 40, 3), np.uint8)
  frames = [synthetic._encode_jpeg(image), tf.io.encode_jpeg(image).numpy(),
            cv2.imencode('.jpg', image)[1].tobytes(), tf.io.encode_png(image).numpy()]
  whole, detail = image_frames.check_frame_ends(tf.constant(frames))
  assert bool(whole) and detail.numpy() == b''
  whole, detail = image_frames.check_frame_ends(tf.constant(frames[:2] + [frames[2][:-1]]))
  assert not bool(whole) and detail.numpy().startswith(b'frame 2 of 3 (')


def _train_args(data, wd, mode, steps=6):
  return ['train', '--config', f'{helpers.TINY}:{data}', '--workdir', str(wd), f'--config.dataset.on_error={mode}',
          f'--config.num_train_steps={steps}', f'--config.log_every_steps={steps}', '--config.schedule.warmup_steps=1',
          f'--config.checkpoint.every_steps={steps}']


def test_training_names_or_counts_damaged_files_and_cut_frames(tmp_path, capsys):
  """Both runs through `main(argv)` in the test process: the message and the exit code are what is checked here
(that a `vvt train` process ends promptly after a data error: test_data_error_exit.py)."""
  from tests.command_output import main_in_repo
  data = tmp_path / 'data'
  helpers.write_tiny_dataset(data)
  shard0, shard1 = (str(data / f'train-0000{i}-of-00002.tfrecord') for i in range(2))
  size = _cut_frame(shard1, 5, 3)
  capsys.readouterr()
  assert main_in_repo(_train_args(data, tmp_path / 'raise', 'raise')) == 1
  err = capsys.readouterr().err
  lines = [x for x in err.splitlines() if x.startswith('vvt train: error:')]
  assert lines == [f'vvt train: error: {shard1}: record 5: JPEG frame cut short: frame 3 of 16 ({size} bytes) '
                   'does not end with the JPEG end-of-image marker FF D9'], err[-2000:]

  scan = tfrecord_framing.scan_records(shard0)
  with open(shard0, 'r+b') as f:  # the data of record 20 of 24 broken: records 20-23 of shard 0 not read
    f.seek((scan.offsets[20] + scan.offsets[21]) // 2)
    f.write(np.random.default_rng(2).bytes(64))
  capsys.readouterr()
  helpers.vvt_main(*_train_args(data, tmp_path / 'skip', 'skip'))
  out = capsys.readouterr().out
  said = [x for x in out.splitlines() if x.startswith('[train] skipped under dataset.on_error=skip')]
  assert len(said) == 1, out[-3000:]
  assert (f'{shard0}: records 20-23 (unreadable_tfrecord 4: record 20: the data of the record at byte '
          f'{scan.offsets[20]} do not match their checksum') in said[0]
  assert f'{shard1}: record 5 (truncated_frame 1: frame 3 of 16 ({size} bytes)' in said[0]
  assert said[0].startswith('[train] skipped under dataset.on_error=skip: 5 records in 2 files: ')
  metrics = [json.loads(x) for x in open(tmp_path / 'skip' / 'metrics.jsonl')]
  last = [m for m in metrics if 'data_skipped_unreadable_tfrecord' in m][-1]
  assert last['data_skipped_unreadable_tfrecord'] >= 4 and last['data_skipped_truncated_frame'] >= 1


def test_a_cut_jpeg_in_a_frame_folder_is_named_by_predict(run, tmp_path, capsys):
  """`vvt predict` reads frame folders, not records: a JPEG cut short there is named too (OpenCV would fill it)."""
  from vvt.cli import predict as cli_predict
  from vvt.data.writing import synthetic
  frames = synthetic.render_clip(0, np.random.default_rng(0), 16, 64)
  for name in ('good', 'cut'):
    (tmp_path / name).mkdir()
    for t, frame in enumerate(frames):
      (tmp_path / name / f'{t:06d}.jpg').write_bytes(synthetic._encode_jpeg(frame))
  cut = tmp_path / 'cut' / '000003.jpg'
  data = cut.read_bytes()
  cut.write_bytes(data[:len(data) // 2])
  capsys.readouterr()
  rc = cli_predict.main(['--workdir', str(run[0]), '--json', str(tmp_path / 'good'), str(tmp_path / 'cut')])
  out, err = capsys.readouterr()
  assert rc == 1
  result = json.loads(out)
  assert [p['input'] for p in result['predictions']] == [str(tmp_path / 'good')]
  assert result['failed'] == [{'input': str(tmp_path / 'cut'), 'error': f'{cut}: JPEG cut short ({len(data) // 2} '
                               'bytes; it does not end with the end-of-image marker FF D9)'}]
  assert f'vvt predict: skipped {cut}: JPEG cut short' in err
