"""A run on non-square frames, image_size = (48, 40), in process: the pipeline's training batches and evaluation
views are 48 x 40, a short training run and its multi-view evaluation go through, and the results name the size."""
import json

import numpy as np
import train_helpers

from vvt.config import overrides
from vvt.config import run_spec
from vvt.data import pipeline
from vvt.train import checkpoints
from vvt.train import trainer

SIZE = (48, 40)


def _config(data_dir):
  c = train_helpers.tiny_config(data_dir, 'joint')
  overrides.apply_overrides(c, [('image_size', '(48,40)'), ('dataset.train_min_resize', '48'),
                                ('dataset.train_max_resize', '56'), ('dataset.eval_resize', '48'),
                                ('num_train_steps', '2'), ('schedule.warmup_steps', '1'),
                                ('checkpoint.every_steps', '2'), ('dataset.num_spatial_crops', '3')])
  return c


def test_a_48x40_run_trains_and_evaluates(tiny_data, tmp_path):
  spec = run_spec.resolve(_config(tiny_data))
  assert spec.model.grid == (4, 6, 5)
  batch = next(pipeline.make_train_iterator(spec.data, 8, process_index=0, process_count=1))
  assert batch['inputs'].shape == (8, 8, *SIZE, 3) and batch['inputs'].dtype == np.uint8
  views = next(iter(pipeline.make_eval_iterator(spec.data, 'test', 6, process_index=0, process_count=1)))
  assert views['inputs'].shape == (6, 8, *SIZE, 3)
  # three crops along the longer side of the 64 x 64 frames: not all the same window
  assert len({views['inputs'][i].tobytes() for i in range(3)}) == 3
  res = trainer.train_and_evaluate(spec, str(tmp_path / 'run'), log=lambda *a: None)
  assert res['step'] == 2 and np.isfinite(res['video_top1'])
  with open(checkpoints.eval_results_path(str(tmp_path / 'run'), 2, 'test')) as f:
    assert json.load(f)['image_size'] == list(SIZE)


def test_results_of_another_frame_size_are_named_by_it(tmp_path):
  from vvt.train import evaluate
  for run_size, results_size, name in (([48, 40], [48, 40], '1x3'), ([48, 40], 32, '1x3_8f_32px'),
                                       (32, [48, 40], '1x3_8f_48x40px'), (32, 32, '1x3')):
    (tmp_path / 'config.json').write_text(json.dumps({'num_frames': 8, 'image_size': run_size}))
    assert evaluate.protocol_name(str(tmp_path), {'protocol': '1x3', 'num_frames': 8,
                                                  'image_size': results_size}) == name
