"""Shared by the converter command tests: the run that `vvt convert` writes, trained from its params-only
checkpoint."""
from vvt.cli import main as vvt_main
from vvt.convert import weight_files
from vvt.train import checkpoints


def train_two_steps(out, capsys) -> tuple:
  """Trains the run in `out` (its config.json, its params-only checkpoint as the start) for two steps; checks that
  the log says so and that the params keep their names: (params before, params after), flat {name: array}."""
  converted, _ = checkpoints.load_params(str(out))
  assert vvt_main(['train', '--config', str(out / 'config.json'), '--workdir', str(out),
                   '--config.num_train_steps=2', '--config.schedule.warmup_steps=1',
                   '--config.checkpoint.every_steps=2', '--config.eval.batch_size=8']) == 0
  log = capsys.readouterr().out
  assert 'initialised params from params-only checkpoint step 0' in log and '[done] step 2' in log
  trained, step = checkpoints.load_params(str(out))
  before, after = weight_files.flatten(converted), weight_files.flatten(trained)
  assert step == 2 and set(before) == set(after)
  return before, after
