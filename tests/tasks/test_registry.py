"""The task room: the registry by `config.task.name`, the config section, the interface every task keeps."""
import importlib
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from configs import common
from configs import synthetic_video_text
from tests import specs
from tests.conftest import REPO
from vvt.config import loader
from vvt.config import run_file
from vvt.config import validation
from vvt.config.errors import ConfigError
from vvt.tasks import registry
from vvt.tasks import video_text_options
from vvt.tasks.base import Task
from vvt.tasks.classification import Classification

VIDEO_TEXT_TASKS = ('zero_shot', 'retrieval')  # tasks of a video-text model (model.text)


def _config(**task):
  if task.get('name') in VIDEO_TEXT_TASKS:
    c = synthetic_video_text.get_config()
    c.dataset.captions = 1 if task['name'] == 'retrieval' else 0
  else:
    c = common.synthetic_config('divided', 'data/synthetic', hidden_size=32, num_layers=1, num_heads=2, mlp_dim=64)
  c.num_classes = 4
  for k, v in task.items():
    c.task[k] = v
  return c


def test_the_default_task_is_classification_and_reads_the_run_config():
  c = _config()
  c.loss.label_smoothing, c.loss.mixup_alpha, c.eval.average = 0.1, 0.8, 'softmax'
  task = specs.task_for(c)
  assert c.task.name == 'classification' and isinstance(task, Classification)
  assert (task.heads, task.label_smoothing, task.mixup_alpha, task.average) == ({'': 4}, 0.1, 0.8, 'softmax')
  assert hash(task) == hash(specs.task_for(c))  # a static part of the jitted steps


def test_a_config_json_without_a_task_section_is_a_classification_run(tmp_path):
  values = json.loads(json.dumps(_config().to_dict(), default=list))
  del values['task']
  (tmp_path / 'config.json').write_text(json.dumps(values))
  loaded = run_file.load_saved(str(tmp_path))
  assert loaded.task.name == 'classification' and isinstance(specs.task_for(loaded), Classification)


def test_a_task_is_built_of_a_run_spec_never_of_the_config_dict():
  c = _config()
  with pytest.raises(TypeError, match=r'^vvt.tasks.registry.task_of takes a RunSpec .*, not ConfigDict$'):
    registry.task_of(c)
  with pytest.raises(TypeError, match=r', not dict$'):
    registry.task_of(c.to_dict())


def test_an_unknown_task_is_one_line_naming_the_field_and_the_choices():
  with pytest.raises(ConfigError) as e:
    validation.validate(_config(name='segmentation'))
  assert 'task.name' in str(e.value) and 'classification' in str(e.value) and '\n' not in str(e.value)


def test_a_video_text_model_runs_zero_shot_by_default_and_refuses_a_classifier_task_in_one_line():
  """configs/synthetic_video_text.py (and so a checkpoint converted with it) is a zero-shot run, which trains nothing;
  classification or multilabel on a video-text model, which has no classifier head, is one line of the config's
  problems (not a TypeError when the task is built)."""
  c = synthetic_video_text.get_config()
  c.num_classes = 4
  assert c.task.name == 'zero_shot' and validation.problems(c, purpose='eval') == []
  for name in ('classification', 'multilabel'):
    c.task.name = name
    [line] = [p for p in validation.problems(c, purpose='eval') if 'classifier head' in p]
    assert line.startswith(f"task.name={name!r} trains a classifier head") and "'zero_shot'" in line, line
  c.model.text = None  # a video model: no such problem
  assert not [p for p in validation.problems(c, purpose='eval') if 'classifier head' in p]
  # a zero-shot run has nothing to train: `vvt train` of it is refused with the config's problems, before JAX
  with pytest.raises(ConfigError) as e:
    loader.load(str(REPO / 'configs/synthetic_video_text.py'), [('num_classes', '4')], files=(), init=True)
  assert list(e.value.problems) == [video_text_options.NO_TRAINING]


@pytest.mark.parametrize('name', sorted(registry.TASKS))
def test_every_registered_task_is_built_by_its_module_and_keeps_the_interface(name):
  module = importlib.import_module(registry.TASKS[name])
  assert callable(module.from_config)
  c = _config(name=name)
  c.dataset.multi_label = registry.hooks_named(name).multi_hot_labels(c)  # the labels the task reads
  task = specs.task_for(c)
  assert isinstance(task, Task) and task.name == name and hash(task) == hash(specs.task_for(c))
  assert isinstance(task.label_specs(2), dict) and task.main_metric and isinstance(task.metric_names, tuple)
  assert set(task.label_specs(2)) or not task.label_heads  # a task reads labels, or none at all (pretraining)


def test_classification_metrics_and_scores():
  task = Classification(head_sizes=(('verb', 3), ('noun', 2)), label_smoothing=0.0, average='softmax')
  logits = {'verb': jnp.array([[0., 2., 1.], [3., 0., 0.]]), 'noun': jnp.array([[1., 0.], [0., 1.]])}
  labels = {'verb': jnp.array([1, 1]), 'noun': jnp.array([0, 1])}
  m = task.train_metrics(logits, labels)
  assert set(m) == set(task.metric_names) == {'accuracy_verb', 'accuracy_noun', 'accuracy_action'}
  np.testing.assert_array_equal(m['accuracy_action'], [1., 0.])
  scores = task.scores(logits)
  np.testing.assert_allclose(scores['verb'], jax.nn.softmax(logits['verb']), rtol=1e-6)
  assert task.label_specs(5) == {'label/verb': ((5,), 'int32'), 'label/noun': ((5,), 'int32')}
  assert task.main_metric == 'video_top1_action'
  assert Classification(head_sizes=(('', 4),), label_smoothing=0.0).main_metric == 'video_top1'


@pytest.mark.parametrize('fields, message', [
    (dict(task='multilabel'), "task.name='multilabel' reads several labels per video: set dataset.multi_label=True"),
    (dict(multi_label=True), "dataset.multi_label=True gives multi-hot labels, which task.name='classification'"),
    (dict(task='multilabel', multi_label=True, name='tfds'), "only dataset.name='dmvr' records carry several"),
    (dict(task='multilabel', multi_label=True, label_aware_flip=True), 'dataset.label_aware_flip mirrors one label'),
])
def test_the_task_and_its_data_must_agree(fields, message):
  c = _config(name=fields.pop('task', 'classification'))
  for k, v in fields.items():
    c.dataset[k] = v
  with pytest.raises(ConfigError) as e:
    validation.validate(c)
  assert message in str(e.value) and '\n' not in str(e.value)
