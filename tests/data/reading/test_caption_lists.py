"""Caption lists (`path,label,caption`, a row per caption): merged per video, written as `caption/string` by
`vvt data convert`, read by both sources into the batches' 'caption' strings; bad rows refused naming the line."""
import os

from data_helpers import small_config
from data_helpers import write_footage
import numpy as np
import pytest

from vvt.data import pipeline
from vvt.data.reading import video_lists
from vvt.data.writing import video_shards

CAPTIONS = {0: ['a red clip', 'it is red'], 1: ['a green clip'], 2: ['blue', 'bluer', 'bluest']}


@pytest.fixture(scope='module')
def captioned(tmp_path_factory):
  """DIR/captions.csv (3 videos, 6 caption rows, one video's rows apart) and its TFRecords."""
  d = tmp_path_factory.mktemp('captions')
  write_footage(str(d), labels=(0, 1, 2), frames=(8, 9, 10))
  rows = [(i, c) for i in (0, 2, 1) for c in CAPTIONS[i]]
  rows.append(rows.pop(0))  # video 0's first caption listed last
  lines = ['path,label,caption'] + [f'clips/v{i}.mp4,{"abc"[i]},"{c}"' for i, c in rows]
  (d / 'captions.csv').write_text('\n'.join(lines) + '\n')
  video_shards.convert(str(d / 'captions.csv'), str(d / 'rec' / 'cap'), str(d / 'classes.txt'), num_shards=1,
                       short_side=32, workers=1, progress=False)
  return d


def test_rows_of_one_video_are_merged_in_list_order(captioned):
  got = video_lists.read_video_list(str(captioned / 'captions.csv'))
  assert [(p, label, x['captions']) for p, label, x in got] == [
      ('clips/v0.mp4', 'a', ['it is red', 'a red clip']), ('clips/v2.mp4', 'c', CAPTIONS[2]),
      ('clips/v1.mp4', 'b', CAPTIONS[1])]


@pytest.mark.parametrize('name', ['video_folder', 'dmvr'])
def test_both_sources_carry_the_captions(captioned, name):
  files = str(captioned / 'captions.csv') if name == 'video_folder' else str(captioned / 'rec' / 'cap.tfrecord@1')
  spec = small_config(files, files, num_classes=3, name=name, captions=2, eval_resize=16)
  keep = lambda batch: batch  # the task's tokeniser sees the strings (without one they stay on the host)
  batches = list(pipeline.make_eval_iterator(spec, global_batch_size=4, text=keep))
  caps = np.concatenate([b['caption'] for b in batches])[np.concatenate([b['mask'] for b in batches]) > 0]
  assert caps.shape == (3, 2)
  assert [[c.decode() for c in row] for row in caps] == [['it is red', 'a red clip'], ['blue', 'bluer'],
                                                          ['a green clip', '']]
  train = next(pipeline.make_train_iterator(spec, global_batch_size=2, text=keep))
  assert train['caption'].shape == (2, 2)
  assert 'caption' not in next(pipeline.make_train_iterator(spec, global_batch_size=2))


@pytest.mark.parametrize('rows, message', [
    (['clips/v0.mp4,a,one', 'clips/v0.mp4,a,""'], 'captions.csv: line 3: empty caption'),
    (['clips/v0.mp4,a,one', 'clips/v0.mp4,b,two'],
     "captions.csv: line 3: clips/v0.mp4 has label 'b' here but 'a' on line 2"),
])
def test_bad_caption_rows_are_refused_naming_the_line(tmp_path, rows, message):
  path = tmp_path / 'captions.csv'
  path.write_text('\n'.join(['path,label,caption'] + rows) + '\n')
  with pytest.raises(ValueError, match=message):
    video_lists.read_video_list(str(path))
  assert os.listdir(tmp_path) == ['captions.csv']
