"""Pieces shared by the config files: the paper-recipe builder, the synthetic recipe, argument parsing.

Every config file is `get_config(arg=None) -> ConfigDict` (big_vision style), loaded by `vvt` commands as
`--config FILE[:ARG]`; any field can then be changed with `--config.a.b=value`. The shared fields
(`num_frames`, `image_size`, `num_classes`, `class_names`) sit at the top of the run config and the
model and the data read them (`vvt.config.schema.link_shared`), so they are stated once. A field is named by its
dotted path, as on the command line: `{'optimizer.name': 'sgd'}`.
"""
import ml_collections

from vvt.config import dataset as dataset_config
from vvt.config import paths
from vvt.config import schema
from vvt.models import config as model_config
from vvt.models import schemes


def parse_arg(arg, **defaults_):
  """'divided,data_dir=x' -> {'scheme'...}: big_vision-style `FILE:ARG` parsing.

  `arg` is a comma-separated list of `key=value` items; a bare item sets the first key of
  `defaults_`. Values take the type of their default (int, float, bool, str).
  """
  out = dict(defaults_)
  first = next(iter(defaults_), None)
  for item in filter(None, (arg or '').split(',')):
    key, eq, value = item.partition('=')
    if not eq:
      key, value = first, item
    key = key.strip()
    if key not in defaults_:
      raise ValueError(f'config argument {key!r} is not one of {", ".join(defaults_)}')
    default = defaults_[key]
    if isinstance(default, bool):
      value = value.lower() in ('1', 'true', 'yes')
    elif isinstance(default, (int, float)) and default is not None:
      value = type(default)(value)
    out[key] = value
  return out


def paper_config(model: dict, dataset: dict, train: dict | None = None,
                 class_names=None) -> ml_collections.ConfigDict:
  """A paper-recipe run config: model fields, dataset fields, then training fields.

  `model` holds `vvt.models.get_config` arguments (its num_frames, image_size and num_classes
  become the run's shared fields); `dataset` overrides `vvt.config.dataset.get_config()`;
  `train` maps dotted field paths to values, e.g. `{'batch_size': 64, 'optimizer.name': 'sgd'}`.
  """
  d = dataset_config.get_config()
  for k, v in dataset.items():
    if k not in d:
      raise ValueError(f'unknown dataset config field {k!r}')
    if k in schema.SHARED_FIELDS:
      raise ValueError(f'dataset.{k} is a shared field: give it once, in the model fields')
    d[k] = v
  c = schema.make_config(model_config.get_config(**model), d, class_names)
  for path, value in (train or {}).items():
    paths.set_value(c, path, value)
  return c


def init_from(checkpoint: str, **options) -> ml_collections.ConfigDict:
  """An `init_from` section (fields: vvt/convert/init_options.py)."""
  return schema.init_from_config(checkpoint=checkpoint, **options)


# ----------------------------------------------------------------------------- paper recipes
# Each paper config states its recipe; docs/recipes.md gives every value's source (paper section, or the
# official code / Scenic config it was taken from where the paper is silent) and why ours differs where it does.

# The original ViT release's ImageNet-21k checkpoints (Dosovitskiy et al.; gs://vit_models/imagenet21k/), the
# papers' start; AugReg's (Steiner et al.) load too but start stronger than the papers did: docs/recipes.md.
IMAGENET21K = 'imagenet21k/ViT-{size}_16.npz'
KINETICS400 = 'kinetics400/{name}.safetensors'  # Kinetics-400 vvt models, exported by `vvt export`
# ViViT's "larger JFT [57] dataset" start (sec. 4.1; Table 5's "(JFT)" rows): JFT-300M ViTs were never released,
# so this names the file a user who has one gives; without it, ImageNet-21k (docs/recipes.md).
JFT = 'jft/ViT-{size}_16.npz'
# TimeSformer's "pre-trained on ImageNet-1K" start (Table 7): the official code's default image model, timm's
# `vit_base_patch16_224` (`jx_vit_base_p16_224-80ecf9dd.pth`, the original ViT release's ImageNet-21k model
# fine-tuned on ImageNet-1k: gs://vit_models/imagenet21k+imagenet2012/ViT-B_16-224.npz).
IMAGENET1K = 'imagenet21k+imagenet2012/ViT-{size}_16-224.npz'


