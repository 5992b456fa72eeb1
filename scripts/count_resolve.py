"""How many times one command resolves its model: calls of `vvt.models.resolve` during a tiny `vvt train` and a
`vvt eval` of its workdir, counted in-process.

    PYTHONPATH=$PWD python scripts/count_resolve.py        # from a checkout's root: that checkout's vvt

The run is tests/train/tiny_config.py (2 layers of width 32, 12 steps) on a tiny synthetic set written to a
temporary folder; every binding of the function is counted (`vvt.models.config.resolve`, `vvt.models.resolve`,
`vvt.models.summary.resolve`), so a module that imported it by name is counted too.
"""
import pathlib
import sys
import tempfile

REPO = pathlib.Path.cwd()


def main():
  from vvt.cli import train as train_cli
  from vvt.data import write_synthetic
  import vvt.models
  from vvt.models import config as model_config
  from vvt.models import summary
  calls = []
  resolve = model_config.resolve

  def counted(cfg):
    calls.append(cfg)
    return resolve(cfg)

  for module in (model_config, vvt.models, summary):
    module.resolve = counted
  with tempfile.TemporaryDirectory() as tmp:
    data = f'{tmp}/data'
    write_synthetic(data, num_classes=4, train_clips=24, test_clips=8, num_frames=16, frame_size=64,
                              seed=1, train_shards=2, test_shards=1)
    config = ['--config', f'{REPO}/tests/train/tiny_config.py:{data}', '--config.num_train_steps=4',
              '--config.eval.batch_size=8']
    if train_cli.train_main([*config, '--workdir', f'{tmp}/run']) != 0:
      sys.exit('vvt train failed')
    train_calls = len(calls)
    if train_cli.eval_main(['--workdir', f'{tmp}/run', '--config.eval.batch_size=8']) != 0:
      sys.exit('vvt eval failed')
  print(f'vvt.models.resolve calls: vvt train {train_calls}, vvt eval {len(calls) - train_calls}')


if __name__ == '__main__':
  main()
