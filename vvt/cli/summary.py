"""`vvt summary`: params, GFLOPs per view and tokens of a config's model, without allocating weights.

  vvt summary --config configs/kinetics400/vivit_b_fe.py [--config.model.num_frames=16 ...]
  vvt summary --config runs/divided                  (a run's config.json)

GFLOPs count a multiply-add as one FLOP and every token through every layer, as the papers do
(vvt/models/summary.py). A probe run's (task.name='probe') are its frozen backbone's; a second line says so and
counts its probes.
"""
from vvt.cli import common


def _summary(argv):
  p = common.Parser('vvt summary', __doc__, config=True)
  args, spec, overrides = common.parse(p, argv)
  del args
  config = common.run_config(spec, overrides, purpose='summary')
  from vvt.models import summary
  model = config.model if 'model' in config else config
  print(summary.format_summary(spec, summary.summarise(model)))
  probe = _probe_line(config)
  if probe:
    print(probe)


def _probe_line(config) -> str:
  """What a probe run's summary leaves out: the figures above are its frozen backbone's; '' for other tasks."""
  task = config.get('task') if hasattr(config, 'get') else None
  if task is None or task.get('name') != 'probe':
    return ''
  p = task.probe
  n = len(p.lrs) * len(p.weight_decays)
  return (f'task probe: the figures above are the frozen backbone\'s; {n} {p.head} probe(s) ({p.base}) train on its '
          'features and are not counted')


def main(argv) -> int:
  return common.run('vvt summary', _summary, argv)
