"""The papers' parameter and FLOP tables, reproduced from abstract shapes and XLA's cost analysis of the
lowered forward pass (no 100M-parameter allocation). Params within 0.5%, GFLOPs within 5%. The FLOP count does
not depend on the default backend having a cost analysis (CUDA has none for a lowering)."""
import pathlib

import jax
import jax.numpy as jnp
import pytest

import vvt.models as models
from vvt.models.summary import count_flops
from vvt.models.summary import format_summary
from vvt.models.summary import matmul_flops
from vvt.models.summary import summarise

K400, SSV2 = 400, 174
CONFIGS = pathlib.Path(__file__).resolve().parents[2] / 'configs'
VIVIT = dict(variant='B/16x2', num_frames=32, image_size=224, num_classes=K400)

# (name, config, paper params (M), paper GFLOPs per view or None)
TABLES = [
    # ViViT Table 2: ViViT-B/16x2, 32 x 224^2, Kinetics-400.
    ('vivit_model1', models.get_config('vivit', attention='spatiotemporal', **VIVIT), 88.9, 455),
    ('vivit_model2', models.get_config('vivit', attention='factorised_encoder', temporal_layers=4, **VIVIT),
     115.1, 284),
    ('vivit_model3', models.get_config('vivit', attention='factorised_self_attention', classifier='gap', **VIVIT),
     117.3, 372),
    ('vivit_model4', models.get_config('vivit', attention='factorised_dot_product', classifier='gap', **VIVIT),
     88.9, 277),
    # TimeSformer Table 1: TimeSformer-B/16, 8 x 224^2, SSv2 (174 classes).
    ('timesformer_space', models.get_config('timesformer', attention='space', num_classes=SSV2), 85.9, None),
    ('timesformer_joint', models.get_config('timesformer', attention='joint', num_classes=SSV2), 85.9, None),
    ('timesformer_divided', models.get_config('timesformer', attention='divided', num_classes=SSV2), 121.4, None),
    ('timesformer_local_global', models.get_config('timesformer', attention='local_global', num_classes=SSV2),
     121.4, None),
    ('timesformer_axial', models.get_config('timesformer', attention='axial', num_classes=SSV2), 156.8, None),
    # TimeSformer sec. 4: 0.59 TFLOPs for 3 views of 8 x 224^2 on Kinetics-400 -> 196 GFLOPs per view.
    ('timesformer_divided_k400', models.get_config('timesformer', attention='divided', num_classes=K400),
     None, 196),
    # X-ViT Table 5: X-ViT-B/16, 8 x 224^2, 425 GFLOPs for 1 x 3 views -> ~142 per view.
    ('xvit', models.get_config('xvit', num_classes=K400), None, 142),
    # X-ViT Table 5: 16 x 224^2, 850 GFLOPs for 1 x 3 views -> ~283 per view; as the official Kinetics config
    # runs it: two 8-frame segments (NUM_SEGMENTS 8) and the backbone's 8-row temporal embedding.
    ('xvit_16', models.get_config('xvit', num_classes=K400, num_frames=16, mixing=dict(num_segments=8),
                                  time_embedding_rows=8), None, 283),
]


@pytest.mark.parametrize('name,cfg,params_m,gflops', TABLES, ids=[t[0] for t in TABLES])
def test_paper_tables(name, cfg, params_m, gflops):
  s = summarise(cfg)
  if params_m is not None:
    assert abs(s['params_m'] - params_m) / params_m < 0.005, (name, s['params_m'], params_m)
  if gflops is not None:
    assert abs(s['gflops'] - gflops) / gflops < 0.05, (name, s['gflops'], gflops)


