"""`make demo`: write the synthetic motion dataset if missing, train a small model on it, evaluate.

  python -m vvt.train.demo [--config configs/synthetic/divided.py] [--data_dir data/synthetic]
                           [--workdir runs/demo] [--data_only]

Prints the video-level top-1 of the multi-view evaluation and where the run's
files are. Running it again on the same workdir resumes (or, when the run is
complete, only re-evaluates the final checkpoint).
"""
import os
import sys
import time

from absl import app
from absl import flags
from absl import logging

from vvt.train import defaults

_CONFIG = flags.DEFINE_string('config', 'configs/synthetic/divided.py', 'config file')
_DATA = flags.DEFINE_string('data_dir', defaults.SYNTHETIC_DIR, 'synthetic dataset directory')
_WORKDIR = flags.DEFINE_string('workdir', 'runs/demo', 'run directory')
_DATA_ONLY = flags.DEFINE_bool('data_only', False, 'only write the dataset')


def ensure_synthetic(data_dir: str) -> float:
  """Writes the synthetic dataset (defaults.SYNTHETIC) unless it is there; returns seconds."""
  if os.path.exists(os.path.join(data_dir, 'manifest.json')):
    print(f'[demo] synthetic dataset present: {data_dir}')
    return 0.0
  from vvt.data import synthetic  # pylint: disable=g-import-not-at-top
  t0 = time.time()
  print(f'[demo] writing the synthetic motion dataset to {data_dir} ({defaults.SYNTHETIC})',
        flush=True)
  synthetic.write_synthetic(data_dir, **defaults.SYNTHETIC)
  dt = time.time() - t0
  print(f'[demo] dataset written in {dt:.0f}s')
  return dt


def load_config(path: str, arg: str):
  from ml_collections import config_flags  # pylint: disable=g-import-not-at-top
  module = config_flags.config_flags._LoadConfigModule(  # pylint: disable=protected-access
      os.path.basename(path), path)
  return module.get_config(arg)


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  t0 = time.time()
  ensure_synthetic(_DATA.value)
  if _DATA_ONLY.value:
    return 0
  from vvt.train import checkpoints, metrics, trainer  # pylint: disable=g-import-not-at-top
  config = load_config(_CONFIG.value, _DATA.value)
  print(f'[demo] training {config.model.family} / {config.model.attention} from '
        f'{_CONFIG.value} in {_WORKDIR.value}', flush=True)
  res = trainer.train_and_evaluate(config, _WORKDIR.value)
  wd = res['workdir']
  chance = 1.0 / int(config.model.num_classes)
  views = config.dataset.num_test_clips * config.dataset.num_spatial_crops
  print('')
  print(f'[demo] {config.model.attention} attention: video-level top-1 = '
        f'{res["video_top1"]:.3f} on {res["num_videos"]} test videos '
        f'({views} views each; chance = {chance:.3f}); clip-level top-1 = '
        f'{res["clip_top1"]:.3f}; total time {time.time() - t0:.0f}s')
  print(f'[demo] run directory: {wd}')
  print(f'         checkpoints     {checkpoints.checkpoint_dir(wd)}')
  print(f'         eval results    {checkpoints.eval_results_path(wd, res["step"], config.eval.split)}')
  print(f'         metrics         {os.path.join(wd, metrics.JSONL)} (+ tensorboard/)')
  print(f'         curves          {os.path.join(wd, metrics.CURVES)}')
  return 0


if __name__ == '__main__':
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
  sys.exit(app.run(main))
