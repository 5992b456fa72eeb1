"""Memory planning: the real train (or eval) step compiled ahead of time for a TPU topology or forced
CPU devices, on any machine, with nothing executed.

  topo = parse_topology('v3-32')             # Cloud TPU name, 'v3:4x4', or 'cpu:8' (no JAX)
  devices = topology_devices(topo)           # libtpu's deviceless TopologyDescription (or CPUs)
  report = plan(run, topo, devices)          # compile the step of a RunSpec, read XLA's memory / cost analysis
  report.fits, report.as_json()

The step is the one `vvt.train.program.build_program` builds on the run's mesh (`run.mesh`, for the
topology's platform), with its abstract state and batch: exactly what `vvt train` compiles. Its
learning-rate schedule counts the epochs of `dataset.train_files` when they are here, else epochs of
`NOMINAL_EPOCH_BATCHES` batches (the `[memory] schedule:` line says which; memory and FLOPs do not depend
on it, only the schedule's own checks do). Per device:
params, optimiser state and batch are the bytes of each leaf's shard; temporaries are XLA's
`temp_size_in_bytes`; the total is arguments + outputs - donated aliases + temporaries + code.
FLOPs are XLA's cost analysis of the partitioned program (per device; a multiply-add counts 2),
times the devices for `flops_per_step`. A step XLA cannot fit in device memory fails to compile;
its error's figures become the report (`fits` False).
"""
import dataclasses
import json
import math
import os
import re
from typing import Optional

from vvt.train import flops as flops_lib
from vvt.train import peaks

GIB = 2 ** 30

# Per device (a TensorCore on v2/v3, a chip elsewhere: v4 / v5p run as megacore), nominal HBM.
TPU_GENERATIONS = {
    # name: (topology prefix, cores per device in the accelerator name, dims, HBM bytes, megacore)
    'v2': ('v2', 1, 2, 8 * GIB, False),
    'v3': ('v3', 1, 2, 16 * GIB, False),
    'v4': ('v4', 2, 3, 32 * GIB, True),
    'v5p': ('v5', 2, 3, 95 * GIB, True),
    'v5litepod': ('v5e', 1, 2, 16 * GIB, False),
    'v5e': ('v5e', 1, 2, 16 * GIB, False),
    'v6e': ('v6e', 1, 2, 32 * GIB, False),
}
_CHIP_CORES = {'v2': 2, 'v3': 2}  # TensorCores per chip that are separate devices


class TopologyError(ValueError):
  """An unknown or malformed `--topology`."""


@dataclasses.dataclass(frozen=True)
class Topology:
  """What to compile for: `platform` 'tpu' (libtpu topology `name`, e.g. 'v3:4x4') or 'cpu'."""
  accelerator: str           # as given: 'v3-32', 'v3:4x4', 'cpu:8'
  platform: str              # 'tpu' | 'cpu'
  name: str                  # libtpu topology name ('v3:4x4'), or 'cpu'
  num_devices: int
  device_memory_bytes: int
  megacore: bool = False


def _grid(chips: int, dims: int) -> tuple:
  """The chip grid of a slice of `chips` chips: from 2x2(x1), double the last of the smallest sides."""
  if chips == 1:
    return (1,) * dims
  if chips < 4 or chips & (chips - 1):
    raise TopologyError(f'{chips} chips: give the topology itself, e.g. v4:2x2x3')
  shape = [2, 2] + [1] * (dims - 2)
  while math.prod(shape) < chips:
    k = max(i for i, s in enumerate(shape) if s == min(shape))
    shape[k] *= 2
  return tuple(shape)


def _known() -> str:
  return ('Cloud TPU names such as v3-8, v3-32, v4-64, v5litepod-16, v5p-128, v6e-16, a libtpu '
          'topology such as v3:4x4 or v4:2x2x4, or cpu:N')


