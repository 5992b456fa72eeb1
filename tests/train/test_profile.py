"""vvt.train.profile / flops / peaks: the trace window, XLA's FLOP count, the peak table, the profile.steps field."""
import jax
import jax.numpy as jnp
import pytest

from vvt.config import validation
from vvt.config.errors import ConfigError
from vvt.train import flops
from vvt.train import peaks
from vvt.train import profile


@pytest.mark.parametrize('kind,dtype,precision,tflops', [
    ('TPU v3', 'bfloat16', 'default', 61.5),          # a TensorCore: half of a v3 chip's 123
    ('TPU v3', 'float32', 'default', 61.5),           # float32 dots at default precision: one bf16 pass
    ('TPU v4', 'bfloat16', 'default', 275.0),
    ('TPU v5 lite', 'bfloat16', 'default', 197.0),
    ('TPU v5e', 'bfloat16', 'default', 197.0),
    ('TPU v5', 'bfloat16', 'default', 459.0),
    ('TPU v5p', 'bfloat16', 'default', 459.0),
    ('TPU v6 lite', 'bfloat16', 'default', 918.0),
    ('NVIDIA A100-SXM4-80GB', 'bfloat16', 'default', 312.0),
    ('NVIDIA A100-SXM4-40GB', 'float32', 'default', 156.0),   # TF32
    ('NVIDIA A100-SXM4-40GB', 'float32', 'highest', 19.5),    # true float32
    ('NVIDIA H100 80GB HBM3', 'bfloat16', 'default', 989.4),
    ('NVIDIA H100 PCIe', 'bfloat16', 'default', 756.0),
    ('NVIDIA H200', 'bfloat16', 'default', 989.4),
    ('NVIDIA H200', 'float32', 'highest', 66.9),
    ('NVIDIA B200', 'bfloat16', 'default', 2250.0),
])
def test_the_peak_table_by_device_kind(kind, dtype, precision, tflops):
  peak = peaks.peak_for(kind, dtype, precision)
  assert peak is not None and peak.tflops == tflops and str(tflops).rstrip('0').rstrip('.') in peak.basis


@pytest.mark.parametrize('kind,dtype,precision', [
    ('cpu', 'float32', 'default'), ('TFRT_CPU_0', 'bfloat16', 'default'),
    ('Tesla V100-SXM2-16GB', 'float32', 'default'),
    ('TPU v4', 'float32', 'highest'),  # several bf16 passes: no published rate
    ('NVIDIA H100 NVL', 'bfloat16', 'default'), ('TPU v4 lite', 'bfloat16', 'default')])
def test_no_peak_where_none_is_published(kind, dtype, precision):
  assert peaks.peak_for(kind, dtype, precision) is None


def test_cost_analysis_flops_of_matmuls_equal_the_analytic_count():
  """(B, M, K) @ (K, N), then @ (N, P): 2 B M K N + 2 B M N P FLOPs; the elementwise tanh between adds none."""
  b, m, k, n, p = 3, 40, 24, 56, 8

  @jax.jit
  def f(x, w1, w2):
    return jnp.einsum('bmk,kn->bmn', x, w1) @ w2

  args = (jnp.ones((b, m, k)), jnp.ones((k, n)), jnp.ones((n, p)))
  f(*args)
  assert flops.step_flops(f, *args) == 2 * b * m * k * n + 2 * b * m * n * p
  assert flops.compiled_flops(f.lower(*args).compile()) == 2 * b * m * k * n + 2 * b * m * n * p


def test_a_measured_matmul_rate_is_a_rate():
  assert flops.measured_matmul_rate('float32', n=64, repeats=1) > 0


def test_the_trace_window(monkeypatch):
  monkeypatch.setenv(profile.AUTO_OFF_ENV, '1')
  a = profile.AUTO_START
  assert profile.trace_window(None, 0, 100) == (a, a + profile.AUTO_STEPS - 1)
  assert profile.trace_window(None, 50, 100) == (50 + a, 50 + a + profile.AUTO_STEPS - 1)  # after a resume
  assert profile.trace_window(None, 0, a - 1) is None  # a run too short for the default
  assert profile.trace_window((), 0, 100) is None
  assert profile.trace_window((3, 4), 0, 100) == (3, 4)
  assert profile.trace_window((3, 400), 0, 100) == (3, 100)
  assert profile.trace_window((3, 4), 10, 100) is None  # resumed past it
  monkeypatch.setenv(profile.AUTO_OFF_ENV, '0')  # as in the test suite: no default trace, explicit ones stay
  assert profile.trace_window(None, 0, 100) is None and profile.trace_window((3, 4), 0, 100) == (3, 4)


def test_the_interval_scalars():
  perf = profile.Performance(None, '/unused', peaks.Peak(2.0, 'test'), log=lambda *a: None)
  assert perf.scalars(1) == {}  # before the first step is done: nothing timed yet
  it = perf.timed(iter(range(3)))
  perf.start(1, 1e9)
  assert list(it) == [0, 1, 2]
  s = perf.scalars(3)
  assert set(s) == {'tflops_per_device', 'mfu', 'input_wait_fraction'}
  assert s['tflops_per_device'] > 0 and s['mfu'] == pytest.approx(s['tflops_per_device'] / 2.0)
  assert 0 <= s['input_wait_fraction'] <= 1
  assert 'mfu' not in profile.Performance(None, '/unused', None).scalars(0)


@pytest.mark.parametrize('steps', [(5, 2), (0, 3), (1, 2, 3), 'a', 4])
def test_a_bad_profile_steps_is_one_line_naming_the_field(steps):
  import tiny_config
  c = tiny_config.get_config('unused')
  c.profile.steps = steps
  with pytest.raises(ConfigError, match=r'^profile\.steps must be'):
    validation.validate(c)
  c.profile.steps = (2, 2)
  validation.validate(c)


def test_traced_steps_after_the_last_step_of_a_run_of_epochs_are_refused_once_its_length_is_known():
  """40 videos in batches of 8 for 2 epochs: 10 steps; a trace from step 11 would never be written."""
  import tiny_config

  from vvt.config import run_spec
  c = tiny_config.get_config('unused')
  c.num_train_steps, c.num_epochs, c.schedule.warmup_steps, c.profile.steps = -1, 2.0, 1, (11, 12)
  validation.validate(c)  # its length is not known yet
  with pytest.raises(ConfigError) as e:
    profile.check_window(run_spec.resolve(c), 40)
  assert e.value.problems == ("profile.steps=(11, 12) starts after the run's last step 10 (num_epochs=2.0, 5 steps per "
                              'epoch), so no trace would be written: give steps within the run (or () for no trace)',)
  profile.check_window(run_spec.resolve(c), 48)  # 12 steps
