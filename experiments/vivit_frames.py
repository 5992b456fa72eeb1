"""ViViT Fig. 7 (Arnab et al. 2021, ICCV version, sec. 4.2 "Varying the number of input frames"): ViViT-L/16x2
factorised encoder on Kinetics-400 with 32 to 128 input frames at stride 2, the tokens growing with the frames; the
128-frame model "sees" the whole video in one view.

  vvt sweep --config experiments/vivit_frames.py:k400 --workdir runs/vivit_frames
  vvt sweep --config experiments/vivit_frames.py:mini --workdir runs/vivit_frames_mini

Base: configs/kinetics400/vivit_l_fe.py with the ablations' 4 test views (`views=ablation`). Fig. 7 plots
accuracy against the number of temporal views: re-evaluate a finished trial with `vvt eval --workdir DIR/<trial>
--config.dataset.num_test_clips=N`. `mini`: 4, 8, 16 frames of the 16-frame synthetic videos (stride 4, 2, 1),
3 seeds.
"""
from configs.kinetics400 import vivit_l_fe
from experiments import common
from vvt.studies import sweep


def get_config(arg=None):
  a = common.parse(arg, ('k400',))
  return common.miniature('factorised_encoder', a) if common.is_mini(a) else vivit_l_fe.get_config('views=ablation')


def get_sweep(arg=None):
  a = common.parse(arg, ('k400',))
  if common.is_mini(a):
    frames = sweep.zipped(sweep.axis('num_frames', [4, 8, 16]), sweep.axis('dataset.stride', [4, 2, 1]))
  else:
    frames = sweep.axis('num_frames', [32, 64, 128])
  return common.with_seeds(frames, a)
