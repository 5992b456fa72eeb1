"""The `dataset` section of a run config: every field the input pipeline reads, with its default.

`schema.make_config(model, get_config())` puts it in a run config, and `configs/common.paper_config` sets a config
file's dataset fields on it. Every field is documented in docs/data.md; the comment beside each field here is the
short version. The choices of the choice fields are the pipeline's own (`vvt.data.choices`). `scaled_sizes`: the
resize fields for another crop size, at the same ratios (`vvt convert` writes them for the converted frame size).
"""
import ml_collections

from vvt.config.schema import flexible
from vvt.models import frame_size


def get_config() -> ml_collections.ConfigDict:
  """Returns the dataset ConfigDict with its defaults (Kinetics-like)."""
  c = ml_collections.ConfigDict()
  # --- where the data is ----------------------------------------------------
  c.name = 'dmvr'                 # 'dmvr' (TFRecords of SequenceExample) | 'tfds'
  c.data_dir = ''                 # base dir for relative file patterns; TFDS data_dir
  c.train_files = ''              # glob(s) or sharded name 'dir/train.tfrecord@16'
  c.eval_files = ''               # same, used for every split other than 'train'
  c.tfds_name = ''                # e.g. 'ucf101/ucf101_1_256' when name == 'tfds'
  c.tfds_train_split = 'train'    # TFDS split read by make_train_iterator
  c.tfds_video_key = 'video'      # TFDS feature holding the frames
  c.tfds_label_keys = flexible(('label',))  # like label_keys, for TFDS features
  # --- record format (DMVR) ---------------------------------------------------
  c.frames_key = 'image/encoded'  # feature list of JPEG strings, one per frame
  # One key -> batch field 'label'; a dict head->key -> 'label/<head>' per head.
  c.label_keys = flexible(('clip/label/index',))
  c.video_id_key = 'video_id'     # context bytes feature (optional in records)
  c.num_classes = flexible(0)     # int, or dict head->int; must be set (> 0)
  c.multi_label = False           # several label values per record -> a multi-hot 'label' (C,) (task multilabel)
  c.captions = 0                  # captions read per video ('caption/string', tasks retrieval): 0 = none
  c.tokenizer = ''                # folder of the texts' tokenizer.json ('' = the checkpoint's: vvt.train.texts)
  # --- temporal sampling ------------------------------------------------------
  c.num_frames = 16               # frames per clip
  c.stride = 2                    # frame step within a clip ('stride' sampling)
  c.sampling = 'stride'           # 'stride' (rate) | 'segment' (TSN: 1 frame per segment)
  c.short_video_policy = 'loop'   # 'loop' (wrap around) | 'pad' (repeat last frame)
  c.fps = flexible(None)          # frame rate `stride` counts at (None = unstated); other stored rates are mapped
  c.num_test_clips = flexible(1)  # eval clips spread uniformly over each video, or 'all': tile each whole video
  # --- spatial ---------------------------------------------------------------
  c.image_size = 224              # the crop fed to the model: S (square) or (H, W), the top-level's
  c.train_min_resize = 256        # train: shorter side resized to U[min, max]
  c.train_max_resize = 320
  c.eval_resize = 256             # eval: shorter side resized to this
  c.num_spatial_crops = 1         # eval: 1 (centre) | 3 (left/centre/right)
  # --- augmentation (train only) ------------------------------------------------
  c.horizontal_flip = True        # switch off for direction-sensitive labels
  c.label_aware_flip = False      # a flipped clip swaps the labels of left/right class pairs
  c.color_jitter = 0.0            # strength in [0, 1]; 0 = off
  c.color_jitter_prob = 0.8       # probability a clip is jittered
  c.randaugment = flexible(None)  # None = off, or {'num_layers': 2, 'magnitude': 9}
  c.autoaugment = flexible(None)  # None = off, or a policy: 'imagenet' (Cubuk et al. 2018)
  c.random_erasing = 0.0          # probability of erasing one box per clip
  c.repeated_augmentation = 1     # N: each video N times per batch, independently augmented (1 = off)
  c.normalization = 'imagenet'    # 'imagenet' (mean/std) | 'zero_centre' ([-1, 1])
  # --- reading ------------------------------------------------------------------
  c.shuffle_buffer = 128          # records (whole videos) in the shuffle buffer
  c.cache = False                 # keep the raw records in memory after epoch 1
  c.cycle_length = 8              # files read concurrently (interleave)
  c.prefetch = 2                  # batches prefetched
  c.on_error = 'raise'            # bad record: 'raise' (name file+record) | 'skip' (count)
  c.seed = 0                      # data seed (combined with the iterator's seed)
  return c


# The fields in pixels that go with the crop size `image_size`: the shorter side a frame is resized to.
SIZE_FIELDS = ('train_min_resize', 'train_max_resize', 'eval_resize')


def scaled_sizes(d, image_size, new_size) -> dict:
  """{field: value} of SIZE_FIELDS for crops of `new_size` instead of `image_size` (each an int or (H, W)), each
  keeping its ratio to the crop's longer side (a 256-px shorter side for 224-px crops -> 73 for 64-px crops), and
  never smaller than that side (the crop fits whichever side of the frame is the shorter)."""
  old, new = max(frame_size.parse(image_size)), max(frame_size.parse(new_size))
  return {f: max(new, round(d[f] * new / old)) for f in SIZE_FIELDS}