# The models of the Kinetics-600 / Diving-48 / JFT configs: (config, paper params (M) or None, paper GFLOPs per
# view), within 1.5%. The papers give these for Kinetics-400; the configs differ from those models in the
# classifier only (600 x 768 multiply-adds: nothing at this precision).
CONFIG_ROWS = [
    # TimeSformer Table 5: TimeSformer-HR 5.11 TFLOPs and TimeSformer-L 7.14 TFLOPs for 3 views; "121M"
    # parameters (X-ViT Table 5; TimeSformer sec. 4.7 "our 'Base' model already has 121M parameters").
    ('kinetics600/timesformer_b.py:hr', None, 5110 / 3),
    ('kinetics600/timesformer_b.py:l', 121, 7140 / 3),
    # X-ViT Table 6 (Kinetics-600): X-ViT (16x) 850 GFLOPs for 1 x 3 views. (The config's TA head has the
    # official hidden layer: 93.9M parameters, 2% over the paper's rounded 92M; see test_xvit_params_...)
    ('kinetics600/xvit_b.py:16', None, 850 / 3),
    # ViViT Fig. 7: "The 128-frame model requires 3980.4 GFLOPs" (Table 5a: 3.98 TFLOPs a view, the "(JFT)" row
    # too).
    ('kinetics400/vivit_l_fe.py:128,init=jft', None, 3980.4),
]


@pytest.mark.parametrize('spec,params_m,gflops', CONFIG_ROWS, ids=[r[0] for r in CONFIG_ROWS])
def test_paper_tables_of_the_configs(spec, params_m, gflops):
  from vvt.config import loader
  name, _, arg = spec.partition(':')
  s = summarise(loader.load(f'{CONFIGS}/{name}:{arg}', files=(), init=False).model)
  if params_m is not None:
    assert abs(s['params_m'] - params_m) / params_m < 0.015, (spec, s['params_m'], params_m)
  assert abs(s['gflops'] - gflops) / gflops < 0.015, (spec, s['gflops'], gflops)


def test_xvit_params_and_cost_equal_to_spatial_only_attention():
  """X-ViT: space-time mixing costs what spatial-only attention costs (within 1%); ~92M parameters.

  Our count is 93.2M: 86.1M for the ViT-B/16 backbone with separable space/time embeddings plus 7.1M for
  the one TA layer (a ViT-B layer without qkv bias). The paper rounds to 92M; no one-layer TA head of width 768
  gives exactly that, so the test allows 1.5% here (see docs/models.md)."""
  mixing = summarise(models.get_config('xvit', num_classes=K400))
  space = summarise(models.get_config('xvit', attention='space', num_classes=K400))
  assert abs(mixing['gflops'] - space['gflops']) / space['gflops'] < 0.01
  assert abs(mixing['params_m'] - 92) / 92 < 0.015
  assert mixing['params'] == space['params']  # mixing is parameter-free
  sixteen = summarise(models.get_config('xvit', num_classes=K400, num_frames=16, mixing=dict(num_segments=8),
                                        time_embedding_rows=8))
  assert sixteen['params'] == mixing['params']  # "92M" for 8 and 16 frames alike: the same 8-row time table


def test_executed_flops_drop_dead_patch_tokens_only_for_class_token_models():
  token = summarise(models.get_config('timesformer', attention='joint', num_classes=K400))
  gap = summarise(models.get_config('vivit', attention='factorised_dot_product', classifier='gap', **VIVIT))
  assert token['gflops_executed'] < token['gflops']
  assert gap['gflops_executed'] == pytest.approx(gap['gflops'])


def test_summary_command(tmp_path, capsys):
  """`vvt summary` of a config file with an argument and an override (through the CLI's `main`: the output and
  exit code are the command's; the console entry itself is `tests/convert/test_cli_export.py`'s)."""
  from vvt.cli import main
  cfg_file = tmp_path / 'cfg.py'
  cfg_file.write_text(
      'import ml_collections\n'
      'import vvt.models\n'
      'def get_config(arg=None):\n'
      '  c = ml_collections.ConfigDict()\n'
      "  c.model = vvt.models.get_config('timesformer', attention=arg or 'divided', variant='Ti/16', num_frames=4)\n"
      '  return c\n')
  assert main(['summary', '--config', f'{cfg_file}:space', '--config.model.num_classes=10']) == 0
  out = capsys.readouterr().out
  assert 'params 5.5M' in out and 'GFLOPs/view' in out and 'tokens 784 = 4x14x14' in out, out
  assert main(['summary', '--config', str(cfg_file), '--config.model.num_frame=3']) == 2
  assert 'model.num_frame' in capsys.readouterr().err