def imagenet21k_init(size: str, **options) -> ml_collections.ConfigDict:
  """`init_from` the ImageNet-21k ViT-{size}/16 (the papers' image initialisation); options: init_options."""
  return ml_collections.ConfigDict(dict(path=IMAGENET21K.format(size=size), format='big_vision', **options))


def jft_init(size: str, **options) -> ml_collections.ConfigDict:
  """`init_from` a JFT-300M ViT-{size}/16 (ViViT Table 5's "(JFT)" rows; not public: `JFT`)."""
  return ml_collections.ConfigDict(dict(path=JFT.format(size=size), format='big_vision', **options))


def imagenet1k_init(size: str, **options) -> ml_collections.ConfigDict:
  """`init_from` the ImageNet-1k ViT-{size}/16 of TimeSformer's code (Table 7's start: `IMAGENET1K`)."""
  return ml_collections.ConfigDict(dict(path=IMAGENET1K.format(size=size), format='big_vision', **options))


def kinetics400_init(name: str, **options) -> ml_collections.ConfigDict:
  """`init_from` the vvt model trained by configs/kinetics400/{name}.py (ViViT Table 3, "Kinetics 400
  initialisation"): every parameter but the classifier, loaded by name (init_from format 'vvt'). Make it with

    vvt train --config configs/kinetics400/{name}.py --workdir runs/k400_{name}
    vvt export --workdir runs/k400_{name} --output kinetics400/{name}.safetensors
  """
  return ml_collections.ConfigDict(dict(path=KINETICS400.format(name=name), format='vvt', **options))


# ViViT's image start (sec. 3.4, 4.1): "a ViT image model trained either on ImageNet-21K (unless otherwise
# specified) or the larger JFT dataset", tubelets from the image filter at their central frame (eq. 9), the 2D
# positional table repeated over time. A ViViT config's `init=` argument picks the dataset.
VIVIT_INITS = {'imagenet21k': imagenet21k_init, 'jft': jft_init}


def vivit_image_init(name: str, size: str) -> ml_collections.ConfigDict:
  """ViViT's `init_from` of the ViT-{size}/16 trained on `name` ('imagenet21k' or 'jft', `VIVIT_INITS`)."""
  if name not in VIVIT_INITS:
    raise ValueError(f'config argument init={name!r} is not one of {", ".join(VIVIT_INITS)}')
  return VIVIT_INITS[name](size, tubelet_init='central_frame', positional_embedding='repeat')


# ViViT's test views (dataset fields): "Unless otherwise specified, we use a total of 4 views per video" (sec. 4.1,
# the ablations of sec. 4.2); "we take 3 spatial crops (left, centre and right) ... for each temporal view" for
# the comparison to the state of the art (sec. 4.3, Table 5). A ViViT config's `views=` argument picks one.
VIVIT_VIEWS = {'ablation': (4, 1), 'sota': (4, 3)}


def vivit_views(name: str) -> dict:
  """The dataset fields of ViViT's test views `name` ('ablation': 4 x 1, 'sota': 4 x 3)."""
  if name not in VIVIT_VIEWS:
    raise ValueError(f'config argument views={name!r} is not one of {", ".join(VIVIT_VIEWS)}')
  clips, crops = VIVIT_VIEWS[name]
  return dict(num_test_clips=clips, num_spatial_crops=crops)


def on_dataset(c: ml_collections.ConfigDict, num_classes, train_files: str, eval_files: str,
               split: str = 'test') -> ml_collections.ConfigDict:
  """Config `c`'s recipe on another dataset: its classes (the shared field; an int, or head -> classes), its
  record files and the split it is evaluated on. Returns `c`, changed."""
  c.num_classes = num_classes
  c.dataset.train_files, c.dataset.eval_files = train_files, eval_files
  c.eval.split = split
  return c


