"""`vvt convert` end to end (file -> vvt checkpoint that `vvt eval`'s loader reads, with a config that rebuilds
the exact model) and `vvt export` (vvt checkpoint <-> safetensors with '/'-joined names)."""
import json
import subprocess
import sys

import jax
import numpy as np
import pytest
from safetensors import safe_open

from tests.conftest import FIXTURES
from tests.conftest import REPO
import vvt.cli
from vvt.cli import convert as convert_cli
from vvt.config import loader as config_loader
from vvt.convert import export
from vvt.convert import weight_files
import vvt.models
from vvt.train import checkpoints


def _load_config(path):
  return config_loader.load(str(path), files=(), init=False)


@pytest.fixture(scope='module')
def converted(tmp_path_factory):
  """The HF TimeSformer fixture converted with the Kinetics-400 TimeSformer config (a 224px, 400-class B/16)."""
  d = tmp_path_factory.mktemp('convert')
  meta = json.loads((FIXTURES / 'hf_timesformer_divided.json').read_text())
  (d / 'config.json').write_text(json.dumps(meta['config']['hf_config']))
  out = d / 'out'
  rc = vvt.cli.main(['convert', '--source', 'hf_timesformer', '--checkpoint',
                     str(FIXTURES / 'hf_timesformer_divided.npz'), '--hf-config', str(d / 'config.json'),
                     '--config', str(REPO / 'configs/kinetics400/timesformer_b.py'), '--output', str(out)])
  assert rc == 0
  return out


def test_convert_writes_a_checkpoint_that_eval_loads(converted):
  params, step = checkpoints.load_params(str(converted))
  assert step == 0 and checkpoints.read_meta(str(converted), 0)['kind'] == 'params'
  config = _load_config(converted)  # what `vvt eval --workdir DIR` reads (DIR/config.json)
  m = vvt.models.resolve(config.model)
  assert (m.image_size, m.num_frames, m.num_classes, m.hidden_size, m.layer_norm_eps) == (32, 8, 10, 64, 1e-6)
  assert config.dataset.image_size == 32 and config.dataset.num_frames == 8 == config.num_frames  # shared
  z = np.load(FIXTURES / 'hf_timesformer_divided.npz')
  out = np.asarray(jax.jit(vvt.models.build(config.model).apply)({'params': params}, z['input']))
  assert np.abs(out - z['logits']).max() < 1e-5  # parity on logits |.| < ~2 (float32 reference): > 10x margin
  report = (converted / 'convert_report.txt').read_text()
  assert 'model.image_size: 224 -> 32' in report and 'in the file but unused: 0' in report


def test_export_roundtrip(converted, tmp_path):
  path = tmp_path / 'weights.safetensors'
  assert vvt.cli.main(['export', '--workdir', str(converted), '--output', str(path)]) == 0
  params, _ = checkpoints.load_params(str(converted))
  flat = weight_files.flatten(params)
  with safe_open(str(path), framework='numpy') as f:
    names = set(f.keys())
    assert f.metadata()['format'] == 'vvt'
    assert 'encoder/layers/block_0/time_projection/kernel' in names
    np.testing.assert_array_equal(f.get_tensor('encoder/posembed/time_embedding'),
                                  np.asarray(flat['encoder/posembed/time_embedding']))
  assert names == set(flat)
  back = tmp_path / 'back'
  assert vvt.cli.main(['export', '--import', str(path), '--output', str(back),
                       '--config', str(converted)]) == 0
  params2, _ = checkpoints.load_params(str(back))
  for k, v in weight_files.flatten(params2).items():
    np.testing.assert_array_equal(np.asarray(v), np.asarray(flat[k]))
  loaded, metadata = export.from_safetensors(str(path))
  assert json.loads(metadata['config'])['model']['image_size'] == 32


