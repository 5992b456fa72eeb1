"""Temporal annotations: ActivityNet-style JSON and THUMOS14's per-class files read into one form; each kind of bad
annotation refused in one line naming the file and the video."""
import json

import pytest

from vvt.data import AnnotationError
from vvt.data import read_activitynet
from vvt.data import read_annotations
from vvt.data import read_thumos14
from vvt.data import write_activitynet


def _anet(tmp_path, database, name='ann.json'):
  path = tmp_path / name
  path.write_text(json.dumps({'version': '1.3', 'database': database}))
  return str(path)


GOOD = {
    'v_a': {'subset': 'training', 'duration': 30.0, 'url': 'x',
            'annotations': [{'segment': [12.0, 20.5], 'label': 'Surfing'},
                            {'segment': [1.0, 4.0], 'label': 'Diving'}]},
    'v_b': {'subset': 'validation', 'duration': 10.0, 'annotations': [{'segment': [0, 10.4], 'label': 'Surfing'}]},
    'v_c': {'subset': 'testing', 'duration': 8.0, 'annotations': []},
}


def test_activitynet_json_read_into_one_form_and_written_back(tmp_path):
  ann = read_activitynet(_anet(tmp_path, GOOD))
  assert ann.labels == ('Diving', 'Surfing')
  a = ann.videos['v_a']
  assert (a.duration, a.subset) == (30.0, 'training')
  assert a.segments == ((1.0, 4.0, 0), (12.0, 20.5, 1))  # sorted by start, labels as indices
  assert ann.videos['v_b'].segments == ((0.0, 10.4, 1),)  # 0.4 s past the duration: within the tolerance
  assert ann.videos['v_c'].segments == ()
  assert set(ann.select('validation').videos) == {'v_b'}
  out = tmp_path / 'back.json'
  write_activitynet(str(out), ann)
  assert read_activitynet(str(out)) == ann
  assert set(read_annotations(str(out), subset='training').videos) == {'v_a'}


def test_a_given_label_list_sets_the_indices(tmp_path):
  ann = read_activitynet(_anet(tmp_path, GOOD), labels=['Surfing', 'Diving', 'Other'])
  assert ann.labels == ('Surfing', 'Diving', 'Other')
  assert ann.videos['v_a'].segments == ((1.0, 4.0, 1), (12.0, 20.5, 0))


@pytest.mark.parametrize('entry, labels, message', [
    ({'subset': 'training', 'duration': 9.0, 'annotations': [{'segment': [5.0, 3.0], 'label': 'Diving'}]}, None,
     'video v_bad: segment [5, 3] ends before it starts'),
    ({'subset': 'training', 'duration': 9.0, 'annotations': [{'segment': [5.0, 10.5], 'label': 'Diving'}]}, None,
     'video v_bad: segment [5, 10.5] goes past the video\'s duration 9 s'),
    ({'subset': 'training', 'duration': 9.0, 'annotations': [{'segment': [9.5, 9.8], 'label': 'Diving'}]}, None,
     'video v_bad: segment [9.5, 9.8] goes past'),
    ({'subset': 'training', 'duration': 9.0, 'annotations': [{'segment': [-1.0, 3.0], 'label': 'Diving'}]}, None,
     'video v_bad: segment [-1, 3] starts before 0 s'),
    ({'subset': 'training', 'duration': 9.0, 'annotations': [{'segment': [1.0, 3.0], 'label': 'Juggling'}]},
     ['Diving', 'Surfing'], 'video v_bad: label \'Juggling\' is not in the label list (2 labels)'),
    ({'subset': 'training', 'annotations': []}, None, 'video v_bad: no duration'),
    ({'duration': 9.0, 'annotations': []}, None, 'video v_bad: no subset'),
    ({'subset': 'training', 'duration': 9.0, 'annotations': [{'segment': [1.0, 3.0]}]}, None,
     'video v_bad: annotation 0: needs a segment [start, end] and a label'),
    ({'subset': 'training', 'duration': 9.0, 'annotations': [{'segment': [1.0], 'label': 'Diving'}]}, None,
     'video v_bad: annotation 0: segment [1.0] is not [start, end]'),
    ({'subset': 'training', 'duration': 9.0, 'annotations': [{'segment': [1.0, 'x'], 'label': 'Diving'}]}, None,
     'video v_bad: annotation 0: segment end is not a number'),
])
def test_bad_activitynet_annotations_refused_naming_the_video(tmp_path, entry, labels, message):
  path = _anet(tmp_path, {**GOOD, 'v_bad': entry})
  with pytest.raises(AnnotationError) as e:
    read_activitynet(path, labels=labels)
  text = str(e.value)
  assert '\n' not in text and text.startswith(path) and message in text, text