# TimeSformer's schemes (Table 1) as its authors build them, beyond `model.attention`: the space-only model
# has no temporal embedding (TimeSformer code `lib/models/vit.py`: `attention_type == 'space_only'` adds no
# `time_embed`; Hugging Face's TimesformerEmbeddings likewise), so it cannot tell the frames' order apart.
TIMESFORMER_SCHEME_FIELDS = {'space': {'positional_embedding': 'spatial'}}


def timesformer_scheme(attention: str) -> dict:
  """Model fields of TimeSformer's scheme `attention` (Table 1): the attention and what its authors change."""
  return {'attention': attention, **TIMESFORMER_SCHEME_FIELDS.get(attention, {})}


def scale_jitter(short_side: int, low: float, high: float) -> dict:
  """Training scale jitter as dataset fields: the shorter side resized to short_side x U[low, high] (Scenic's
  jitter_scale of its min_resize; X-ViT's "random scaling 0.9x to 1.3x"), then the random crop."""
  return dict(train_min_resize=round(short_side * low), train_max_resize=round(short_side * high))


# The miniature recipe of the synthetic motion data (vvt/data/writing/synthetic.py): every scheme of the scheme table on
# 2 CPU cores in minutes, in its paper's family (`vvt.models.schemes`), with the fields a scheme needs beyond it.
SYNTHETIC_FIELDS = {
    'factorised_encoder': dict(temporal_layers=2),
    'space_then_time': dict(temporal_layers=2),
    'space': dict(positional_embedding='spatial'),
    # No time table for X-ViT either: its mixing (t_w >= 1) is what orders the frames, so t_w = 0 is
    # space-only attention (order-free with 1-frame patches, TA head included); with the sinusoidal table
    # the tokens are time-stamped and t_w = 0 could learn order without any temporal mixing.
    'space_time_mixing': dict(positional_embedding='spatial'),
}
SYNTHETIC_SCHEMES = {name: dict(family=scheme.families[0], **SYNTHETIC_FIELDS.get(name, {}))
                     for name, scheme in schemes.SCHEME_TABLE.items()}


def synthetic_config(attention: str, data_dir: str = schema.SYNTHETIC_DIR,
                     **model_overrides) -> ml_collections.ConfigDict:
  """A ~0.2M-parameter model of one attention scheme on the synthetic motion dataset.

  2 layers, width 64, 2x8x8 tubelets, sinusoidal positions, GAP, 8 frames of 32^2 sampled at stride 2
  from the 16 written (a clip covers the whole video: the class is the order of the frames), AdamW 1e-3
  cosine, batch 8, 20 epochs. `num_classes` and `class_names` are left unset: the loader takes them from the
  data the config is pointed at (`vvt.config.labels`: the synthetic data's manifest, or that of any
  `vvt data convert` output given as `--config.dataset.train_files=...`).
  """
  if attention not in SYNTHETIC_SCHEMES:
    raise ValueError(f'unknown scheme {attention!r}; one of {", ".join(SYNTHETIC_SCHEMES)}')
  num_classes = 0  # unset: num_classes and class_names come from the data's manifest (vvt.config.labels)
  model = dict(attention=attention, variant='Ti/16', num_frames=8, image_size=32,
               num_classes=num_classes, hidden_size=64, num_layers=2, num_heads=4, mlp_dim=128,
               # 2x8x8 tubelets (ViViT's tokeniser) for every scheme: with 1-frame patches
               # no scheme left the chance plateau of this motion-only data within CPU
               # minutes; a tubelet sees the local motion between two frames.
               tubelet=(2, 8, 8),
               # A fixed sine-cosine table tells every token its frame from step 0 (the
               # papers' learned time table starts at zero: a symmetric start when
               # training from scratch); GAP works for every scheme (Models 3/4 need it).
               positional_embedding='sinusoidal', classifier='gap')
  model.update(SYNTHETIC_SCHEMES[attention])
  model.update(model_overrides)
  return paper_config(
      model=model,
      dataset=dict(train_files=f'{data_dir}/train-*-of-*.tfrecord',
                   eval_files=f'{data_dir}/test-*-of-*.tfrecord',
                   stride=2, train_min_resize=34, train_max_resize=40, eval_resize=36,
                   num_test_clips=1, num_spatial_crops=3, shuffle_buffer=256),
      # Small batches: ~5x more optimiser steps per CPU-second than batch 32 here.
      train={'batch_size': 8, 'num_epochs': 20.0,
             'optimizer.name': 'adamw', 'optimizer.weight_decay': 0.05, 'optimizer.grad_clip_norm': 1.0,
             'schedule.name': 'cosine', 'schedule.base_lr': 1e-3, 'schedule.warmup_epochs': 1.0,
             'eval.batch_size': 64, 'checkpoint.every_steps': 500, 'checkpoint.keep': 2, 'log_every_steps': 250})


