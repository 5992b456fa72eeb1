"""Pretrain -> probe in miniature: does a tiny V-JEPA pretraining (`task.name='jepa'`) on unlabelled synthetic motion
clips give a backbone an attentive probe reads the motion classes from better than from the same backbone at its
random initialisation? Two sweeps, the second reading the first's runs:

  vvt sweep --config experiments/jepa_probe.py:pretrain --workdir runs/jepa_pre
  vvt sweep --config experiments/jepa_probe.py:probe,pretrained=runs/jepa_pre --workdir runs/jepa_probe

`pretrain`: per seed, a V-JEPA 2-shaped backbone (joint attention, 3D RoPE, 2 blocks of width 64, 2x8x8 tubelets,
8 frames of 32^2: a 4 x 4 x 4 token grid) pretrained by latent prediction (predictor: 1 block of width 32; the
masks of V-JEPA's two sets; the labels are never read), and the same backbone not trained (`start=random`: one
step at learning rate 1e-12: its initial weights). `probe`: an attentive probe (V-JEPA 2's, one query) on each frozen
backbone, trained and evaluated on the labels. Results (mean +- spread over the seeds): docs/tasks.md. `mini`, as
every study takes it, is the pretrain stage (the study is in miniature already).
"""
from configs import common as configs_common
from experiments import common
from experiments import pretrain_probe
from vvt.config import schema

STARTS = {'jepa': {}, 'random': pretrain_probe.RANDOM}
PRETRAIN_STEPS = 300
PROBE_STEPS = 200


def _parse(arg) -> dict:
  a = configs_common.parse_arg(arg, stage='pretrain', pretrained='', seeds=common.MINI_SEEDS,
                               data_dir=schema.SYNTHETIC_DIR)
  if a['stage'] == 'mini':  # every experiment's miniature; this study is one already: its first stage
    a['stage'] = 'pretrain'
  if a['stage'] not in ('pretrain', 'probe'):
    raise ValueError(f'stage {a["stage"]!r} is not one of pretrain, probe')
  if a['stage'] == 'probe' and not a['pretrained']:
    raise ValueError('stage probe needs pretrained=DIR: the workdir of the pretrain sweep')
  return a


def get_config(arg=None):
  a = _parse(arg)
  c = configs_common.synthetic_config('spatiotemporal', a['data_dir'], positional_embedding='rope',
                                      classifier='gap')
  c.batch_size, c.log_every_steps, c.checkpoint.every_steps = 16, 100, 1000
  c.schedule.name, c.schedule.warmup_steps = 'cosine', 30
  if a['stage'] == 'pretrain':
    c.task.name, c.num_train_steps, c.schedule.base_lr = 'jepa', PRETRAIN_STEPS, 1e-3
    c.task.jepa.pred_depth, c.task.jepa.pred_width, c.task.jepa.pred_heads = 1, 32, 2
    c.task.jepa.momentum = (0.99, 1.0)
  else:
    c.task.name, c.num_train_steps, c.schedule.base_lr = 'probe', PROBE_STEPS, 1e-3
    c.task.probe.head, c.task.probe.num_heads = 'attentive', 4
    c.task.probe.lrs, c.task.probe.weight_decays = (1e-3,), (0.01,)
  return c


def get_sweep(arg=None):
  a = _parse(arg)
  return pretrain_probe.trials(a['stage'], STARTS, a['pretrained'], a['seeds'])
