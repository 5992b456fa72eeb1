"""TimeSformer on HowTo100M long-term task classification (Bertasius et al. 2021, sec. 4.6, Table 8).

  --config configs/howto100m/timesformer_b.py       8 frames:  8.5 s a clip, 48 test clips on average (56.8)
  --config configs/howto100m/timesformer_b.py:32    32 frames: 34.1 s, 12 test clips on average (61.2)
  --config configs/howto100m/timesformer_b.py:64    64 frames: 68.3 s, 6 test clips on average (62.2)
  --config configs/howto100m/timesformer_b.py:96    96 frames: 102.4 s, 4 test clips on average (62.6)
  ARG ...,init=imagenet21k                          from ImageNet-21k, skipping Kinetics-400 (sec. 4.6: 56.0,
                                                    59.2, 60.2, 62.1)
HowTo100M's 1059 tasks with at least 100 videos, 85K training / 35K test videos of minutes (docs/data.md).
Frames "sampled at a frame rate of 1/32" (sec. 4.6) of the official code's 30-fps video: stride 1 over video
stored at 30/32 fps (`vvt data convert --fps 0.9375`), the only frames a clip reads (a clip of 8 frames covers
8 x 32 / 30 = 8.5 s, Table 8's "Single Clip Coverage"). "All models in this comparison are pretrained on
Kinetics-400 before finetuning on HowTo100M": `init=kinetics400` (the default) starts from the model of
kinetics400/timesformer_b.py exported by `vvt export` (its 8-row time table fits the 8-frame model only:
docs/recipes.md). Training: Appendix A's recipe, as kinetics400/timesformer_b.py.

Test protocol (sec. 4.6): "we sample as many non-overlapping temporal clips as needed to cover the full temporal
extent of a video ... Video-level classification is done by averaging the clip predictions", so the number of
clips varies per video (Table 8's "# Test Clips" is their average): `dataset.num_test_clips='all'` tiles each
video with ceil(length / span) clips of span num_frames x stride stored frames, starting a span apart (the last
completed by repeating the last frame), each with Appendix A's 3 crops and softmax averaging; the eval report
gives each video's view count. Sources: docs/recipes.md.
"""
from configs import common
from configs.kinetics400 import timesformer_b

FRAMES = (8, 32, 64, 96)  # Table 8's rows
RATE, FPS = 32, 30  # "a frame rate of 1/32" of 30-fps video (the official code's DATA.TARGET_FPS)
INITS = ('kinetics400', 'imagenet21k')


def get_config(arg=None):
  a = common.parse_arg(arg, frames=8, init='kinetics400')
  frames = a['frames']
  if frames not in FRAMES:
    raise ValueError(f'howto100m/timesformer_b.py: frames must be one of 8, 32, 64, 96, got {arg!r}')
  if a['init'] not in INITS:
    raise ValueError(f'config argument init={a["init"]!r} is not one of {", ".join(INITS)}')
  c = timesformer_b.get_config()  # Appendix A's recipe, ImageNet-21k init
  c.num_frames = frames  # the shared field: model and data read it
  c.dataset.fps, c.dataset.stride = FPS / RATE, 1
  c.dataset.num_test_clips = 'all'  # as many non-overlapping clips as cover each video
  if a['init'] == 'kinetics400':
    c.init_from = common.kinetics400_init('timesformer_b')
  return common.on_dataset(c, 1059, 'howto100m/train@1024', 'howto100m/test@512', 'test')