# VideoMAE ViT-B pretraining per dataset: (frame stride, epochs of the released model, train files, eval files)
VIDEOMAE = {'kinetics400': (4, 1600, 'kinetics400/train@1024', 'kinetics400/validation@64'),
            'ssv2': (2, 2400, 'ssv2/train@256', 'ssv2/validation@64')}


def videomae_recipe(dataset: str, arg=None) -> ml_collections.ConfigDict:
  """The VideoMAE ViT-B pretraining config of `dataset` (VIDEOMAE); ARG: the epochs (default: the released
  model's; '800': the paper's ablation schedule)."""
  stride, epochs, train_files, eval_files = VIDEOMAE[dataset]
  return videomae_pretraining(stride=stride, epochs=float(arg or epochs), train_files=train_files,
                              eval_files=eval_files)


def videomae_pretraining(*, stride: int, epochs: float, train_files: str, eval_files: str,
                         sampling: str = 'stride') -> ml_collections.ConfigDict:
  """VideoMAE ViT-B/16 pretraining (task.name='mae'; Tong et al. 2022): 16 frames of 224^2, 2x16x16 tubelets,
  joint space-time attention with a fixed sine-cosine table, q and v biases, no classes (a one-output head never
  read); 90% tube masking, a 4-block decoder of width 384 with 6 heads, per-tubelet normalised pixel targets.
  AdamW (0.9, 0.95), weight decay 0.05, batch 2048 (64 GPUs x 32), lr 1.5e-4 x 2048 / 256 = 1.2e-3, cosine to
  8e-5 (1e-5 x 2048 / 256) after 40 warmup epochs (the official scripts' settings: docs/recipes.md)."""
  c = paper_config(
      model=dict(family='vivit', attention='spatiotemporal', variant='B/16x2', num_frames=16, image_size=224,
                 num_classes=0, tubelet=(2, 16, 16), positional_embedding='sinusoidal', classifier='gap',
                 pooling='first_token', key_bias=False, layer_norm_eps=1e-6),
      dataset=dict(stride=stride, sampling=sampling, train_files=train_files, eval_files=eval_files,
                   train_min_resize=256, train_max_resize=320, eval_resize=224, num_test_clips=1,
                   num_spatial_crops=1, normalization='imagenet'),
      train={'batch_size': 2048, 'num_epochs': float(epochs), 'task.name': 'mae',
             'optimizer.name': 'adamw', 'optimizer.b1': 0.9, 'optimizer.b2': 0.95, 'optimizer.weight_decay': 0.05,
             'schedule.name': 'cosine', 'schedule.base_lr': 1.2e-3, 'schedule.end_lr': 8e-5,
             'schedule.warmup_epochs': 40.0, 'eval.batch_size': 64, 'checkpoint.every_steps': 2000})
  c.init_from = None
  return c