# A small model for the FLOP-source tests (compiled in the fallback test: keep it cheap).
SMALL = models.get_config('timesformer', attention='divided', variant='Ti/16', num_layers=2, num_frames=4,
                          image_size=32, num_classes=10)


def test_flops_do_not_need_the_default_backends_cost_analysis(monkeypatch):
  """On CUDA and TPU `jit(f).lower(...).cost_analysis()` is None: simulated here by answering None for every
  lowering not made explicitly for the CPU. The counts are exactly the CPU's."""
  expected = summarise(SMALL)
  real_lower, real_cost = jax.stages.Traced.lower, jax.stages.Lowered.cost_analysis

  def lower(self, *, lowering_platforms=None, **kw):
    lowered = real_lower(self, lowering_platforms=lowering_platforms, **kw)
    lowered.simulated_platforms = lowering_platforms
    return lowered

  monkeypatch.setattr(jax.stages.Traced, 'lower', lower)
  monkeypatch.setattr(jax.stages.Lowered, 'cost_analysis',
                      lambda self: real_cost(self) if getattr(self, 'simulated_platforms', None) == ('cpu',)
                      else None)
  assert jax.jit(lambda x: x @ x).lower(jnp.ones((4, 4))).cost_analysis() is None  # the simulation holds
  s = summarise(SMALL)
  assert s == expected and s['flops_source'] == 'xla_cpu'


def test_flops_fall_back_to_the_compiled_executable_then_the_jaxpr(monkeypatch):
  """No lowering has a cost analysis: the compiled executable's (optimised HLO, within 0.5%); nor that: the
  matrix multiplies of the jaxpr (no elementwise ops: a few % under XLA's count), each saying so."""
  expected = summarise(SMALL)
  monkeypatch.setattr(jax.stages.Lowered, 'cost_analysis', lambda self: None)
  compiled = summarise(SMALL)
  assert compiled['flops_source'] == 'xla_compiled'
  assert compiled['params'] == expected['params']
  for key in ('gflops', 'gflops_executed'):
    assert compiled[key] == pytest.approx(expected[key], rel=0.005)

  def no_compile(self, *args, **kwargs):
    raise NotImplementedError('simulated: no compiled cost analysis either')

  monkeypatch.setattr(jax.stages.Lowered, 'compile', no_compile)
  matmuls = summarise(SMALL)
  assert matmuls['flops_source'] == 'jaxpr_matmuls'
  assert 'FLOPs from jaxpr_matmuls' in format_summary('small', matmuls)
  assert matmuls['gflops'] == pytest.approx(expected['gflops'], rel=0.1)
  assert matmuls['gflops'] < expected['gflops']  # matmuls only


def test_matmul_flops_of_a_jaxpr():
  """2 x multiply-adds of dot_general and convolutions, inside jit and scan bodies (times the length)."""
  def f(a, b, kernel, video):
    y = jax.jit(lambda a, b: a @ b)(a, b)  # (8, 16) @ (16, 4): 2 * 8 * 4 * 16
    z, _ = jax.lax.scan(lambda c, _: (c @ b @ b.T, None), a, None, length=3)  # 3 x (2*8*16*4 + 2*8*4*16)
    conv = jax.lax.conv_general_dilated(video, kernel, (2, 2), 'VALID',  # 2*(1*4*4*5) outputs * (3*2*2) MACs
                                        dimension_numbers=('NHWC', 'HWIO', 'NHWC'))
    return y.sum() + z.sum() + conv.sum()
  args = (jnp.ones((8, 16)), jnp.ones((16, 4)), jnp.ones((2, 2, 3, 5)), jnp.ones((1, 8, 8, 3)))
  expected = 2 * 8 * 4 * 16 + 3 * (2 * 8 * 16 * 4 * 2) + 2 * (4 * 4 * 5) * (3 * 2 * 2)
  assert matmul_flops(jax.make_jaxpr(f)(*args).jaxpr) == expected
  assert count_flops(lambda a, b: a @ b, *args[:2]) == (2 * 8 * 4 * 16, 'xla_cpu')
