"""vvt.studies.sweep (trials from generators, their names) and vvt.studies.results (tables from run directories)."""
import csv
import json
import os

import pytest

from vvt.studies import results
from vvt.studies import sweep

# ----------------------------------------------------------------------------- building and naming trials


def test_generators_compose():
  grid = sweep.product(sweep.axis('model.attention', ['space', 'divided']), sweep.seeds(2))
  assert grid == [{'model.attention': 'space', 'seed': 0}, {'model.attention': 'space', 'seed': 1},
                  {'model.attention': 'divided', 'seed': 0}, {'model.attention': 'divided', 'seed': 1}]
  assert sweep.zipped(sweep.axis('num_frames', [4, 8]), sweep.axis('dataset.stride', [4, 2])) == [
      {'num_frames': 4, 'dataset.stride': 4}, {'num_frames': 8, 'dataset.stride': 2}]
  assert sweep.chain(sweep.fixed({'model.attention': 'joint'}), sweep.axis('seed', [3])) == [
      {'model.attention': 'joint'}, {'seed': 3}]
  with pytest.raises(sweep.SweepError, match='different lengths'):
    sweep.zipped(sweep.axis('a', [1, 2]), sweep.axis('b', [1]))
  with pytest.raises(sweep.SweepError, match="field 'a' set twice"):
    sweep.product(sweep.axis('a', [1]), sweep.axis('a', [2]))


def test_names_are_readable_stable_and_filesystem_safe():
  trials = sweep.trials(sweep.product(sweep.axis('model.attention', ['divided']),
                                      sweep.axis('model.tubelet', [(1, 8, 8)]),
                                      sweep.axis('dataset.train_files', ['a/b*.tfrecord']), sweep.seeds(1)))
  assert [t.name for t in trials] == ['attention=divided,tubelet=1x8x8,train_files=a-b-.tfrecord,seed=0']
  again = sweep.trials(sweep.product(sweep.axis('model.attention', ['divided']),
                                     sweep.axis('model.tubelet', [(1, 8, 8)]),
                                     sweep.axis('dataset.train_files', ['a/b*.tfrecord']), sweep.seeds(1)))
  assert again == trials
  # Ambiguous last parts keep more of the path; values become command-line text for the loader.
  t, = sweep.trials([{'model.tubelet': (4, 16, 16), 'init_from.tubelet': 'inflate', 'schedule.base_lr': 0.1}])
  assert t.name == 'model.tubelet=4x16x16,init_from.tubelet=inflate,base_lr=0.1'
  assert t.raw_overrides() == [('model.tubelet', '(4, 16, 16)'), ('init_from.tubelet', 'inflate'),
                               ('schedule.base_lr', '0.1')]
  long, = sweep.trials([{f'field_{i}': 'x' * 20 for i in range(8)}])
  assert len(long.name) <= sweep.MAX_NAME and '~' in long.name
  assert sweep.trials([{}])[0].name == 'base'


def test_variants_name_several_fields_by_one_label():
  trials = sweep.trials(sweep.product(
      sweep.variants('model', {'m3': {'model.attention': 'factorised_self_attention', 'model.classifier': 'gap'},
                               'm1': {'model.attention': 'spatiotemporal'}}), sweep.seeds(2)))
  assert [t.name for t in trials] == ['model=m3,seed=0', 'model=m3,seed=1', 'model=m1,seed=0', 'model=m1,seed=1']
  assert trials[0].overrides == {'model.attention': 'factorised_self_attention', 'model.classifier': 'gap',
                                 'seed': 0}
  assert trials[0].labels == {'model': 'm3', 'seed': 0}


@pytest.mark.parametrize('defined,message', [
    ([{'seed': 1}, {'seed': 1}], "trials 0 and 1 have the same name 'seed=1' (the same overrides)"),
    ([{'a': 'x/y'}, {'a': 'x-y'}], "same name 'a=x-y'"),
    ([], 'the sweep has no trials'),
    (None, 'get_sweep() returned None'),
    ([['seed', 1]], 'sweep item 0 is list'),
])
def test_bad_sweeps_are_one_line_errors(defined, message):
  with pytest.raises(sweep.SweepError) as e:
    sweep.trials(defined)
  assert message in str(e.value) and '\n' not in str(e.value)


def test_select_by_regex():
  trials = sweep.trials(sweep.axis('model.attention', ['space', 'divided', 'joint']))
  assert [t.name for t in sweep.select(trials, 'space|joint')] == ['attention=space', 'attention=joint']
  with pytest.raises(sweep.SweepError, match="--only 'axial' matches none of the 3 trials"):
    sweep.select(trials, 'axial')
  with pytest.raises(sweep.SweepError, match='not a regular expression'):
    sweep.select(trials, '(')


# ----------------------------------------------------------------------------- results of run directories


