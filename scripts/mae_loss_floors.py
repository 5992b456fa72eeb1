"""What simple predictors of the masked tubelets score on the synthetic motion clips: the floors that a masked
autoencoder's `reconstruction_loss` on raw pixels (`task.mae.norm_pix_loss=False`, experiments/pretrain_probe.py)
is read against (docs/tasks.md, "From pretraining to a probe").

  python scripts/mae_loss_floors.py [--object-scale 1] [--clips 256] [--mask-ratio 0.75]

The clips are drawn as `vvt data synthetic` draws them (`render_clip`, 16 frames of 32^2, every second one: the
experiment's 8 frames, without its resize and crop), ImageNet-normalised as the experiment's runs are, in 2x8x8
tubelets, one tube mask per clip (the same spatial positions hidden in every frame). Each predictor's mean squared
error over the masked tubelets:

  dataset_mean   the mean colour of all the clips: a decoder that knows nothing of the clip
  visible_mean   the mean colour of the clip's visible tubelets: a decoder that copies the clip's colour
  background     the clip's per-pixel median over its frames at the masked places: the clip's own background
                 with no object (an oracle: under tube masks those places are hidden in every frame)
"""
import argparse
import sys

import numpy as np

FRAMES, SIZE, TUBELET = 8, 32, (2, 8, 8)


def clips(num: int, object_scale: float, seed: int = 0) -> np.ndarray:
  """float32 (num, 8, 32, 32, 3): synthetic clips of the four classes in turn, ImageNet-normalised."""
  from vvt.data import normalize
  from vvt.data.writing import synthetic
  x = np.stack([synthetic.render_clip(i % 4, np.random.default_rng([seed, i]), 2 * FRAMES, SIZE,
                                      object_scale=object_scale)[::2] for i in range(num)])
  return np.asarray(normalize(x, 'imagenet'), np.float32)


def tubelets(clip: np.ndarray) -> np.ndarray:
  """(T, H, W, 3) -> (n_t, N, t * h * w, 3): the tubelets of every temporal index and spatial position."""
  t, h, w = TUBELET
  nt, nh, nw = clip.shape[0] // t, clip.shape[1] // h, clip.shape[2] // w
  x = clip.reshape(nt, t, nh, h, nw, w, 3).transpose(0, 2, 4, 1, 3, 5, 6)
  return x.reshape(nt, nh * nw, t * h * w, 3)


def floors(x: np.ndarray, mask_ratio: float, seed: int = 0) -> dict:
  """{predictor: its mean squared error over the masked tubelets} of clips `x` (module docstring)."""
  rng, overall = np.random.default_rng(seed), x.mean(axis=(0, 1, 2, 3))
  errors = {'dataset_mean': [], 'visible_mean': [], 'background': []}
  for clip in x:
    tub = tubelets(clip)
    places = rng.permutation(tub.shape[1])
    keep = tub.shape[1] - int(mask_ratio * tub.shape[1])
    visible, hidden = tub[:, places[:keep]], tub[:, places[keep:]]
    background = np.median(tub, axis=0, keepdims=True)[:, places[keep:]]
    for name, guess in (('dataset_mean', overall), ('visible_mean', visible.mean(axis=(0, 1, 2))),
                        ('background', background)):
      errors[name].append(float(np.mean((hidden - guess) ** 2)))
  return {name: float(np.mean(v)) for name, v in errors.items()}


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('--object-scale', type=float, default=1.0, help="the object's side times this (default 1)")
  p.add_argument('--clips', type=int, default=256, help='clips to average over (default 256)')
  p.add_argument('--mask-ratio', type=float, default=0.75, help='the tube masks\' ratio (default 0.75)')
  args = p.parse_args(argv)
  from vvt.data.writing.synthetic import MAX_OBJECT_SCALE
  if args.clips < 1 or not 0 < args.mask_ratio < 1 or not 0 < args.object_scale <= MAX_OBJECT_SCALE:
    print(f'mae_loss_floors: --clips must be >= 1, --mask-ratio in (0, 1), --object-scale in '
          f'(0, {MAX_OBJECT_SCALE:g}]', file=sys.stderr)
    return 2
  got = floors(clips(args.clips, args.object_scale), args.mask_ratio)
  print(f'object_scale {args.object_scale:g}: ' + ', '.join(f'{k} {v:.3f}' for k, v in got.items())
        + f' ({args.clips} clips, tube masks at {args.mask_ratio:g})')
  return 0


if __name__ == '__main__':
  sys.exit(main())
