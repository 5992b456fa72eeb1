"""The `vvt` commands as a user runs them: one override syntax, one-line errors, quiet logs, early checks."""
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO

VIVIT_B = 'configs/kinetics400/vivit_b_fe.py'


def env():
  e = dict(os.environ)
  e['JAX_PLATFORMS'] = 'cpu'
  e.pop('TF_CPP_MIN_LOG_LEVEL', None)  # the CLI itself keeps TF quiet
  e['PYTHONPATH'] = str(REPO) + os.pathsep + e.get('PYTHONPATH', '')
  e['XLA_FLAGS'] = ' '.join(f for f in e.get('XLA_FLAGS', '').split() if 'device_count' not in f)
  return e


def vvt(*args, cwd=REPO, timeout=600):
  return subprocess.run([sys.executable, '-m', 'vvt', *args], cwd=cwd, env=env(), capture_output=True,
                        text=True, timeout=timeout)


# Commands run in one process through the CLI's `main(argv)`, each checked on its own: after each, whether JAX and
# TensorFlow were imported (a refusal imports neither, so one process tests them all from a clean start).
IN_ONE_PROCESS = """
import contextlib, io, json, sys
from vvt.cli import main
results = []
for args in json.loads(sys.argv[1]):
  out, err = io.StringIO(), io.StringIO()
  with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    try:
      rc = main(args)
    except SystemExit as e:
      rc = e.code
  results.append(dict(rc=rc, stdout=out.getvalue(), stderr=err.getvalue(),
                      heavy=['jax' in sys.modules, 'tensorflow' in sys.modules]))
print(json.dumps(results))
"""

BAD_INPUT = [
    (['train', '--config', 'configs/missing.py', '--workdir', 'w'], 'config file not found: configs/missing.py', 1),
    # every problem at once: the init checkpoint and both data sets are missing
    (['train', '--config', VIVIT_B, '--workdir', 'w'], "init_from.path: no such file 'imagenet21k/ViT-B_16.npz'", 3),
    (['train', '--config', VIVIT_B, '--workdir', 'w', '--config.init_from=None'],
     "dataset.train_files: no file matches 'kinetics400/train@1024'", 2),
    (['train', '--config', VIVIT_B, '--workdir', 'w', '--config.model.stochastic_dept=0.1', '--config.init_from=None'],
     'did you mean --config.model.stochastic_depth', 3),
    (['train', '--config', VIVIT_B, '--workdir', 'w', '--config.log_every_steps=0', '--config.init_from=None'],
     'log_every_steps must be positive, got 0', 3),
    (['eval', '--config', VIVIT_B, '--workdir', 'w', '--config.eval.average=mean'], 'eval.average must be one of', 2),
    (['summary', '--config', VIVIT_B, '--config.model.num_heads=5'], 'not divisible by model.num_heads=5', 1),
    (['train', '--workdir', 'w'], 'missing --config', 1),
    (['train', '--config', VIVIT_B], 'the following arguments are required: --workdir', 1),
]


def three_mistakes(tiny_data, workdir):
  """A misspelt field, a rate out of range and a bad model choice in one `vvt train`."""
  return ['train', '--config', f'{REPO}/tests/train/tiny_config.py:{tiny_data}', '--workdir', workdir,
          '--config.optimizer.momentun=0.9', '--config.loss.label_smoothing=1.5', '--config.model.pooling=attentive']


@pytest.fixture(scope='module')
def in_one_process(tiny_data, tmp_path_factory):
  """{'bad input' index | 'three mistakes' | 'verbose' | 'help': CompletedProcess-like dict} of the commands run
  in one process (`IN_ONE_PROCESS`); the refusals come first, from a process that imported neither JAX nor
  TensorFlow."""
  import json
  named = [*range(len(BAD_INPUT)), 'three mistakes', 'verbose', 'help']
  argv = [args for args, _, _ in BAD_INPUT] + [
      three_mistakes(tiny_data, str(tmp_path_factory.mktemp('three_mistakes'))),
      ['train', '--config', 'configs/missing.py', '--workdir', 'w', '--verbose'], ['--help']]
  res = subprocess.run([sys.executable, '-c', IN_ONE_PROCESS, json.dumps(argv)], cwd=REPO, env=env(),
                       capture_output=True, text=True, timeout=600)
  assert res.returncode == 0, res.stderr[-3000:]
  return dict(zip(named, json.loads(res.stdout.splitlines()[-1]), strict=True))


