"""TimeSformer Fig. 5 (sec. 4.3, "Varying the number of tokens"): divided attention on Kinetics-400 with
more tokens along each axis separately: the spatial crop (224, 336, 448, 560 px) and the number of frames
(8, 32, 64, 96).

  vvt sweep --config experiments/timesformer_tokens.py:k400 --workdir runs/tsf_tokens
  vvt sweep --config experiments/timesformer_tokens.py:mini --workdir runs/tsf_tokens_mini

Base: configs/kinetics400/timesformer_b.py (8 frames at rate 32, 224^2). Ours where the paper is silent: the
training scale jitter and test resize grow with the crop (shorter side U[1.14, 1.43] x crop, test at the
crop), and more frames keep the clip's span by a smaller sampling rate (32, 8, 4; 96 frames at rate 4 as
TimeSformer-L). The 224 / 8-frame point is the base and is trained once. `mini`: crops 16, 32, 48 and 4, 8,
16 frames of the synthetic videos (16 frames long), 3 seeds.
"""
from configs.kinetics400 import timesformer_b
from experiments import common
from vvt.studies import sweep


def _crop(size: int) -> dict:
  return {'image_size': size, 'dataset.train_min_resize': round(size * 256 / 224),
          'dataset.train_max_resize': round(size * 320 / 224), 'dataset.eval_resize': size}


def get_config(arg=None):
  a = common.parse(arg, ('k400',))
  return common.miniature('divided', a) if common.is_mini(a) else timesformer_b.get_config()


def get_sweep(arg=None):
  a = common.parse(arg, ('k400',))
  if common.is_mini(a):
    crops, frames, strides = (16, 32, 48), (4, 16), (4, 1)
  else:
    crops, frames, strides = (224, 336, 448, 560), (32, 64, 96), (8, 4, 4)
  trials = sweep.chain(
      sweep.variants('crop', {str(c): _crop(c) for c in crops}),
      sweep.variants('frames', {str(f): {'num_frames': f, 'dataset.stride': s}
                                for f, s in zip(frames, strides, strict=True)}))
  return common.with_seeds(trials, a)
