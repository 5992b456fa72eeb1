"""Peak matmul rates per device, the denominator of model-FLOPs utilisation (MFU).

  peak = peak_for('TPU v4', 'bfloat16')    # -> Peak(tflops=275.0, basis='TPU v4 bf16 ...') or None
  peak = peak_for('cpu', 'float32')        # -> None: no published peak (the trainer measures one instead)

Per JAX device, dense (no 2:4 sparsity), from the vendors' data sheets. A JAX device is a TensorCore on
TPU v3 (two per chip: half the chip's rate), a chip on v4 / v5p (megacore), v5e and v6e. What a float32 step
runs at depends on the matmul precision: at JAX's default precision XLA:TPU runs float32 dots as one bfloat16
pass (so the bf16 peak applies) and XLA:GPU as TF32 on A100 and later (the TF32 peak); at 'highest' GPUs run
true float32 (the FP32 peak) and TPUs several bf16 passes, for which no peak is published (None: MFU absent).
Unknown device kinds give None; never a guessed number.
"""
import dataclasses
import re
from typing import Optional


@dataclasses.dataclass(frozen=True)
class Peak:
  tflops: float   # per device, 1e12 FLOP/s (a multiply-add counts 2)
  basis: str      # where the figure comes from, for the log


# (device kind pattern, name, bf16, tf32, fp32) in TFLOP/s per JAX device; None = not published.
# TPU: Cloud TPU system architecture pages (per chip: v3 123, v4 275, v5e 197, v5p 459, v6e 918).
# GPU: NVIDIA data sheets, SXM unless named (A100 312 / 156 / 19.5; H100 SXM 989 / 495 / 67; H100 PCIe
# 756 / 378 / 51; H200 SXM 989 / 495 / 67; B200 (HGX, per GPU) 2250 / 1125 / 75).
TABLE = (
    (r'tpu v3', 'TPU v3 (per TensorCore)', 61.5, None, None),
    (r'tpu v4(?! ?lite)', 'TPU v4', 275.0, None, None),
    (r'tpu v5 ?lite|tpu v5e', 'TPU v5e', 197.0, None, None),
    (r'tpu v5p?$', 'TPU v5p', 459.0, None, None),
    (r'tpu v6 ?lite|tpu v6e', 'TPU v6e', 918.0, None, None),
    (r'a100', 'A100', 312.0, 156.0, 19.5),
    (r'h100.*pcie', 'H100 PCIe', 756.0, 378.0, 51.2),
    (r'h100(?!.*(nvl|pcie))', 'H100 SXM', 989.4, 494.7, 66.9),
    (r'h200(?!.*nvl)', 'H200 SXM', 989.4, 494.7, 66.9),
    (r'b200', 'B200', 2250.0, 1125.0, 75.0),
)


def matmul_precision() -> str:
  """JAX's default matmul precision now: 'default' or 'highest' (what a float32 dot runs at)."""
  import jax
  value = str(jax.config.jax_default_matmul_precision or 'default').lower()
  return 'highest' if value in ('highest', 'float32') else 'default'


def peak_for(device_kind: str, dtype: str, precision: str = 'default') -> Optional[Peak]:
  """The peak rate of one device of `device_kind` (jax's `device.device_kind`) for a step computing in `dtype`
  ('bfloat16' | 'float32') at matmul `precision` ('default' | 'highest'); None where none is known."""
  kind = device_kind.strip().lower()
  for pattern, name, bf16, tf32, fp32 in TABLE:
    if not re.search(pattern, kind):
      continue
    tpu = kind.startswith('tpu')
    if dtype == 'bfloat16' or (tpu and precision == 'default'):
      rate, what = bf16, 'bf16'
    elif tpu:
      return None
    elif precision == 'default':
      rate, what = tf32, 'tf32'
    else:
      rate, what = fp32, 'fp32'
    return Peak(rate, f'{name} {what} peak, {rate:g} TFLOP/s per device') if rate else None
  return None