@pytest.mark.parametrize('case', range(len(BAD_INPUT)))
def test_bad_input_is_one_line_per_problem_before_any_heavy_import(in_one_process, case):
  args, message, count = BAD_INPUT[case]
  res = in_one_process[case]
  assert res['rc'] == 2, res['stderr']
  lines = [l for l in res['stderr'].splitlines() if l.strip()]
  assert len(lines) == count and all(l.startswith(f'vvt {args[0]}: error: ') for l in lines), lines
  assert any(message in l for l in lines), lines
  assert res['heavy'] == [False, False]  # reported before JAX or TensorFlow were even imported


def test_every_problem_of_a_config_in_one_run(in_one_process):
  """Three independent mistakes (a misspelt field, a rate out of range, a bad model choice): three lines, exit 2,
  each message whole (its closing quote too)."""
  res = in_one_process['three mistakes']
  assert res['rc'] == 2, res['stderr']
  assert res['stderr'].splitlines() == [
      "vvt train: error: --config.optimizer.momentun: unknown config field 'optimizer.momentun' "
      '(did you mean --config.optimizer.momentum?)',
      'vvt train: error: loss.label_smoothing must be in [0, 1), got 1.5',
      "vvt train: error: model.pooling must be one of ('mean', 'mean_then_norm', 'first_token'), got 'attentive'"]
  assert res['heavy'] == [False, False]


def test_verbose_shows_the_traceback(in_one_process):
  res = in_one_process['verbose']
  assert res['rc'] == 2 and 'Traceback (most recent call last)' in res['stderr']


def test_summary_takes_the_same_override_syntax():
  res = vvt('summary', '--config', VIVIT_B, '--config.model.variant=Ti/16', '--config.model.num_frames=8',
            '--config.image_size=64', '--config.init_from=None')
  assert res.returncode == 0, res.stderr
  assert 'tokens 128 = 4x4x8' in res.stdout.replace('8x4x4', '4x4x8') and 'params 7.3M' in res.stdout
  assert res.stderr.strip() == ''  # quiet: no library start-up noise


def test_no_tpu_probe_noise_when_libtpu_is_installed_without_a_tpu():
  """The test extra installs libtpu (for `vvt memory`); without JAX_PLATFORMS JAX would probe for a TPU and
  print libtpu's warnings: the CLI skips the probe when no TPU device file exists."""
  pytest.importorskip('libtpu')
  e = env()
  e.pop('JAX_PLATFORMS')
  res = subprocess.run([sys.executable, '-m', 'vvt', 'summary', '--config', VIVIT_B, '--config.model.variant=Ti/16',
                        '--config.model.num_frames=8', '--config.image_size=64', '--config.init_from=None'],
                       cwd=REPO, env=e, capture_output=True, text=True, timeout=600)
  assert res.returncode == 0 and 'params 7.3M' in res.stdout, res.stderr
  assert res.stderr.strip() == '', res.stderr


def test_importing_vvt_keeps_jax_off_an_absent_tpu():
  """Python use of vvt (not only the CLI) on a host with the test extra's libtpu and no TPU: JAX starts on the CPU
  without libtpu's probe and its `E0000 ... INVALID_ARGUMENT` line."""
  pytest.importorskip('libtpu')
  import glob
  if glob.glob('/dev/accel[0-9]*') or glob.glob('/dev/vfio/[0-9]*'):
    pytest.skip('a TPU is present')
  e = env()
  e.pop('JAX_PLATFORMS')
  code = 'import vvt, jax; print(jax.numpy.ones(2).sum(), jax.devices()[0].platform)'
  res = subprocess.run([sys.executable, '-c', code], cwd=REPO, env=e, capture_output=True, text=True, timeout=300)
  assert res.returncode == 0 and res.stdout.split() == ['2.0', 'cpu'], res.stderr
  assert res.stderr.strip() == '', res.stderr


