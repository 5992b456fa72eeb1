"""Helper of test_localization.py: one of two processes (jax.distributed on 127.0.0.1) of one localisation run,
trained and evaluated (each process scoring its share of the test videos); prints `RESULT {json}`.

  python tests/tasks/localization_two_process_run.py DATA WORKDIR PORT PROCESS_ID [FIELD=VALUE ...]
"""
import json
import sys

from vvt.config import loader
from vvt.train import localization_run


def main(data: str, workdir: str, port: int, process_id: int, overrides: list) -> None:
  fields = [*overrides, ('distributed.initialize', 'True'), ('distributed.coordinator_address', f'127.0.0.1:{port}'),
            ('distributed.num_processes', '2'), ('distributed.process_id', str(process_id))]
  run = loader.load_run(f'configs/localization.py:{data}', fields, files=())
  res = localization_run.train_and_evaluate(run, workdir, log=lambda *a, **k: None)
  import jax
  print('RESULT ' + json.dumps({'process': jax.process_index(), 'processes': jax.process_count(), **{
      k: res[k] for k in ('average_map', 'map@0.5', 'num_videos', 'eval_processes', 'steps')}}), flush=True)


if __name__ == '__main__':
  main(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), [tuple(a.split('=', 1)) for a in sys.argv[5:]])