def parse_topology(text: str, host_memory_bytes: Optional[int] = None) -> Topology:
  """'v3-32' / 'v5litepod-16' / 'v3:4x4' / 'cpu:8' -> Topology. No JAX; TopologyError if unknown.

  A Cloud TPU name counts TensorCores for v2/v3/v4/v5p (two per chip) and chips for v5e/v6e.
  `cpu:N` is N host devices sharing the host memory (`host_memory_bytes`, default this machine's).
  """
  text = str(text).strip()
  m = re.fullmatch(r'cpu(?::(\d+))?', text)
  if m:
    n = int(m.group(1) or 1)
    if n < 1:
      raise TopologyError(f'--topology {text}: need at least one device')
    total = host_memory_bytes or os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES')
    return Topology(text, 'cpu', 'cpu', n, total // n)
  m = re.fullmatch(r'(v\d+[a-z]*|v5litepod)-(\d+)', text)
  if m:
    gen, n = m.group(1), int(m.group(2))
    if gen not in TPU_GENERATIONS:
      raise TopologyError(f'unknown TPU generation {gen!r} in --topology {text} ({_known()})')
    prefix, per_device, dims, hbm, megacore = TPU_GENERATIONS[gen]
    cores_per_chip = 2 if per_device == 2 else _CHIP_CORES.get(gen, 1)
    if n % cores_per_chip:
      raise TopologyError(f'--topology {text}: {gen} slices count {cores_per_chip} cores per chip')
    grid = _grid(n // cores_per_chip, dims)
    devices = n // per_device
    return Topology(text, 'tpu', f'{prefix}:{"x".join(map(str, grid))}', devices, hbm, megacore)
  m = re.fullmatch(r'(v\d+[a-z]*):(\d+(?:x\d+)+)', text)
  if m:
    prefix, grid = m.group(1), tuple(int(v) for v in m.group(2).split('x'))
    gen = next((g for g, v in TPU_GENERATIONS.items() if v[0] == prefix), None)
    if gen is None:
      raise TopologyError(f'unknown TPU generation {prefix!r} in --topology {text} ({_known()})')
    _, per_device, _, hbm, megacore = TPU_GENERATIONS[gen]
    chips = math.prod(grid)
    return Topology(text, 'tpu', text, chips * _CHIP_CORES.get(gen, 1), hbm, megacore)
  raise TopologyError(f'unknown topology {text!r} ({_known()})')


def quiet_libtpu_env(topology: Topology) -> None:
  """Environment that stops libtpu probing for TPU hardware and metadata (call before JAX starts)."""
  if topology.platform != 'tpu':
    return
  os.environ.setdefault('TPU_ACCELERATOR_TYPE', topology.accelerator
                        if '-' in topology.accelerator else 'v3-8')
  os.environ.setdefault('TPU_WORKER_HOSTNAMES', 'localhost')
  os.environ.setdefault('TPU_SKIP_MDS_QUERY', '1')
  os.environ.setdefault('ALLOW_MULTIPLE_LIBTPU_LOAD', '1')  # a deviceless compile needs no lock


def topology_devices(topology: Topology) -> list:
  """The devices to compile for: libtpu's deviceless ones, or the first N CPU devices."""
  import jax
  if topology.platform == 'cpu':
    devices = jax.devices('cpu')
    if len(devices) < topology.num_devices:
      raise TopologyError(
          f'--topology {topology.accelerator}: this process has {len(devices)} CPU device(s); '
          f'start it with XLA_FLAGS=--xla_force_host_platform_device_count={topology.num_devices}')
    return devices[:topology.num_devices]
  from jax.experimental import topologies
  kwargs = {'chip_config_name': 'megacore'} if topology.megacore else {}
  try:
    desc = topologies.get_topology_desc(topology_name=topology.name, platform='tpu', **kwargs)
  except Exception as e:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    hint = '' if _has_libtpu() else " (libtpu is not installed: pip install -e '.[tpu]')"
    raise TopologyError(f'cannot describe TPU topology {topology.name!r}: {text}{hint}') from None
  return list(desc.devices)


def _has_libtpu() -> bool:
  import importlib.util
  return importlib.util.find_spec('libtpu') is not None


# ----------------------------------------------------------------------------- report


@dataclasses.dataclass
class Report:
  """Per-device bytes of one compiled step and its FLOPs."""
  topology: str
  devices: int
  mesh: dict
  step: str                        # 'train' | 'eval'
  batch_size: int
  device_memory_bytes: int
  params_bytes: int = 0
  opt_state_bytes: int = 0
  batch_bytes: int = 0
  output_bytes: int = 0
  alias_bytes: int = 0
  temp_bytes: int = 0
  code_bytes: int = 0
  per_device_bytes: int = 0
  flops_per_device: float = 0.0
  compiled: bool = True
  reason: str = ''
  num_params: int = 0
  peak: Optional[peaks.Peak] = None  # the device's peak rate for the step's dtype (vvt.train.peaks), if known

  @property
  def fits(self) -> bool:
    return self.compiled and self.per_device_bytes <= self.device_memory_bytes

  @property
  def flops_per_step(self) -> float:
    return self.flops_per_device * self.devices

  def as_json(self) -> dict:
    keys = ('topology', 'devices', 'mesh', 'step', 'batch_size', 'per_device_bytes',
            'device_memory_bytes', 'params_bytes', 'opt_state_bytes', 'batch_bytes', 'temp_bytes',
            'output_bytes', 'alias_bytes', 'code_bytes', 'flops_per_device', 'num_params', 'reason')
    out = {k: getattr(self, k) for k in keys}
    out.update(fits=self.fits, flops_per_step=self.flops_per_step,
               peak_tflops_per_device=self.peak.tflops if self.peak else None,
               min_step_seconds=self.min_step_seconds)
    return out

  @property
  def min_step_seconds(self) -> Optional[float]:
    """The step's time at the device's peak rate (100% MFU): a lower bound; None without a peak."""
    if not self.peak or not self.flops_per_device:
      return None
    return self.flops_per_device / (self.peak.tflops * 1e12)

  def lines(self) -> list[str]:
    g = lambda b: f'{b / GIB:8.2f} GiB'
    mesh = ' x '.join(f'{k}={v}' for k, v in self.mesh.items())
    out = [f'{self.step} step, global batch {self.batch_size}, {self.num_params / 1e6:.1f}M params, '
           f'{self.topology}: {self.devices} devices, mesh {mesh}',
           'per device:',
           f'  params            {g(self.params_bytes)}',
           f'  optimiser state   {g(self.opt_state_bytes)}',
           f'  batch             {g(self.batch_bytes)}',
           f'  temporaries       {g(self.temp_bytes)}',
           f'  total             {g(self.per_device_bytes)}   of {g(self.device_memory_bytes)} '
           f'({100 * self.per_device_bytes / self.device_memory_bytes:.0f}%)']
    if self.flops_per_device:
      out.append(f'FLOPs per step    {self.flops_per_step:.4g} ({self.flops_per_device:.4g} per '
                 'device; XLA counts a multiply-add as 2)')
      if self.min_step_seconds is not None:
        out.append(f'at peak            {self.min_step_seconds * 1e3:.1f} ms per step at 100% MFU '
                   f'({self.peak.basis}); at 40% MFU {self.min_step_seconds / 0.4 * 1e3:.1f} ms')
      else:
        out.append('at peak            no peak rate known for this device (vvt.train.peaks)')
    out.append('fits' if self.fits else f'does not fit: {self.reason}')
    return out


def shard_bytes(tree) -> int:
  """Bytes one device holds of a pytree of ShapeDtypeStruct with shardings (the largest shard)."""
  import jax
  import numpy as np
  total = 0
  for x in jax.tree.leaves(tree):
    shape = x.sharding.shard_shape(x.shape) if x.sharding is not None else x.shape
    total += int(np.prod(shape, dtype=np.int64)) * np.dtype(x.dtype).itemsize
  return total


# XLA:TPU's "Ran out of memory on HBM, the total memory required for HLO temporaries (50.55G)
# exceeds available HBM (15.48G)." (and the older "Used 21.3G of 15.48G hbm").
_OOM = (re.compile(r'temporaries \(([\d.]+)([KMGT]?)i?B?\) exceeds available HBM \(([\d.]+)([KMGT]?)i?B?\)',
                   re.I),
        re.compile(r'Used ([\d.]+)([KMGT]?)i?B? of ([\d.]+)([KMGT]?)i?B? hbm', re.I))
_UNITS = {'': 1, 'K': 2 ** 10, 'M': 2 ** 20, 'G': 2 ** 30, 'T': 2 ** 40}


def oom_figures(message: str) -> Optional[tuple[int, int]]:
  """(needed, available) bytes from an XLA out-of-memory compile error, if it gives them."""
  for pattern in _OOM:
    m = pattern.search(message)
    if m:
      return (int(float(m.group(1)) * _UNITS[m.group(2).upper()]),
              int(float(m.group(3)) * _UNITS[m.group(4).upper()]))
  return None


def is_oom(error: BaseException) -> bool:
  text = str(error)
  return 'RESOURCE_EXHAUSTED' in text or 'Ran out of memory' in text or oom_figures(text) is not None


def abstract_batch(program, batch_size: int, eval_step: bool = False) -> dict:
  """The step's batch as sharded ShapeDtypeStructs: uint8 pixels (B, T, H, W, 3), the task's labels, mask."""
  import jax
  import jax.numpy as jnp
  sharding = program.batch_sharding
  (h, w), t = program.clip.image_size, program.clip.num_frames

  def spec(shape, dtype):
    return jax.ShapeDtypeStruct(shape, dtype, sharding=sharding)

  batch = {'inputs': spec((batch_size, t, h, w, 3), jnp.uint8),
           'mask': spec((batch_size,), jnp.float32)}
  for key, (shape, dtype) in program.task.label_specs(batch_size).items():
    batch[key] = spec(shape, jnp.dtype(dtype))
  if eval_step:
    batch['video_index'] = spec((batch_size,), jnp.int32)
  return batch


NOMINAL_EPOCH_BATCHES = 100  # the schedule's epoch when the training set's size is unknown


def training_set_size(data) -> tuple[Optional[int], str]:
  """(videos, how it is known): the size of `dataset.train_files` (a RunSpec's `data`) that `vvt train` would
  count, or (None, why) when they are not here (the schedule then assumes epochs of `NOMINAL_EPOCH_BATCHES`)."""
  from vvt.data import missing_files
  missing = missing_files(data, ('train_files',))
  if missing:
    return None, missing[0].split(';')[0]
  try:
    from vvt.data import count_videos
    return int(count_videos(data, 'train')), 'dataset.train_files'
  except Exception as e:  # (unreadable: the plan does not need it)
    return None, f'dataset.train_files cannot be counted ({type(e).__name__})'


def schedule_note(program, size_known: bool, source: str) -> str:
  """One line: the steps per epoch the learning-rate schedule was built with, and where they come from."""
  training = program.training
  if size_known:
    return (f'schedule: {training.steps_per_epoch} steps/epoch ({training.num_train_videos} training videos '
            f'of {source}), {training.total_steps} steps')
  return (f'schedule: {training.steps_per_epoch} steps/epoch assumed ({source}), {training.total_steps} '
          'steps; memory and FLOPs do not depend on it')


def _read_oom(report: Report, error: BaseException) -> Report:
  """`report` of a step that did not compile for lack of device memory: the compiler's figures."""
  figures = oom_figures(str(error))
  report.compiled = False
  if figures:  # XLA's temporaries include what it keeps of the arguments; the total is a lower bound
    report.temp_bytes, avail = figures
    report.per_device_bytes = max(report.temp_bytes, report.params_bytes + report.opt_state_bytes
                                  + report.batch_bytes)
    report.reason = (f'{report.temp_bytes / GIB:.2f} GiB of temporaries per device > '
                     f'{avail / GIB:.2f} GiB of HBM available to XLA (the step does not compile)')
  else:
    report.reason = 'the compiler ran out of device memory: ' + str(error).splitlines()[0][:300]
  return report


def _read_compiled(report: Report, compiled, accumulation_steps: int = 1) -> Report:
  """`report` with XLA's memory and cost analysis of the compiled step (a train step of `accumulation_steps`
  micro-batches: `flops.train_step_flops`)."""
  mem = compiled.memory_analysis()
  report.output_bytes = int(mem.output_size_in_bytes)
  report.alias_bytes = int(mem.alias_size_in_bytes)
  report.temp_bytes = int(mem.temp_size_in_bytes)
  report.code_bytes = int(mem.generated_code_size_in_bytes)
  report.per_device_bytes = int(mem.argument_size_in_bytes + mem.output_size_in_bytes
                                - mem.alias_size_in_bytes + mem.temp_size_in_bytes
                                + mem.generated_code_size_in_bytes)
  report.flops_per_device = flops_lib.train_step_flops(flops_lib.compiled_flops(compiled), accumulation_steps)
  if not report.fits:
    report.reason = (f'{report.per_device_bytes / GIB:.2f} GiB per device > '
                     f'{report.device_memory_bytes / GIB:.2f} GiB of device memory')
  return report


def plan_program(run, topology: Topology, mesh, eval_step: bool = False, log=None):
  """The program `vvt train` (or `vvt eval`) builds for RunSpec `run` on `mesh`, for `topology`'s platform."""
  from vvt.train import program as program_lib
  if eval_step:  # auto attention: the topology's choice, not the host's
    return program_lib.build_program(run, mesh, platform=topology.platform)
  videos, source = training_set_size(run.data)
  num_train_videos = videos if videos is not None else NOMINAL_EPOCH_BATCHES * run.batch_size
  program = program_lib.build_program(run, mesh, num_train_videos=num_train_videos, platform=topology.platform)
  if log:
    log('[memory] ' + schedule_note(program, videos is not None, source))
  return program


def plan(run, topology: Topology, devices, eval_step: bool = False, log=None) -> Report:
  """Compiles the train (or eval) step of RunSpec `run` for `devices` and reports its memory and FLOPs.

  Raises ConfigError for a run that does not fit the mesh (before compiling); a step that
  does not fit the device memory gives a Report with `compiled` False and the compiler's figures.
  """
  import jax

  from vvt.config import run_spec
  from vvt.train import mesh as mesh_lib
  num_processes = len({d.process_index for d in devices})
  devices = mesh_lib.mesh_devices(run.mesh, devices)
  run_spec.check_devices(run, len(devices), num_processes)
  mesh = mesh_lib.make_mesh(run.mesh, devices)
  program = plan_program(run, topology, mesh, eval_step, log)  # rule errors: before compiling
  batch_size = run.eval.batch_size if eval_step else run.batch_size
  batch = abstract_batch(program, batch_size, eval_step)
  if eval_step:
    params = program.abstract_params()
    fn, args, opt_state = program.eval_step, (params, batch), None
  else:
    state = program.abstract_state()
    fn, args, params, opt_state = program.training.step, (state, batch), state.params, state.opt_state
  report = Report(topology=topology.accelerator, devices=len(devices),
                  mesh=mesh_lib.axis_sizes(mesh), step='eval' if eval_step else 'train',
                  batch_size=batch_size, device_memory_bytes=topology.device_memory_bytes,
                  params_bytes=shard_bytes(params),
                  opt_state_bytes=0 if opt_state is None else shard_bytes(opt_state),
                  batch_bytes=shard_bytes(batch),
                  num_params=sum(int(x.size) for x in jax.tree.leaves(params)),
                  peak=peaks.peak_for(getattr(devices[0], 'device_kind', ''), run.model.dtype,
                                      peaks.matmul_precision()) if topology.platform != 'cpu' else None)
  if log:
    log(f'[memory] compiling the {report.step} step for {topology.accelerator} '
        f'({len(devices)} devices, mesh {report.mesh}) ...')
  lowered = fn.lower(*args)
  try:
    compiled = lowered.compile()
  except Exception as e:
    if not is_oom(e):
      raise
    return _read_oom(report, e)
  return _read_compiled(report, compiled, 1 if eval_step else run.optimizer.accumulation_steps)


def to_json(report: Report) -> str:
  return json.dumps(report.as_json(), sort_keys=False)
