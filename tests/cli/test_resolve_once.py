"""A command resolves its run config once: `vvt train` and `vvt eval` call `vvt.models.resolve` one time each (the
config's validation, which builds the run's specs, `vvt.config.run_spec`); everything after reads the specs."""
import sys

from tests.conftest import REPO
from vvt.cli import train as train_cli
import vvt.models
from vvt.models import config as model_config

sys.path.insert(0, str(REPO / 'tests' / 'train'))
import train_helpers  # noqa: E402


def test_vvt_train_and_vvt_eval_resolve_the_model_once(tiny_data, tmp_path, monkeypatch):
  calls = []
  resolve = model_config.resolve

  def counted(cfg):
    calls.append(cfg)
    return resolve(cfg)

  monkeypatch.setattr(model_config, 'resolve', counted)  # vvt.config.validation's
  monkeypatch.setattr(vvt.models, 'resolve', counted)    # vvt.models.build's (a ModelSpec needs none)
  wd = str(tmp_path / 'run')
  config = ['--config', f'{train_helpers.TINY}:{tiny_data}', '--config.num_train_steps=4',
            '--config.eval.batch_size=8']
  assert train_cli.train_main([*config, '--workdir', wd]) == 0
  assert len(calls) == 1
  assert train_cli.eval_main(['--workdir', wd, '--config.eval.batch_size=8']) == 0
  assert len(calls) == 2
