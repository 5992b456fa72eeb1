"""`vvt memory`: will a config fit? Its train (or eval) step compiled for a TPU topology or forced CPU
devices on this machine, nothing executed; per-device memory, FLOPs, and a JSON line.

  vvt memory --config configs/kinetics400/vivit_b_fe.py --topology v3-32
  vvt memory --config configs/kinetics400/vivit_l_fe.py --topology v4-64 \\
      --config.mesh.axes="{'data': -1, 'fsdp': 8}" --config.batch_size=128
  vvt memory --config runs/divided --topology cpu:8 --eval

--topology: a Cloud TPU accelerator name (v2-8, v3-8, v3-32, v4-64, v5litepod-16, v5p-128, v6e-16,
...), a libtpu topology (v3:4x4, v4:2x2x4) or cpu:N. TPU topologies need libtpu
(`pip install -e '.[tpu]'`); no TPU is used. Prints params, optimiser state, batch, temporaries and
total per device against the device memory, the FLOPs per step (XLA's count: a multiply-add is 2),
and as its last line one JSON object (topology, devices, batch_size, per_device_bytes,
device_memory_bytes, fits, flops_per_step, ...). Exit 0 if it fits, 3 if not (one line saying why),
2 for a bad config, mesh or topology.
"""
import os
import sys

from vvt.cli import common

EXIT_DOES_NOT_FIT = 3


def _prepare_backend(topology) -> None:
  """Before JAX's backends start: CPU as the host platform, forced CPU devices, libtpu without
  probing for hardware (in-process callers whose backends already started keep theirs)."""
  from vvt.train import memory
  os.environ.setdefault('JAX_PLATFORMS', 'cpu')
  if topology.platform == 'cpu' and 'jax' not in sys.modules:
    flags = [f for f in os.environ.get('XLA_FLAGS', '').split() if 'device_count' not in f]
    flags.append(f'--xla_force_host_platform_device_count={topology.num_devices}')
    os.environ['XLA_FLAGS'] = ' '.join(flags)
  memory.quiet_libtpu_env(topology)


def _memory(argv):
  p = common.Parser('vvt memory', __doc__, config=True)
  p.add_argument('--topology', required=True,
                 help='v3-32, v4-64, v5litepod-16, ..., a libtpu topology such as v3:4x4, or cpu:N')
  p.add_argument('--eval', action='store_true', help='the eval step (eval.batch_size) instead')
  args, spec, overrides = common.parse(p, argv)
  from vvt.train import memory
  try:
    topology = memory.parse_topology(args.topology)
  except memory.TopologyError as e:
    raise common.UsageError(str(e)) from None
  _prepare_backend(topology)
  purpose = 'eval' if args.eval else 'train'  # the eval step never refuses a training-only field
  run = common.run_spec(spec, overrides, purpose=purpose, files=(), init=False)
  try:
    devices = memory.topology_devices(topology)
  except memory.TopologyError as e:
    raise common.UsageError(str(e)) from None
  report = memory.plan(run, topology, devices, eval_step=args.eval,
                       log=lambda m: print(m, file=sys.stderr))
  print('\n'.join(report.lines()))
  print(memory.to_json(report))
  if not report.fits:
    print(f'vvt memory: does not fit: {report.reason}', file=sys.stderr)
    return EXIT_DOES_NOT_FIT
  return 0


def main(argv) -> int:
  return common.run('vvt memory', _memory, argv)
