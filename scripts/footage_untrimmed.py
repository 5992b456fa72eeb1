"""Long videos of scenes, made of the footage training clips, with their segments: a localisation training set.

  python scripts/make_example_clips.py --out data/footage
  python scripts/footage_untrimmed.py --footage data/footage --out data/footage_untrimmed [--videos 12] [--seed 0]

Each video is a run of scenes, each scene a different one from the one before: 4 to 10 consecutive clips of one
source video of `FOOTAGE/train.csv` (16 frames each, written at 25 fps as `scenes.mp4` is: 2.6 to 6.4 s), played
forward, or backward (its backward clips in reverse order) as the second half of `scenes.mp4` is; 3 to 5 scenes a
video.
Only training clips are used. Written: OUT/videos/footage_NNNN.mp4 and OUT/annotations.json (ActivityNet style,
`vvt.data.write_activitynet`): these videos in the subset 'training' and, from FOOTAGE/long/scenes.json, the video
`scenes` in the subset 'validation', so that `configs/localization.py` trains on the made videos and evaluates
on `scenes.mp4`'s sequence (its `vvt features --window` row put beside them).
"""
import argparse
import csv
import os
import sys

import av
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_example_clips  # noqa: E402

FPS = 25.0
RUN_CLIPS = (4, 10)   # consecutive clips of one scene
SCENES_PER_VIDEO = (3, 5)


def training_runs(footage: str) -> dict:
  """{scene: [[clip path, ...] per source video and direction, in playing order]} of the training clips."""
  by_source = {}
  with open(os.path.join(footage, 'train.csv'), encoding='utf-8') as f:
    for path, label in csv.reader(f):
      source, _, way = os.path.basename(path)[:-len('.mp4')].rsplit('_', 2)  # NAME_NNN_{forward,backward}
      by_source.setdefault((label, source, way), []).append(os.path.join(footage, path))
  runs = {}
  for (label, _, way), paths in sorted(by_source.items()):
    runs.setdefault(label, []).append(sorted(paths, reverse=way == 'backward'))
  return runs


def read_clip(path: str) -> np.ndarray:
  """uint8 (T, H, W, 3) frames of one clip."""
  with av.open(path) as c:
    return np.stack([f.to_ndarray(format='rgb24') for f in c.decode(c.streams.video[0])])


def make_video(runs: dict, rng: np.random.Generator) -> tuple:
  """(uint8 (T, H, W, 3) frames, [(start_s, end_s, scene), ...]) of one long video of 3-5 scenes."""
  scenes, frames, segments, previous = sorted(runs), [], [], None
  for _ in range(rng.integers(SCENES_PER_VIDEO[0], SCENES_PER_VIDEO[1] + 1)):
    scene = rng.choice([s for s in scenes if s != previous])
    paths = runs[scene][rng.integers(len(runs[scene]))]
    n = min(len(paths), int(rng.integers(RUN_CLIPS[0], RUN_CLIPS[1] + 1)))
    first = int(rng.integers(len(paths) - n + 1))
    clip = np.concatenate([read_clip(p) for p in paths[first:first + n]])
    start = sum(len(f) for f in frames) / FPS
    segments.append((start, start + len(clip) / FPS, str(scene)))
    frames.append(clip)
    previous = scene
  return np.concatenate(frames), segments


def annotations(made: dict, scenes_json: str):
  """The made videos ('training') and the `scenes` video of `scenes_json` ('validation') in one Annotations."""
  from vvt.data import Annotations
  from vvt.data import VideoAnnotation
  from vvt.data import read_annotations
  scenes = read_annotations(scenes_json)
  names = scenes.labels
  videos = {vid: VideoAnnotation(duration, 'training', tuple((a, b, names.index(k)) for a, b, k in segments))
            for vid, (duration, segments) in made.items()}
  videos.update(scenes.videos)
  return Annotations(videos, names)


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('--footage', required=True, help='the folder of scripts/make_example_clips.py')
  p.add_argument('--out', required=True, help='output folder')
  p.add_argument('--videos', type=int, default=12, help='long videos to make (default 12)')
  p.add_argument('--seed', type=int, default=0)
  args = p.parse_args(argv)
  scenes_json = os.path.join(args.footage, 'long', 'scenes.json')
  for need in (os.path.join(args.footage, 'train.csv'), scenes_json):
    if not os.path.isfile(need):
      print(f'footage_untrimmed: {need} is missing: run scripts/make_example_clips.py --out {args.footage}',
            file=sys.stderr)
      return 2
  from vvt.data import write_activitynet
  runs, rng, made = training_runs(args.footage), np.random.default_rng(args.seed), {}
  os.makedirs(os.path.join(args.out, 'videos'), exist_ok=True)
  for i in range(args.videos):
    frames, segments = make_video(runs, rng)
    vid = f'footage_{i:04d}'
    make_example_clips.write_video(os.path.join(args.out, 'videos', f'{vid}.mp4'), frames, FPS)
    made[vid] = (len(frames) / FPS, segments)
  write_activitynet(os.path.join(args.out, 'annotations.json'), annotations(made, scenes_json))
  events = sum(len(s) for _, s in made.values())
  print(f'footage_untrimmed: {args.videos} videos, {events} scenes -> {args.out} (annotations.json with `scenes`)')
  return 0


if __name__ == '__main__':
  sys.exit(main())
