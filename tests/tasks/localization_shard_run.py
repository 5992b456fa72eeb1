"""Helper of test_localization.py (run with 8 forced host devices): the same localisation run trained for STEPS steps
on one device (mesh.num_devices=1) and on all eight, checkpointed in WORKDIR/one and WORKDIR/eight.

  python tests/tasks/localization_shard_run.py DATA WORKDIR STEPS [FIELD=VALUE ...]
"""
import sys

from vvt.config import loader
from vvt.train import localization_run


def run(data: str, out: str, steps: int, overrides: list) -> None:
  for name, devices in (('one', '1'), ('eight', '-1')):
    spec = loader.load_run(f'configs/localization.py:{data}', [*overrides, ('mesh.num_devices', devices)], files=())
    localization_run.train_and_evaluate(spec, f'{out}/{name}', stop_after_step=steps)


if __name__ == '__main__':
  run(sys.argv[1], sys.argv[2], int(sys.argv[3]), [tuple(a.split('=', 1)) for a in sys.argv[4:]])