def test_help_lists_every_command(in_one_process):
  res = in_one_process['help']
  for command in ('train', 'eval', 'features', 'summary', 'data', 'convert', 'export', 'demo'):
    assert f'  {command} ' in res['stdout']


def test_a_paper_config_shrinks_on_the_command_line_and_trains(tiny_data, tmp_path, capsys, monkeypatch):
  """The example of docs/configs.md: a paper config made a CPU run by overrides, trained (a process of its own: its
  stderr is read) and evaluated again from its config.json (through `main(argv)` in the test process)."""
  res = vvt('train', '--config', VIVIT_B, '--config.runlocal=True', '--workdir', str(tmp_path / 'run'),
            f'--config.dataset.train_files={tiny_data}/train-*-of-*.tfrecord',
            f'--config.dataset.eval_files={tiny_data}/test-*-of-*.tfrecord',
            '--config.num_train_steps=3', '--config.schedule.warmup_steps=1', '--config.eval.batch_size=8')
  assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
  assert '[done] step 3' in res.stdout
  noise = [l for l in res.stderr.splitlines() if 'oneDNN' in l or 'absl' in l or 'cuda' in l.lower()]
  assert noise == []
  saved = (tmp_path / 'run' / 'config.json').read_text()
  assert '"attention": "factorised_encoder"' in saved and '"hidden_size": 64' in saved
  # The run's own config.json is enough to evaluate it again, with the same override syntax.
  from vvt.cli import main as vvt_main
  capsys.readouterr()
  monkeypatch.chdir(REPO)  # where `vvt` ran
  assert vvt_main(['eval', '--workdir', str(tmp_path / 'run'), '--config.eval.batch_size=4']) == 0
  assert '[done] step 3' in capsys.readouterr().out


def test_convert_xvit_at_16_frames_with_its_8_row_time_table(tmp_path, monkeypatch):
  """`vvt convert --source xvit --num-frames 16` on an official-layout torch file (the Kinetics fixture made by
  the official code): the recorded config says 16 frames, 8 rows used periodically, 8 segments; the converted
  weights reproduce the official logits when evaluated from the written config.json."""
  import json

  import numpy as np
  import torch
  fixtures = REPO / 'tests' / 'convert' / 'fixtures'
  raw = np.load(fixtures / 'xvit_segments_k400.npz')
  meta = json.loads((fixtures / 'xvit_segments_k400.json').read_text())['config']
  state = {k[len('params/'):]: torch.from_numpy(raw[k]) for k in raw.files if k.startswith('params/')}
  torch.save({'state_dict': state}, tmp_path / 'xvit.pth')
  from vvt.cli import main as vvt_main
  monkeypatch.chdir(REPO)  # in this process (a separate one proves nothing more), from the repository as `vvt` runs
  assert vvt_main(['convert', '--source', 'xvit', '--checkpoint', str(tmp_path / 'xvit.pth'), '--num-frames', '16',
                   '--config', 'configs/kinetics400/xvit_b.py', '--output', str(tmp_path / 'out'),
                   f'--config.model.num_heads={meta["num_heads"]}', f'--config.image_size={meta["image_size"]}',
                   f'--config.model.temporal_head.num_heads={meta["ta_head"]["num_heads"]}']) == 0
  saved = json.loads((tmp_path / 'out' / 'config.json').read_text())
  assert (saved['num_frames'], saved['model']['num_frames'], saved['dataset']['num_frames']) == (16, 16, 16)
  assert saved['model']['time_embedding_rows'] == 8 and saved['model']['mixing']['num_segments'] == 8
  assert 'row t mod 8' in (tmp_path / 'out' / 'convert_report.txt').read_text()
  from vvt.config import loader
  from vvt.models import build
  from vvt.train import checkpoints
  config = loader.load(str(tmp_path / 'out'), files=(), init=False)
  params, _ = checkpoints.load_params(str(tmp_path / 'out'))
  out = build(config.model).apply({'params': params}, raw['input'], train=False)
  assert np.abs(np.asarray(out) - raw['logits']).max() < 1e-5  # parity on logits |.| < ~2: > 10x margin