def fake_run(workdir, accuracy, steps=10, finished=True, config=None):
  """A run directory as the trainer leaves it: metrics.jsonl, eval JSON, training_curves.png, config.json."""
  os.makedirs(os.path.join(workdir, 'checkpoints'), exist_ok=True)
  with open(os.path.join(workdir, 'metrics.jsonl'), 'w') as f:
    for step in range(5, steps + 1, 5):
      f.write(json.dumps({'step': step, 'kind': 'train', 'loss': 1.0 / step, 'accuracy': accuracy,
                          'steps_per_sec': 20.0}) + '\n')
    f.write(json.dumps({'step': steps, 'kind': 'eval', 'video_top1': accuracy}) + '\n')
  shared = {'num_frames': 8, 'image_size': 32, 'num_classes': 4, 'model': {}}
  with open(os.path.join(workdir, 'config.json'), 'w') as f:
    json.dump({**shared, **(config or {'seed': 0, 'eval': {'split': 'test'}})}, f)
  if finished:
    with open(os.path.join(workdir, 'checkpoints', f'eval_{steps}_test.json'), 'w') as f:
      json.dump({'step': steps, 'split': 'test', 'video_top1': accuracy, 'clip_top1': accuracy - 0.1}, f)
    open(os.path.join(workdir, 'training_curves.png'), 'wb').close()


def write_sweep(sweep_dir, trials):
  os.makedirs(sweep_dir, exist_ok=True)
  results.write_json(os.path.join(sweep_dir, results.SWEEP_FILE), {
      'config': 'study.py', 'base_overrides': [],
      'trials': [{'name': t.name, 'overrides': t.overrides, 'labels': t.labels} for t in trials]})


def test_results_group_by_swept_fields_with_mean_and_std_over_seeds(tmp_path):
  trials = sweep.trials(sweep.product(sweep.axis('model.attention', ['space', 'divided']), sweep.seeds(2)))
  write_sweep(str(tmp_path), trials)
  scores = {'attention=space,seed=0': 0.5, 'attention=space,seed=1': 0.7, 'attention=divided,seed=0': 0.9}
  for name, acc in scores.items():
    fake_run(str(tmp_path / name), acc)
  fake_run(str(tmp_path / 'attention=divided,seed=1'), 0.2, finished=False)  # interrupted
  table = results.collect(str(tmp_path), with_summary=False)
  assert [r['status'] for r in table.rows] == ['finished', 'finished', 'finished', 'partial']
  assert table.fields == ['attention'] and table.headline == 'video_top1'
  paths = results.write(table)
  md = open(paths['md']).read()
  assert '| space | 2/2 | 0.600 ± 0.141 |' in md
  assert '| divided | 1/2 | 0.900 |' in md
  assert '3 of 4 trials finished. Missing: 1' in md
  assert '| attention=divided,seed=1 | partial | interrupted at step 10 |' in md
  rows = list(csv.DictReader(open(paths['csv'])))
  assert [r['trial'] for r in rows] == list(scores) + ['attention=divided,seed=1']
  assert rows[0]['attention'] == 'space' and rows[0]['seed'] == '0' and float(rows[0]['video_top1']) == 0.5
  assert float(rows[0]['best_video_top1']) == 0.5 and float(rows[0]['steps_per_sec']) == 20.0
  assert rows[3]['video_top1'] == '' and rows[3]['status'] == 'partial'
  assert os.path.getsize(paths['png']) > 10_000


def test_results_without_finished_trials_list_what_is_missing(tmp_path):
  trials = sweep.trials(sweep.axis('model.attention', ['space', 'divided']))
  write_sweep(str(tmp_path), trials)
  os.makedirs(tmp_path / 'attention=space')
  results.write_json(str(tmp_path / 'attention=space' / results.TRIAL_FILE),
                     {'status': 'failed', 'error': 'vvt train: error: boom'})
  table = results.collect(str(tmp_path), with_summary=False)
  assert table.finished == []
  md = results.markdown(table)
  assert '0 of 2 trials finished' in md
  assert '| attention=space | failed | vvt train: error: boom (before the first logged step) |' in md
  assert '| attention=divided | not started | — |' in md
  assert results.write(table)['png'] is None  # nothing to draw yet


def test_a_folder_of_runs_without_sweep_json_is_grouped_by_the_fields_that_differ(tmp_path):
  for name, lr, seed, acc in (('a', 0.1, 0, 0.4), ('b', 0.1, 1, 0.6), ('c', 0.2, 0, 0.8)):
    fake_run(str(tmp_path / name), acc, config={'seed': seed, 'schedule': {'base_lr': lr},
                                                'eval': {'split': 'test'}})
  table = results.collect(str(tmp_path), with_summary=False)
  assert table.fields == ['schedule.base_lr']
  assert [(k, len(done)) for k, _, done in table.groups()] == [((0.1,), 2), ((0.2,), 1)]


