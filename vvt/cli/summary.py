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
  from vvt.config import validation
  from vvt.models import summary
  model = validation.run_model_config(config) if 'model' in config else config
  print(summary.format_summary(spec, summary.summarise(model)))
  from vvt.tasks import registry
  note = registry.hooks_of(config).summary_note(config)  # a probe run: the figures are its frozen backbone's
  if note:
    print(note)


def main(argv) -> int:
  return common.run('vvt summary', _summary, argv)
