"""num_classes and class_names from the data's manifest (`vvt.config.labels`), in the loader, before validation."""
import json

import pytest

from tests.conftest import REPO
from vvt.config import labels
from vvt.config import loader
from vvt.config import schema
from vvt.config.errors import ConfigError

SYNTHETIC = str(REPO / 'configs/synthetic.py')


def data(tmp_path, manifest):
  (tmp_path / 'train.manifest.json').write_text(json.dumps(manifest))
  return [('dataset.train_files', str(tmp_path / 'train.tfrecord@2')),
          ('dataset.eval_files', str(tmp_path / 'test.tfrecord@1'))]


def test_unset_fields_come_from_the_manifest(tmp_path):
  c = loader.load(SYNTHETIC, data(tmp_path, {'class_names': ['forward', 'backward'], 'classes': ['x']}), files=())
  assert (c.num_classes, c.model.num_classes, c.dataset.num_classes) == (2, 2, 2)
  assert tuple(c.class_names) == ('forward', 'backward')


def test_older_manifests_and_class_lists(tmp_path):
  c = loader.load(SYNTHETIC, data(tmp_path, {'classes': ['a', 'b', 'c']}), files=())  # before class_names
  assert c.num_classes == 3 and tuple(c.class_names) == ('a', 'b', 'c')
  (tmp_path / 'sub').mkdir()
  (tmp_path / 'sub' / 'classes.txt').write_text('p\nq\n')
  c = loader.load(SYNTHETIC, [('dataset.train_files', str(tmp_path / 'sub' / 'train-*.tfrecord'))], files=())
  assert tuple(c.class_names) == ('p', 'q')


def test_the_synthetic_data_names_its_classes_before_it_is_written():
  names, where = labels.data_class_names(loader.load(SYNTHETIC, [], files=(), validate=False).dataset)
  assert names == tuple(schema.SYNTHETIC_CLASS_NAMES) and schema.SYNTHETIC_DIR in where


def test_set_fields_that_disagree_are_refused_in_training_only(tmp_path):
  over = data(tmp_path, {'class_names': ['forward', 'backward']})
  with pytest.raises(ConfigError, match=r"class_names \('up', 'down'\) differ from the training data's "
                                        r"\('forward', 'backward'\) \(.*train.manifest.json\)"):
    labels.resolve(loader.load(SYNTHETIC, over + [('class_names', "('up', 'down')")], files=()), check=True)
  with pytest.raises(ConfigError, match='num_classes=3 but the training data has 2 classes'):
    labels.resolve(loader.load(SYNTHETIC, over + [('num_classes', '3')], files=()), check=True)
  # an earlier run's saved config keeps its own names for evaluation and prediction (no check there)
  saved = loader.load(SYNTHETIC, over + [('class_names', "('up', 'down')")], files=())
  (tmp_path / 'config.json').write_text(saved.to_json_best_effort())
  back = loader.load(str(tmp_path / 'config.json'), [], files=())
  assert tuple(back.class_names) == ('up', 'down') and back.num_classes == 2


def test_multi_head_configs_are_left_alone(tmp_path):
  c = loader.load(str(REPO / 'configs/epic_kitchens/vivit_l_fe.py'),
                  data(tmp_path, {'class_names': ['a', 'b']}), files=(), init=False)
  assert dict(c.num_classes) == {'verb': 97, 'noun': 300} and c.class_names is None
