"""Bad input: a named error under on_error='raise', a counted skip under 'skip'."""
import dataclasses
import os

from data_helpers import small_config
from data_helpers import solid_video
import numpy as np
import pytest

from vvt.data import pipeline
from vvt.data.reading import errors
from vvt.data.reading.errors import DataError
from vvt.data.reading.errors import TruncatedFileError
from vvt.data.writing import dmvr_records

GOOD = 6  # good videos around the bad one


def _file_with_bad_record(tmp_path, bad_record, name='bad.tfrecord'):
  """GOOD good videos (labels 0..GOOD-1 with grey 20*label+10) + the bad one at index 2."""
  records = [dmvr_records.encode_sequence_example(solid_video(20 * k + 10, 5), k)
             for k in range(GOOD)]
  records.insert(2, bad_record)
  path = str(tmp_path / name)
  dmvr_records.write_records(path, records)
  return path


def _corrupt_jpeg_record():
  frames = solid_video(100, 5)
  frames[3] = frames[3][:30] + b'\x00garbage' * 20  # JPEG header, broken data
  return dmvr_records.encode_sequence_example(frames, 1)


BAD_RECORDS = {
    'corrupt': (_corrupt_jpeg_record, 'could not be parsed or a frame could not be decoded'),
    'bad_label': (lambda: dmvr_records.encode_sequence_example(solid_video(30, 5), 7),
                  'clip/label/index=7 \\(num_classes=6\\)'),
    'no_frames': (lambda: dmvr_records.encode_sequence_example([], 1), 'no frames'),
    # a multi-label record read by a single-label run: named as such (was: "could not be parsed")
    'several_labels': (lambda: dmvr_records.encode_sequence_example(solid_video(50, 5), [1, 3]),
                       'record has several labels: clip/label/index holds 2 labels \\(a multi-label record\\): '
                       "dataset.multi_label=False reads one label a record; set dataset.multi_label=True "
                       "\\(task.name='multilabel'\\) to read them all$"),
    'not_a_sequence_example': (lambda: b'\x08\x96\x01 this is not a proto',
                               'could not be parsed'),
    'missing_label': (lambda: dmvr_records.encode_sequence_example(
        solid_video(30, 5), {'some/other/key': 1}), 'label missing'),
}


@pytest.mark.parametrize('kind', sorted(BAD_RECORDS))
def test_bad_record_raises_naming_file_and_record(tmp_path, kind):
  make, reason = BAD_RECORDS[kind]
  path = _file_with_bad_record(tmp_path, make())
  cfg = small_config(path, path, num_classes=GOOD)
  with pytest.raises(DataError, match=f'{path}: record 2: .*{reason}'):
    it = pipeline.make_eval_iterator(cfg, 'test', 2, process_index=0,
                                     process_count=1)
    list(it)
  with pytest.raises(DataError, match=f'{path}: record 2: .*{reason}'):
    it = pipeline.make_train_iterator(cfg, 7, process_index=0, process_count=1)
    next(it)


@pytest.mark.parametrize('kind', sorted(BAD_RECORDS))
def test_bad_record_is_skipped_and_counted(tmp_path, kind):
  make, _ = BAD_RECORDS[kind]
  path = _file_with_bad_record(tmp_path, make())
  cfg = small_config(path, path, num_classes=GOOD, on_error='skip',
                     normalization='zero_centre')
  counter = {'not_a_sequence_example': 'corrupt',
             'missing_label': 'bad_label'}.get(kind, kind)
  before = errors.error_counts()
  batches = list(pipeline.make_eval_iterator(cfg, 'test', 4, process_index=0,
                                             process_count=1))
  after = errors.error_counts()
  assert after[counter] == before[counter] + 1
  assert sum(after.values()) == sum(before.values()) + 1
  real = np.concatenate([b['mask'] for b in batches]) == 1
  vids = np.concatenate([b['video_index'] for b in batches])[real]
  labels = np.concatenate([b['label'] for b in batches])[real]
  assert sorted(vids) == [0, 1, 3, 4, 5, 6]  # the bad video (2) has no real view
  np.testing.assert_array_equal(labels, [0, 1, 2, 3, 4, 5])
  # ... and is reported as skipped, by index, so an evaluator can leave it out.
  skipped = np.concatenate([pipeline.skipped_videos(b) for b in batches])
  assert skipped.tolist() == [2]
  # Training: every batch holds good videos only, with their true labels.
  it = pipeline.make_train_iterator(cfg, GOOD, process_index=0, process_count=1)
  for _ in range(2):
    b = next(it)
    grey = b['inputs'][:, 0].mean(axis=(1, 2, 3))
    np.testing.assert_array_equal(np.round((grey - 12.5) / 20), b['label'])
    assert sorted(b['label']) == list(range(GOOD))


