"""Unlabelled video in every source, for a run that reads no labels (num_classes unset: `mae`, `jepa`): a list of
paths only, a folder of videos, and TFRecords `vvt data convert` wrote without --classes; each refused, in one line
naming the file, for a run that reads labels."""
import json
import os
import re

from data_helpers import small_config
from data_helpers import write_footage
import numpy as np
import pytest
import tensorflow as tf

from tests.command_output import main_in_repo
from tests.data.test_folder_refusals import _train
from vvt.cli import main as vvt_main
from vvt.data import pipeline
from vvt.data.reading import video_lists
from vvt.data.writing import video_shards

VIDEOS = ('clips/v0.mp4', 'clips/v1.mp4', 'clips/v2.mp4', 'clips/v3.mp4')


@pytest.fixture(scope='module')
def footage(tmp_path_factory):
  """DIR/clips/v0-2.mp4 (a fourth, DIR/clips/deeper/v4.mp4, and a hidden file under DIR/clips), DIR/classes.txt and
  DIR/train.csv (labelled: neither names the classes of the unlabelled lists beside them), DIR/paths.csv (a
  header `path` alone), DIR/bare.csv (one column, no header), DIR/records/train.tfrecord@2 (paths.csv converted
  without --classes)."""
  d = tmp_path_factory.mktemp('unlabelled')
  write_footage(str(d), labels=(0, 1, 0, 1), frames=(12, 12, 12, 12), classes=('a', 'b'))
  os.makedirs(d / 'clips' / 'deeper')
  os.rename(d / 'clips' / 'v3.mp4', d / 'clips' / 'deeper' / 'v4.mp4')
  (d / 'clips' / '.hidden.mp4').write_bytes(b'')
  rows = ['clips/v0.mp4', 'clips/v1.mp4', 'clips/v2.mp4', 'clips/deeper/v4.mp4']
  (d / 'paths.csv').write_text('\n'.join(['path'] + rows) + '\n')
  (d / 'bare.csv').write_text('\n'.join(rows) + '\n')
  video_shards.convert(str(d / 'paths.csv'), str(d / 'records' / 'train'), None, num_shards=2, short_side=32,
                       workers=1, progress=False)
  return d


def test_a_list_of_paths_only_and_a_folder_give_unlabelled_rows(footage):
  for name in ('paths.csv', 'bare.csv'):
    rows = video_lists.read_video_list(str(footage / name))
    assert [r[0] for r in rows] == ['clips/v0.mp4', 'clips/v1.mp4', 'clips/v2.mp4', 'clips/deeper/v4.mp4']
    assert video_lists.unlabelled(rows) and video_lists.list_class_names(str(footage / name)) is None
  folder = video_lists.read_video_list(str(footage / 'clips'))  # recursive, sorted, hidden files left out
  assert [r[0] for r in folder] == ['deeper/v4.mp4', 'v0.mp4', 'v1.mp4', 'v2.mp4'] and video_lists.unlabelled(folder)
  assert not video_lists.unlabelled(video_lists.read_video_list(str(footage / 'train.csv')))
  (footage / 'mixed.csv').write_text('path\nclips/v0.mp4,a\n')
  with pytest.raises(ValueError, match=r'mixed.csv: line 2: 2 columns in "clips/v0.mp4,a", but the list gives '
                                       'paths only'):
    video_lists.read_video_rows(str(footage / 'mixed.csv'))


def _frames(spec, steps=2):
  """uint8 (steps x 2, 4, 16, 16, 3) of a pretraining run's first training batches; their keys."""
  it = pipeline.make_train_iterator(spec, 2, seed=1, process_index=0, process_count=1)
  batches = [next(it) for _ in range(steps)]
  it.close()
  return np.concatenate([b['inputs'] for b in batches]), set(batches[0])


@pytest.mark.parametrize('files', ['paths.csv', 'clips', 'records/train.tfrecord@2'])
def test_a_run_that_reads_no_labels_reads_each_source_and_resumes_exactly(footage, files):
  name = 'dmvr' if 'tfrecord' in files else 'video_folder'
  spec = small_config(str(footage / files), str(footage / files), name=name, num_classes=0, shuffle_buffer=4)
  frames, keys = _frames(spec, steps=3)
  assert frames.shape == (6, 4, 16, 16, 3) and 'label' not in keys and frames.std() > 0
  it = pipeline.make_train_iterator(spec, 2, seed=1, start_step=2, process_index=0, process_count=1)
  np.testing.assert_array_equal(next(it)['inputs'], frames[4:])  # resumed at step 2: batch 2 exactly
  it.close()
  hosts = [pipeline.make_train_iterator(spec, 2, seed=1, process_index=p, process_count=2) for p in (0, 1)]
  assert [next(h)['inputs'].shape[0] for h in hosts] == [1, 1]  # each host its half of the records
  for h in hosts:
    h.close()