def test_import_checks_shapes(converted, tmp_path):
  params, _ = checkpoints.load_params(str(converted))
  flat = {k: np.asarray(v) for k, v in weight_files.flatten(params).items()}
  flat['head/output_projection/kernel'] = np.zeros((64, 3), np.float32)
  del flat['encoder/cls']
  path = tmp_path / 'bad.safetensors'
  export.to_safetensors(weight_files.unflatten(flat), str(path))
  with pytest.raises(ValueError) as info:
    convert_cli.import_safetensors(str(path), str(tmp_path / 'x'), _load_config(converted))
  assert 'encoder/cls: missing' in str(info.value)
  assert 'head/output_projection/kernel: model expects (64, 10), converted (64, 3)' in str(info.value)


def test_convert_errors_are_clear(tmp_path, capsys):
  cfg = str(REPO / 'configs/kinetics400/timesformer_b.py')
  rc = vvt.cli.main(['convert', '--source', 'timesformer', '--checkpoint', str(tmp_path / 'missing.pyth'),
                     '--config', cfg, '--output', str(tmp_path / 'o')])
  assert rc == 1 and 'missing.pyth does not exist' in capsys.readouterr().err
  rc = vvt.cli.main(['convert', '--source', 'scenic_vivit', '--checkpoint',
                     str(FIXTURES / 'hf_timesformer_divided.npz'), '--config', cfg, '--output', str(tmp_path / 'o')])
  err = capsys.readouterr().err
  assert rc == 1 and "parameter 'embedding/kernel' is missing" in err


def test_vvt_command_dispatches_convert(tmp_path):
  """The real console entry (`python -m vvt.cli`), as a user runs it."""
  res = subprocess.run([sys.executable, '-m', 'vvt.cli', 'convert', '--help'], capture_output=True, text=True,
                       cwd=REPO, timeout=120)
  assert res.returncode == 0 and '--source' in res.stdout and 'hf_timesformer' in res.stdout


def test_export_a_training_state_checkpoint(tmp_path):
  """`vvt export` also reads full training states (params + optimiser state): only the params are written."""
  import types
  params = {'embedding': {'conv': {'kernel': np.ones((1, 2, 2, 3, 4), np.float32)}},
            'head': {'output_projection': {'bias': np.arange(5, dtype=np.float32)}}}
  state = types.SimpleNamespace(step=jax.numpy.asarray(7), params=params, rng=np.zeros(2, np.uint32),
                                opt_state={'mu': jax.tree_util.tree_map(np.zeros_like, params)})
  mngr = checkpoints.manager(str(tmp_path / 'run'))
  checkpoints.save_state(mngr, state, data_position=3)
  path = tmp_path / 'p.safetensors'
  assert vvt.cli.main(['export', '--workdir', str(tmp_path / 'run'), '--output', str(path)]) == 0
  loaded, _ = export.from_safetensors(str(path))
  assert set(weight_files.flatten(loaded)) == {'embedding/conv/kernel', 'head/output_projection/bias'}
  np.testing.assert_array_equal(loaded['head']['output_projection']['bias'], np.arange(5))


def test_export_of_scanned_layers_is_per_layer(tmp_path):
  """A `model.scan_layers` run's stacked encoder ({'blocks': {'block': (L, ...)}}) is exported per layer, the
  files' one layout (what `vvt import` and every converter read)."""
  stacked = {'encoder': {'layers': {'blocks': {'block': {'mlp': {'kernel': np.stack([np.full((2, 3), i, np.float32)
                                                                                    for i in range(3)])}}}}}}
  checkpoints.save_params(str(tmp_path / 'run'), stacked, step=1)
  path = tmp_path / 'p.safetensors'
  assert vvt.cli.main(['export', '--workdir', str(tmp_path / 'run'), '--output', str(path)]) == 0
  loaded, _ = export.from_safetensors(str(path))
  assert set(weight_files.flatten(loaded)) == {f'encoder/layers/block_{i}/mlp/kernel' for i in range(3)}
  np.testing.assert_array_equal(loaded['encoder']['layers']['block_2']['mlp']['kernel'], np.full((2, 3), 2))
