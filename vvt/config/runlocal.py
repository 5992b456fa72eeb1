"""`runlocal` (as in big_vision): any run config as a few-minute CPU run on the synthetic motion data."""
import os

from vvt.config import paths
from vvt.config import schema


def apply(config, data_dir: str = schema.SYNTHETIC_DIR):
  """Shrinks any run config to a few-minute CPU run on the synthetic motion data (big_vision's
  `runlocal`): same family, scheme, classifier and head layout; a 2-layer width-64 model on
  8 frames of 32^2; 200 steps of batch 8; no init checkpoint. The classes are left unset: the config loader takes
  the data's (`vvt.config.labels`), so `--config.dataset.train_files=...` points it at other data as it is.
  Returns `config`, changed."""
  config.num_frames, config.image_size = 8, 32
  _synthetic_labels(config)
  _tiny_model(config.model)
  _tiny_predictor(config.task)
  _synthetic_data(config.dataset, data_dir)
  config.batch_size = 8
  config.num_train_steps = 200
  config.optimizer.accumulation_steps = 1
  config.schedule.warmup_steps = 20
  config.schedule.decay_epochs = ()
  config.eval.batch_size = 24
  config.eval.split = 'test'
  config.checkpoint.every_steps = 100
  config.log_every_steps = 50
  config.init_from = None
  config.runlocal = False  # applied
  return config


def _synthetic_labels(config):
  """The classes are left to the data (`vvt.config.labels`: the synthetic data's, or those of the data the later
  overrides point at); multi-head data: every head reads the synthetic data's one label."""
  config.class_names = None
  if hasattr(config.num_classes, 'items'):
    heads = list(paths.plain(config.num_classes))
    config.num_classes = {h: schema.SYNTHETIC['num_classes'] for h in heads}
    config.dataset.label_keys = {h: 'clip/label/index' for h in heads}
  else:
    config.num_classes = 0  # unset: the data's
    config.dataset.label_keys = ('clip/label/index',)


def _tiny_model(m):
  """A 2-layer width-64 model of the same family, scheme, classifier and heads; 8x8 patches (2x8x8 tubelets
  where the model has temporal tubelets)."""
  tt = 2 if (m.get('tubelet') or (1,))[0] > 1 or 'x' in str(m.get('variant', '')).split('/')[-1] else 1
  m.variant = 'Ti/8' if tt == 1 else 'Ti/8x2'
  m.tubelet = (tt, 8, 8)
  m.hidden_size, m.num_layers, m.num_heads, m.mlp_dim = 64, 2, 4, 128
  for f in ('temporal_num_heads', 'temporal_mlp_dim', 'representation_size'):
    if f in m:
      m[f] = None
  if 'temporal_layers' in m:
    m.temporal_layers = min(int(m.temporal_layers), 1)
  if 'mixing' in m:  # one segment of the 8 frames (X-ViT's paper configs mix within 8 or 16)
    m.mixing.num_segments = None
  if 'time_embedding_rows' in m:
    m.time_embedding_rows = None
  if 'temporal_head' in m:
    m.temporal_head.num_heads = None
    m.temporal_head.mlp_dim = None
  m.dtype = 'float32'


def _synthetic_data(d, data_dir):
  """The synthetic TFRecords in `data_dir`, resized for 32^2 crops."""
  d.name = 'dmvr'
  d.data_dir = ''
  d.train_files = os.path.join(data_dir, 'train-*-of-*.tfrecord')
  d.eval_files = os.path.join(data_dir, 'test-*-of-*.tfrecord')
  d.stride, d.sampling = 2, 'stride'
  d.train_min_resize, d.train_max_resize, d.eval_resize = 34, 40, 36
  d.shuffle_buffer = 64


def _tiny_predictor(section):
  """A jepa run's predictor (the `task` section's `jepa`) as small as the model: 1 block of width 32, 2 heads."""
  if 'jepa' in section:
    section.jepa.pred_depth, section.jepa.pred_width, section.jepa.pred_heads = 1, 32, 2