def test_a_file_without_a_database_refused(tmp_path):
  path = tmp_path / 'x.json'
  path.write_text(json.dumps({'v_a': GOOD['v_a']}))
  with pytest.raises(AnnotationError, match='no "database" object'):
    read_annotations(str(path))
  with pytest.raises(AnnotationError, match='no such annotation file'):
    read_annotations(str(tmp_path / 'absent.json'))


def _thumos(tmp_path, files):
  folder = tmp_path / 'thumos'
  folder.mkdir()
  for name, text in files.items():
    (folder / name).write_text(text)
  return str(folder)


THUMOS = {
    'BaseballPitch_val.txt': 'video_validation_0000051  67.5 75.9\nvideo_validation_0000051 85.9 90.6\n',
    'CliffDiving_val.txt': 'video_validation_0000052 3.2 5.1\n\n',
    'Ambiguous_val.txt': 'video_validation_0000051 80.0 81.2\nvideo_validation_0000053 1.0 2.0\n',
    'BaseballPitch_test.txt': 'video_test_0000004 1.0 2.0\n',
}


def test_thumos14_class_files_read_into_one_form(tmp_path):
  ann = read_annotations(_thumos(tmp_path, THUMOS))
  assert ann.labels == ('BaseballPitch', 'CliffDiving')
  assert set(ann.videos) == {'video_validation_0000051', 'video_validation_0000052', 'video_validation_0000053'}
  v = ann.videos['video_validation_0000051']
  assert v.segments == ((67.5, 75.9, 0), (85.9, 90.6, 0)) and v.ambiguous == ((80.0, 81.2),)
  assert (v.duration, v.subset) == (None, 'val')
  assert ann.videos['video_validation_0000052'].segments == ((3.2, 5.1, 1),)
  assert ann.videos['video_validation_0000053'].segments == ()
  test = read_thumos14(str(tmp_path / 'thumos'), 'test', durations={'video_test_0000004': 30.0})
  assert test.videos['video_test_0000004'].duration == 30.0 and test.labels == ('BaseballPitch',)


@pytest.mark.parametrize('files, kwargs, message', [
    ({'CliffDiving_val.txt': 'video_validation_0000052 5.1 3.2\n'}, {},
     'CliffDiving_val.txt: video video_validation_0000052: segment [5.1, 3.2] ends before it starts'),
    ({'CliffDiving_val.txt': 'video_validation_0000052 3.2\n'}, {},
     'CliffDiving_val.txt: line 1: expected "video_id start end"'),
    ({'CliffDiving_val.txt': 'video_validation_0000052 3.2 x\n'}, {},
     'CliffDiving_val.txt: line 1: video video_validation_0000052: end is not a number'),
    ({'CliffDiving_val.txt': 'video_validation_0000052 3.2 5.1\n'}, {'labels': ['BaseballPitch']},
     'CliffDiving_val.txt: video video_validation_0000052: label \'CliffDiving\' is not in the label list'),
    ({'CliffDiving_val.txt': 'video_validation_0000052 3.2 50.0\n'}, {'durations': {'video_validation_0000052': 20}},
     'video video_validation_0000052: segment [3.2, 50] goes past the video\'s duration 20 s'),
    ({'Ambiguous_val.txt': 'video_validation_0000052 3.2 5.0\n'}, {}, 'no THUMOS14 class files *_val.txt'),
])
def test_bad_thumos14_annotations_refused_naming_the_video(tmp_path, files, kwargs, message):
  with pytest.raises(AnnotationError) as e:
    read_thumos14(_thumos(tmp_path, files), 'val', **kwargs)
  assert '\n' not in str(e.value) and message in str(e.value), str(e.value)