def test_records_converted_without_classes_hold_no_labels(footage):
  manifest = json.loads((footage / 'records' / 'train.manifest.json').read_text())
  assert manifest['labelled'] is False and manifest['class_names'] is None and manifest['totals']['ok'] == 4
  record = next(iter(tf.data.TFRecordDataset(str(footage / 'records' / 'train.tfrecord-00000-of-00002'))))
  example = tf.train.SequenceExample.FromString(record.numpy())
  context = set(example.context.feature)
  assert 'video_id' in context and not any(k.startswith('clip/label/') for k in context), context
  with pytest.raises(ValueError, match=r'train.csv: its rows have labels: give --classes'):
    video_shards.convert(str(footage / 'train.csv'), str(footage / 'other' / 'x'), None, num_shards=1,
                         workers=1, progress=False)
  with pytest.raises(ValueError, match=r'paths.csv: a list of paths only gives no labels: leave out --classes'):
    video_shards.convert(str(footage / 'paths.csv'), str(footage / 'other' / 'x'), str(footage / 'classes.txt'),
                         num_shards=1, workers=1, progress=False)
  assert not (footage / 'other').exists()  # refused before anything is written


def test_the_data_pipeline_refuses_unlabelled_videos_to_a_run_that_reads_labels(footage):
  for files, what in (('paths.csv', 'lists paths only (no label column)'),
                      ('clips', 'is a folder of videos, which gives no labels')):
    spec = small_config(str(footage / files), str(footage / files), name='video_folder', num_classes=2)
    line = f'{files} {what}, but this run reads labels (num_classes=2)'
    with pytest.raises(ValueError, match=f'dataset.train_files: .*{re.escape(line)}'):
      pipeline.make_train_iterator(spec, 2, process_index=0, process_count=1)


@pytest.mark.parametrize('files,name,line', [
    ('paths.csv', 'video_folder', "paths.csv lists paths only (no label column), but task.name='classification' "
                                  'reads labels: give path,label rows'),
    ('clips', 'video_folder', "clips is a folder of videos, which gives no labels, but task.name='classification' "
                              'reads labels: list the videos with their labels in a CSV'),
    ('records/train.tfrecord@2', 'dmvr', "train.manifest.json: the records hold no labels (`vvt data convert` "
                                          "without --classes), but task.name='classification' reads labels")])
def test_a_labelled_run_on_unlabelled_videos_is_refused_in_one_line(footage, tmp_path, capsys, files, name, line):
  code, err, written = _train(capsys, tmp_path, str(footage / files), f'--config.dataset.name={name}',
                              '--config.num_classes=0', '--config.class_names=None')
  assert code == 2 and not written, err  # every problem in one run: the training files' line, the evaluation files'
  assert len(err) == 2 and err[0].startswith('vvt train: error: dataset.train_files: ') and line in err[0], err
  assert err[1].startswith('vvt train: error: dataset.eval_files: '), err


def test_vvt_data_convert_without_classes_refuses_a_labelled_list(footage, tmp_path, capsys):
  code = vvt_main(['data', 'convert', '--input', str(footage / 'train.csv'), '--output', str(tmp_path / 'x'),
                   '--shards', '1', '--no-progress'])
  err = capsys.readouterr().err.strip().splitlines()
  assert code == 2 and len(err) == 1 and err[0].startswith('vvt data: error: '), err
  assert 'train.csv: its rows have labels: give --classes' in err[0], err
  assert not os.listdir(tmp_path)


def test_a_tiny_mae_run_pretrains_on_a_folder_and_evaluates_on_a_list_of_paths(footage, tmp_path):
  workdir = tmp_path / 'run'
  code = main_in_repo(['train', '--config', 'tests/train/tiny_config.py:none,spatiotemporal', '--workdir',
                       str(workdir), '--config.task.name=mae', '--config.num_classes=0', '--config.class_names=None',
                       '--config.dataset.name=video_folder', f'--config.dataset.train_files={footage / "clips"}',
                       f'--config.dataset.eval_files={footage / "paths.csv"}', '--config.num_frames=4',
                       '--config.image_size=32', '--config.model.tubelet=(2,8,8)', '--config.dataset.stride=2',
                       '--config.dataset.train_min_resize=34', '--config.dataset.train_max_resize=36',
                       '--config.dataset.eval_resize=34', '--config.batch_size=2', '--config.eval.batch_size=2',
                       '--config.num_train_steps=2', '--config.checkpoint.every_steps=2', '--config.log_every_steps=1',
                       '--config.schedule.warmup_steps=1', '--config.task.mae.decoder_depth=1',
                       '--config.task.mae.decoder_width=32', '--config.task.mae.decoder_heads=2'])
  assert code == 0
  records = [json.loads(line) for line in open(workdir / 'metrics.jsonl')]
  losses = [r['loss'] for r in records if r.get('kind') == 'train']
  assert len(losses) == 2 and all(np.isfinite(losses)), records
  final = [r for r in records if 'reconstruction_loss' in r]
  assert final and final[-1]['num_videos'] == 4, records
