"""A TFDS video dataset by name and data_dir, built locally (no network)."""
from data_helpers import check_source_contract
from data_helpers import small_config
import numpy as np
import pytest
import tensorflow_datasets as tfds

from vvt.data import pipeline
from vvt.data.reading import registry


class VvtTinyVideos(tfds.core.GeneratorBasedBuilder):
  """Videos of constant grey 20*label + 10; train: 7 videos, test: 5.

  (TFDS stores examples in hashed-key order, not generation order.)
  """
  VERSION = tfds.core.Version('1.0.0')

  def _info(self):
    return tfds.core.DatasetInfo(
        builder=self,
        features=tfds.features.FeaturesDict({
            'video': tfds.features.Video(shape=(None, 24, 32, 3),
                                         encoding_format='jpeg'),
            'label': tfds.features.ClassLabel(num_classes=4),
        }))

  def _split_generators(self, dl_manager):
    del dl_manager  # nothing to download
    return {'train': self._generate_examples(7), 'test': self._generate_examples(5)}

  def _generate_examples(self, n):
    for i in range(n):
      label = i % 4
      video = np.full((5 + i, 24, 32, 3), 20 * label + 10, np.uint8)
      yield i, {'video': video, 'label': label}


@pytest.fixture(scope='module')
def tfds_dir(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp('tfds'))
  VvtTinyVideos(data_dir=data_dir).download_and_prepare()
  return data_dir


def _cfg(data_dir, **kw):
  return small_config(name='tfds', tfds_name='vvt_tiny_videos', data_dir=data_dir,
                      num_classes=4, normalization='zero_centre', **kw)


def test_tfds_train_and_eval(tfds_dir):
  cfg = _cfg(tfds_dir)
  assert pipeline.num_videos(cfg, 'train') == 7
  assert pipeline.num_videos(cfg, 'test') == 5
  b = next(pipeline.make_train_iterator(cfg, 7, process_index=0, process_count=1))
  assert b['inputs'].shape == (7, 4, 16, 16, 3)
  assert sorted(b['label'].tolist()) == sorted(i % 4 for i in range(7))
  grey = b['inputs'][:, 0].mean(axis=(1, 2, 3))
  np.testing.assert_array_equal(np.round((grey - 10) / 20), b['label'])
  views = []
  for p in range(2):
    for eb in pipeline.make_eval_iterator(_cfg(tfds_dir, num_test_clips=2), 'test',
                                          4, process_index=p, process_count=2):
      real = eb['mask'] == 1
      grey = eb['inputs'][real][:, 0].mean(axis=(1, 2, 3))
      np.testing.assert_array_equal(np.round((grey - 10) / 20), eb['label'][real])
      views += list(zip(eb['video_index'][real], eb['view_index'][real], strict=True))
  assert sorted(views) == [(v, c) for v in range(5) for c in range(2)]


def test_tfds_keeps_the_source_contract(tfds_dir):
  source = registry.make_source(_cfg(tfds_dir), 'test')
  rows = check_source_contract(source)  # random access = the range reader
  assert {r[0].decode() for r in rows} == {'tfds:vvt_tiny_videos/test'}
  assert source.class_names == ('0', '1', '2', '3')  # the ClassLabel's names
  assert source.files == () and source.damaged == ()


def test_tfds_errors_name_the_dataset(tfds_dir, tmp_path):
  with pytest.raises(ValueError, match="no split 'validation'"):
    pipeline.num_videos(_cfg(tfds_dir), 'validation')
  with pytest.raises(FileNotFoundError, match='vvt_tiny_videos'):
    pipeline.num_videos(_cfg(str(tmp_path / 'empty')), 'test')
