"""scripts/mae_loss_floors.py: the losses of simple predictors of masked tubelets, ordered as they must be."""
import numpy as np

from scripts import mae_loss_floors


def test_a_clip_s_own_background_beats_its_colour_which_beats_the_data_s_and_a_larger_object_costs_more():
  small = mae_loss_floors.floors(mae_loss_floors.clips(8, 1.0), 0.75)
  large = mae_loss_floors.floors(mae_loss_floors.clips(8, 2.0), 0.75)
  for f in (small, large):
    assert f['background'] < f['visible_mean'] < f['dataset_mean'], f
  assert all(large[k] > small[k] for k in small), (small, large)


def test_tubelets_hold_the_pixels_of_their_place_and_frames():
  clip = np.random.default_rng(0).normal(size=(8, 32, 32, 3)).astype(np.float32)
  tub = mae_loss_floors.tubelets(clip)
  assert tub.shape == (4, 16, 128, 3)
  np.testing.assert_array_equal(tub[1, 5].reshape(2, 8, 8, 3), clip[2:4, 8:16, 8:16])  # time 1, row 1, column 1


def test_the_command_prints_one_line_and_refuses_a_bad_ratio(capsys):
  assert mae_loss_floors.main(['--clips', '4']) == 0
  out = capsys.readouterr().out.splitlines()
  assert len(out) == 1 and out[0].startswith('object_scale 1: dataset_mean ')
  assert out[0].endswith('(4 clips, tube masks at 0.75)')
  assert mae_loss_floors.main(['--mask-ratio', '1.5']) == 2
  assert '--mask-ratio in (0, 1)' in capsys.readouterr().err
