"""The task seam: what the trainer, the program, the evaluation and the commands read of a task is declared in
`vvt.tasks.base` (`Task`'s hooks with their defaults, `ConfigHooks` for the config's validation), and no code
outside `vvt.tasks` asks a task's name or whether it has an attribute."""
import ast
import pathlib
import re

import ml_collections
import pytest

from tests.conftest import REPO
from vvt.tasks import base
from vvt.tasks import registry

VVT = REPO / 'vvt'
OUTSIDE = [p for p in sorted(VVT.rglob('*.py')) if not {'tasks', 'studies'} & set(p.relative_to(VVT).parts[:1])]
# how code would ask what a task is instead of calling its hooks
ASKING = re.compile(r"(hasattr|getattr)\(\s*(\w+\.)*task\b"
                    r"|[!=]=\s*'(classification|multilabel|probe)'|'(classification|multilabel|probe)'\s*[!=]="
                    r"|\bin\s*\(\s*'(classification|multilabel|probe)'")


def _task_attributes(path: pathlib.Path) -> set:
  """(line, attribute) of every `task.X`, `program.task.X` and `settings.task.X` the module reads."""
  found = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if not isinstance(node, ast.Attribute):
      continue
    v = node.value
    if (isinstance(v, ast.Name) and v.id == 'task') or (
        isinstance(v, ast.Attribute) and v.attr == 'task' and isinstance(v.value, ast.Name)
        and v.value.id in ('program', 'settings')):
      found.add((node.lineno, node.attr))
  return found


def test_every_hook_read_outside_the_tasks_is_declared_on_the_base_task():
  undeclared = [f'{p.relative_to(REPO)}:{line} task.{attr}' for p in OUTSIDE for line, attr in _task_attributes(p)
                if not hasattr(base.Task, attr)]
  assert not undeclared, undeclared
  read = {attr for p in OUTSIDE for _, attr in _task_attributes(p)}
  assert {'optimizer', 'backbone', 'own_params', 'label_heads', 'main_metric', 'result_lines'} <= read


def test_no_code_outside_the_tasks_asks_what_a_task_is():
  asking = [f'{p.relative_to(REPO)}:{i}: {line.strip()}' for p in OUTSIDE
            for i, line in enumerate(p.read_text().splitlines(), 1) if ASKING.search(line)]
  assert not asking, asking


class _Minimal(base.Task):
  """A task that implements only what `base.Task` leaves abstract: every other hook is the default."""
  heads = {'': 3}
  metric_names = ('accuracy',)
  main_metric = 'video_top1'

  def label_specs(self, batch_size):
    return {'label': ((batch_size,), 'int32')}

  def prepare(self, batch, inputs, rng):
    return inputs, batch, batch

  def loss(self, outputs, targets):
    return 0.0

  def train_metrics(self, outputs, labels):
    return {}

  def scores(self, outputs):
    return outputs

  def eval_labels(self, batch):
    return batch

  def aggregator(self, num_videos):
    return None


def test_the_defaults_of_the_declared_hooks():
  task = _Minimal()
  made = []
  assert task.optimizer(lambda opt, sched: made.append((opt, sched)) or 'tx', 'adam', 'cosine') == 'tx'
  assert made == [('adam', 'cosine')]  # every param trained alike, by the run's optimiser
  assert (task.backbone, task.own_params, task.names) == ('', (), ())
  assert task.label_heads == {'': 3}
  assert task.probability_average('softmax') == 'softmax' and task.result_lines({'step': 1}, 'p') == []
  hooks = base.ConfigHooks()
  assert (hooks.check(None), hooks.multi_hot_labels(None), hooks.summary_note(None), hooks.start_problems(None),
          hooks.backbone_field) == ([], False, '', [], '')


def _config(name: str, probe_base: str = 'classification'):
  return ml_collections.ConfigDict(dict(task=dict(name=name, probe=dict(
      base=probe_base, head='linear', lrs=(0.1,), weight_decays=(0.0,), backbone='', num_queries=1, depth=0,
      num_heads=4)), init_from=None))


@pytest.mark.parametrize('name,probe_base,multi_hot,field', [
    ('classification', 'multilabel', False, ''),
    ('multilabel', 'classification', True, ''),
    ('probe', 'classification', False, 'task.probe.backbone'),
    ('probe', 'multilabel', True, 'task.probe.backbone'),
])
def test_config_hooks_answer_for_each_task(name, probe_base, multi_hot, field):
  config = _config(name, probe_base)
  for form in (config, config.to_dict()):  # a ConfigDict, and a run's config.json read as a dict
    hooks = registry.hooks_of(form)
    assert hooks.multi_hot_labels(form) is multi_hot and hooks.backbone_field == field
  assert bool(registry.hooks_of(config).start_problems(config)) is (name == 'probe')  # no backbone, no init_from


def test_the_tasks_that_read_multi_hot_labels_follow_the_config():
  assert registry.multi_hot_tasks(_config('classification')) == ('multilabel',)
  assert registry.multi_hot_tasks(_config('classification', 'multilabel')) == ('multilabel', 'probe')


def test_a_probe_run_says_its_winner_through_result_lines():
  from vvt.tasks import classification
  from vvt.tasks import probe
  base = classification.Classification(head_sizes=(('', 3),), label_smoothing=0.0)
  task = probe.Probe(base=base, settings=((0.1, 0.0), (0.01, 0.0)))
  res = dict(best_probe='probe_1', tied_probes=['probe_0'], probes=[
      dict(probe='probe_0', lr=0.1, weight_decay=0.0, video_top1=0.5),
      dict(probe='probe_1', lr=0.01, weight_decay=0.0, video_top1=0.5)])
  assert task.result_lines(res, '/w/checkpoints/eval_4_test') == [
      '[probe] best probe_1: lr 0.01, weight decay 0, video_top1 = 0.5000 (tied with probe_0 on video_top1: the '
      'smaller lr, then the smaller weight decay, wins); every probe: /w/checkpoints/eval_4_test_probes.csv']
  assert task.probability_average('logits') == 'logits' and task.label_heads == {'': 3}


def test_the_docs_list_every_declared_hook():
  import dataclasses
  section = (REPO / 'docs/tasks.md').read_text().split('## Adding a task')[1].split('\n## ')[0]  # to the next section
  listed = {name for row in section.splitlines() if row.startswith('| `')
            for name in re.findall(r'`(\w+)', row.split('|')[1])}
  declared = {n for n in dir(base.Task) if not n.startswith('_') and n != 'name'}
  declared |= {f.name for f in dataclasses.fields(base.ConfigHooks)}
  assert listed == declared, (sorted(listed - declared), sorted(declared - listed))