def _truncated_file(tmp_path):
  records = [dmvr_records.encode_sequence_example(solid_video(20 * k + 10, 5), k)
             for k in range(3)]
  path = str(tmp_path / 'cut.tfrecord')
  dmvr_records.write_records(path, records)
  size = os.path.getsize(path)
  with open(path, 'r+b') as f:
    f.truncate(size - 100)
  return path


def test_truncated_file_raises_naming_file_and_record(tmp_path):
  path = _truncated_file(tmp_path)
  cfg = small_config(path, path, num_classes=3)
  with pytest.raises(TruncatedFileError, match=f'{path}: record 2: .*declares'):
    pipeline.make_train_iterator(cfg, 2, process_index=0, process_count=1)
  with pytest.raises(TruncatedFileError, match=f'{path}: record 2'):
    pipeline.num_videos(cfg, 'test')


def test_truncated_file_reads_complete_records_and_counts(tmp_path):
  path = _truncated_file(tmp_path)
  cfg = small_config(path, path, num_classes=3, on_error='skip')
  before = errors.error_counts()['truncated_files']
  assert pipeline.num_videos(cfg, 'test') == 2
  batches = list(pipeline.make_eval_iterator(cfg, 'test', 2, process_index=0,
                                             process_count=1))
  assert [b['label'].tolist() for b in batches] == [[0, 1]]
  pipeline.make_train_iterator(cfg, 2, process_index=0, process_count=1)
  # Indexed three times (num_videos, eval, train): one truncated file.
  assert errors.error_counts()['truncated_files'] == before + 1


def test_missing_files_are_named(tmp_path):
  missing = str(tmp_path / 'nope.tfrecord')
  with pytest.raises(FileNotFoundError, match='nope.tfrecord'):
    pipeline.num_videos(small_config(eval_files=missing), 'test')
  with pytest.raises(FileNotFoundError, match="no file matches .*x-\\*"):
    pipeline.num_videos(small_config(eval_files=str(tmp_path / 'x-*')), 'test')
  sharded = str(tmp_path / 'train.tfrecord@4')
  with pytest.raises(FileNotFoundError, match='4 of 4 shards .*train.tfrecord-00000-of-00004'):
    pipeline.make_train_iterator(small_config(sharded, on_error='skip'), 2,
                                 process_index=0, process_count=1)


def test_corrupt_payload_raises_data_error(tmp_path):
  # Damage bytes inside a record's payload: TFRecord's CRC check catches it.
  records = [dmvr_records.encode_sequence_example(solid_video(20 * k + 10, 5), k)
             for k in range(3)]
  path = str(tmp_path / 'crc.tfrecord')
  dmvr_records.write_records(path, records)
  with open(path, 'r+b') as f:
    f.seek(len(records[0]) + 16 + 40)
    f.write(b'\xff\xfe\xfd\xfc')
  cfg = small_config(path, path, num_classes=3)
  start = len(records[0]) + 16  # the damaged record's first byte
  with pytest.raises(DataError, match=f'crc.tfrecord: record 1: TFRecord data cannot be read: record 1: the '
                                      f'data of the record at byte {start} do not match their checksum'):
    list(pipeline.make_eval_iterator(cfg, 'test', 3, process_index=0,
                                     process_count=1))


def test_file_removed_after_the_iterator_was_built(tmp_path):
  path = _file_with_bad_record(
      tmp_path, dmvr_records.encode_sequence_example(solid_video(30, 5), 1))
  cfg = small_config(path, path, num_classes=GOOD)
  it = pipeline.make_eval_iterator(cfg, 'test', 2, process_index=0,
                                   process_count=1)
  os.remove(path)
  with pytest.raises(DataError, match='bad.tfrecord'):
    list(it)


def test_each_iterator_counts_its_own_skips(tmp_path):
  """`skip_counts()` is the iterator's own: an evaluation's skips are not a training iterator's, and a fresh
  iterator starts at zero whatever the process skipped before."""
  path = _file_with_bad_record(tmp_path, BAD_RECORDS['bad_label'][0]())
  cfg = small_config(path, path, num_classes=GOOD, on_error='skip')
  ev = pipeline.make_eval_iterator(cfg, 'test', 4, process_index=0, process_count=1)
  list(ev)
  assert ev.skip_counts()['bad_label'] == 1 and sum(ev.skip_counts().values()) == 1
  train = pipeline.make_train_iterator(cfg, GOOD, process_index=0, process_count=1)
  assert sum(train.skip_counts().values()) == 0  # nothing read yet, though the process has skipped one
  next(train)
  assert train.skip_counts()['bad_label'] >= 1 and ev.skip_counts()['bad_label'] == 1
  raising = pipeline.make_eval_iterator(dataclasses.replace(cfg, on_error='raise'), 'test', 4,
                                        process_index=0, process_count=1)
  assert raising.skip_counts() == {name: 0 for name in ev.skip_counts()}