def test_a_missing_or_empty_directory_is_an_error(tmp_path):
  with pytest.raises(FileNotFoundError, match='no such sweep directory'):
    results.collect(str(tmp_path / 'nope'))
  with pytest.raises(FileNotFoundError, match='holds no trials'):
    results.collect(str(tmp_path))


def task_run(workdir, task, evals, final, files=None):
  """A finished run of `task` as the trainer leaves it: eval records `evals` [(step, {metric: value})], its final
  results `final` (the task's `main_metric` recorded) in checkpoints/eval_<last>_<files[0]>.json (and any other
  `files` at that step)."""
  os.makedirs(os.path.join(workdir, 'checkpoints'), exist_ok=True)
  last = evals[-1][0]
  with open(os.path.join(workdir, 'metrics.jsonl'), 'w') as f:
    for step, values in evals:
      f.write(json.dumps({'step': step, 'kind': 'train', 'loss': 1.0 / step, 'steps_per_sec': 5.0}) + '\n')
      f.write(json.dumps({'step': step, 'kind': 'eval', **values}) + '\n')
  with open(os.path.join(workdir, 'config.json'), 'w') as f:
    json.dump({'seed': 0, 'num_frames': 8, 'image_size': 32, 'model': {}, 'eval': {'split': 'test'},
               'task': {'name': task}}, f)
  for name, values in (files or {'test': final}).items():
    with open(os.path.join(workdir, 'checkpoints', f'eval_{last}_{name}.json'), 'w') as f:
      json.dump({'step': last, 'split': 'test', **values}, f)
  open(os.path.join(workdir, 'training_curves.png'), 'wb').close()


def test_results_of_pretraining_retrieval_and_localisation_runs_lead_with_their_main_metric(tmp_path):
  """`vvt results` reads each run's main metric from its results (the task's), not a fixed video_top1: a loss's best
  is its lowest; of a retrieval run the retrieval file, not a zero-shot evaluation of the same step; a localisation
  run (no metrics.jsonl, its own results file) is finished with its average mAP."""
  mae = {'task': 'mae', 'main_metric': 'reconstruction_loss'}
  for seed, losses in ((0, (0.9, 0.5, 0.7)), (1, (0.8, 0.6, 0.65))):
    task_run(str(tmp_path / 'mae' / f'seed={seed}'), 'mae',
             [(s, {'reconstruction_loss': v}) for s, v in zip((5, 10, 15), losses, strict=True)],
             {**mae, 'reconstruction_loss': losses[-1]})
  table = results.collect(str(tmp_path / 'mae'), with_summary=False)
  assert table.headline == 'reconstruction_loss' and [r['status'] for r in table.rows] == ['finished'] * 2
  assert [(r['reconstruction_loss'], r['best_reconstruction_loss'], r['best_step']) for r in table.rows] == [
      (0.7, 0.5, 10), (0.65, 0.6, 10)]
  md = results.markdown(table)
  assert '| 2/2 | 0.675 ± 0.035 | 0.550 ± 0.071 |' in md and 'video_top1' not in md and 'clip_top1' not in md
  retrieval = {'task': 'retrieval', 'main_metric': 't2v_r1', 't2v_r1': 0.4, 't2v_r5': 0.9, 'v2t_r1': 0.3,
               'eval_seconds': 2.0}
  task_run(str(tmp_path / 'video_text' / 'run'), 'retrieval', [(4, {'t2v_r1': 0.4})], retrieval, files={
      'test_retrieval': retrieval, 'test_retrieval_1x1': retrieval,
      'test_zero_shot': {'task': 'zero_shot', 'main_metric': 'video_top1', 'video_top1': 0.7}})
  row, = results.collect(str(tmp_path / 'video_text'), with_summary=False).rows
  assert row['status'] == 'finished' and (row['t2v_r1'], row['t2v_r5'], row['v2t_r1']) == (0.4, 0.9, 0.3)
  assert (row['main_metric'], row['best_t2v_r1']) == ('t2v_r1', 0.4) and 'eval_seconds' not in row
  loc = tmp_path / 'localisation' / 'run'
  loc.mkdir(parents=True)
  (loc / 'config.json').write_text(json.dumps({'seed': 0, 'num_frames': 8, 'image_size': 32, 'model': {}, 'task': {
      'name': 'localization', 'localization': {'eval_subset': 'validation', 'protocol': 'thumos14'}}}))
  assert results.trial_state(str(loc))['status'] != 'finished'
  (loc / 'localization_validation_thumos14.json').write_text(json.dumps(
      {'task': 'localization', 'main_metric': 'average_map', 'average_map': 0.75, 'map@0.5': 0.8}))
  table = results.collect(str(tmp_path / 'localisation'), with_summary=False)
  assert table.headline == 'average_map' and table.rows[0]['status'] == 'finished'
  assert table.rows[0]['average_map'] == 0.75 and '| 1/1 | 0.750 | — |' in results.markdown(table)
