"""A very small config on a tiny synthetic set, for the tests.

CLI: --config tests/train/tiny_config.py:DATA_DIR[,ATTENTION]
"""
from configs import common
from vvt.config import labels
from vvt.config import schema


def get_config(arg=None):
  data_dir, _, attention = (arg or '').partition(',')
  c = common.synthetic_config(attention or 'divided', data_dir or 'data/synthetic',
                              hidden_size=32, num_layers=2, num_heads=2, mlp_dim=64)
  c.batch_size = 8
  c.num_train_steps = 12
  c.schedule.warmup_steps = 2
  c.eval.batch_size = 16
  c.checkpoint.every_steps = 4
  c.checkpoint.keep = 10
  c.log_every_steps = 4
  c.dataset.shuffle_buffer = 16
  labels.resolve(c)  # the data's classes, as the loader takes them (also when the config is built directly)
  if not c.num_classes:  # no data (a model built without it): the synthetic data's classes
    c.num_classes, c.class_names = schema.SYNTHETIC['num_classes'], schema.SYNTHETIC_CLASS_NAMES
  return c
