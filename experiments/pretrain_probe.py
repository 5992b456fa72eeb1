"""Pretrain -> probe in miniature: does pretraining without labels (`task.name='mae'` or `'jepa'`) give a backbone a
probe reads the classes from better than from the same backbone at its random initialisation? Two sweeps, the
second reading the first's runs:

  vvt sweep --config experiments/pretrain_probe.py:pretrain --workdir runs/mae_pre
  vvt sweep --config experiments/pretrain_probe.py:probe,pretrained=runs/mae_pre --workdir runs/mae_probe
  vvt sweep --config experiments/pretrain_probe.py:probe,head=linear,pretrained=runs/mae_pre --workdir runs/probe_linear
  vvt sweep --config experiments/pretrain_probe.py:probe,shards=1,pretrained=runs/mae_pre --workdir runs/probe_few
  vvt sweep --config experiments/pretrain_probe.py:pretrain,data=footage --workdir runs/mae_pre_footage
  vvt sweep --config experiments/pretrain_probe.py:probe,data=footage_direction,pretrained=runs/mae_pre_footage \
      --workdir runs/probe_direction

ARG: `STAGE[,objective=mae|jepa][,data=synthetic|footage|footage_direction][,pretrained=DIR][,seeds=N]`
`[,data_dir=DIR][,steps=N][,probe_steps=N][,head=attentive|linear][,shards=N][,tubelet=T][,mask_ratio=R]`
`[,depth=N][,width=W][,layer=L][,masking=tube|random][,stride=S]`.
`pretrain`: per seed, the objective's run (the labels are never read) and the same backbone not trained
(`start=random`: one step of the same run at learning rate 1e-12: its initial weights, the pretrained run's start).
`probe`: a probe on each frozen backbone (`head=attentive`, the default: V-JEPA 2's attentive probe, one query;
`head=linear`: a linear layer on the mean of the last tokens; a grid of learning rates), trained and evaluated on
the labels; pretrained=DIR is the pretrain sweep's workdir, with the same objective, data, seeds and tubelets.
`shards=N`: the probe trains on the first N training shards only (fewer labels: 256 synthetic clips, or 24
footage clips, a shard; 0, the default: all). `tubelet=T`: T x 8 x 8 tubelets (default 2; 1: per-frame patches,
so a token holds no motion); `mask_ratio=R`: the MAE's mask ratio (default 0.75); `masking=random`: the MAE
masks each token on its own (`task.mae.masking`; default tube: the same spatial positions in every frame).
`depth=N`, `width=W`: the backbone's blocks and width (default 2 and 64; 4 heads, MLP 2W), the same in both
stages, so both arms share it; `layer=L`: the probes read block L's tokens (through the final norm,
`task.probe.layers`; default -1: the last block's, the backbone's own features). `stride=S`: the frame stride of
the 8 frames read (default 2, of 16-frame clips; 1 for 8-frame clips: `make_example_clips.py --frames 8`). `mini`,
as every study takes it, is the pretrain stage (the study is in miniature).

The backbone (both objectives): joint space-time attention (ViViT Model 1), 2 blocks of width 64 (`depth`,
`width`), 2x8x8 tubelets, 8 frames of 32^2 (a 4 x 4 x 4 token grid), the synthetic recipe's crops
(configs/common.py: synthetic_config).
`mae`: VideoMAE's tube masking at ratio 0.75 (16 spatial positions: 4 stay visible), a 1-block decoder of width
64, the loss on the raw pixels (`norm_pix_loss=False`: on this data a tubelet's standardised pixels are mostly its
background noise, which nothing predicts). `jepa`: a V-JEPA 2-shaped backbone (3D RoPE), a 1-block predictor
of width 32, V-JEPA's two mask sets. `data=synthetic`: `vvt data synthetic` (DIR default data/synthetic; any other
writing of it, e.g. `--object-scale 2`'s larger object, with `data_dir=DIR`);
`data=footage`: the README's real footage (scripts/make_example_clips.py, `vvt data convert` into DIR/train and
DIR/test; DIR default data/footage): its 48 training clips, labels unread, for pretraining; the scenes for the
probe. `data=footage_direction`: the same clips labelled forward / backward (`make_example_clips.py --label
direction`; DIR default data/footage_direction): a label no colour gives away; its training clips are the
footage's, so a footage pretraining is its backbone. Results: docs/tasks.md ("From pretraining to a probe").
"""
from configs import common as configs_common
from experiments import common
from vvt.config import schema
from vvt.studies import sweep
from vvt.tasks import mae_options

OBJECTIVES = ('mae', 'jepa')
DATA = {'synthetic': schema.SYNTHETIC_DIR, 'footage': 'data/footage', 'footage_direction': 'data/footage_direction'}
TRAIN_SHARDS = {'synthetic': 8, 'footage': 2, 'footage_direction': 2}  # as `vvt data synthetic` / the README write
RANDOM = {'num_train_steps': 1, 'schedule.base_lr': 1e-12, 'schedule.warmup_steps': 0}
STEPS = {'mae': 1000, 'jepa': 1000}  # pretraining steps of batch 16
PROBE_STEPS = 500
PROBE_LRS = (1e-3, 3e-3, 1e-2)
HEADS = ('attentive', 'linear')


def _parse(arg) -> dict:
  a = configs_common.parse_arg(arg, stage='pretrain', objective='mae', data='synthetic', pretrained='',
                               seeds=common.MINI_SEEDS, data_dir='', steps=0, probe_steps=PROBE_STEPS,
                               head='attentive', shards=0, tubelet=2, mask_ratio=0.75,
                               depth=2, width=64, layer=-1, masking='tube', stride=2)
  if a['stage'] == 'mini':  # every experiment's miniature; this study is one already: its first stage
    a['stage'] = 'pretrain'
  choices_of = {'stage': ('pretrain', 'probe'), 'objective': OBJECTIVES, 'data': tuple(DATA), 'head': HEADS,
                'masking': mae_options.MASKINGS}
  for key, choices in choices_of.items():
    if a[key] not in choices:
      raise ValueError(f'{key} {a[key]!r} is not one of {", ".join(choices)}')
  if a['stage'] == 'probe' and not a['pretrained']:
    raise ValueError('stage probe needs pretrained=DIR: the workdir of the pretrain sweep')
  if not 0 <= a['shards'] <= TRAIN_SHARDS[a['data']]:
    raise ValueError(f'shards={a["shards"]}: {a["data"]} has {TRAIN_SHARDS[a["data"]]} training shards')
  if a['depth'] < 1 or a['width'] < 4 or a['width'] % 4:
    raise ValueError(f'depth={a["depth"]}, width={a["width"]}: a backbone has >= 1 block and a width of 4 heads')
  if a['stride'] < 1:
    raise ValueError(f'stride={a["stride"]}: frames are read at a stride >= 1')
  if not -a['depth'] <= a['layer'] < a['depth']:
    raise ValueError(f'layer={a["layer"]}: the backbone has blocks 0..{a["depth"] - 1} (or -1 for the last)')
  a['data_dir'] = a['data_dir'] or DATA[a['data']]
  a['steps'] = a['steps'] or STEPS[a['objective']]
  return a


def _base(a: dict):
  """The synthetic recipe's joint-attention miniature on the study's data."""
  positions = 'rope' if a['objective'] == 'jepa' else 'sinusoidal'
  c = configs_common.synthetic_config('spatiotemporal', a['data_dir'], positional_embedding=positions,
                                      classifier='gap', num_layers=a['depth'], hidden_size=a['width'],
                                      mlp_dim=2 * a['width'])
  if a['data'] != 'synthetic':
    c.dataset.eval_files = f'{a["data_dir"]}/test.tfrecord@1'
  c.dataset.train_files = _train_files(a)
  c.model.tubelet, c.dataset.stride = (a['tubelet'], 8, 8), a['stride']
  c.batch_size, c.log_every_steps, c.checkpoint.every_steps = 16, 100, 5000
  c.schedule.name, c.schedule.warmup_epochs, c.schedule.warmup_steps = 'cosine', 0.0, 50
  return c


def _train_files(a: dict) -> str:
  """The training files: all the data's shards, or its first `shards` (the probe's fewer labels)."""
  total, d = TRAIN_SHARDS[a['data']], a['data_dir']
  if a['data'] == 'synthetic':
    names = [f'{d}/train-{i:05d}-of-{total:05d}.tfrecord' for i in range(a['shards'])]
    return ','.join(names) or f'{d}/train-*-of-*.tfrecord'
  names = [f'{d}/train.tfrecord-{i:05d}-of-{total:05d}' for i in range(a['shards'])]
  return ','.join(names) or f'{d}/train.tfrecord@{total}'


def _pretraining(c, a: dict) -> None:
  c.task.name, c.num_train_steps, c.schedule.base_lr = a['objective'], a['steps'], 1e-3
  if a['objective'] == 'mae':
    c.task.mae.mask_ratio, c.task.mae.norm_pix_loss, c.task.mae.masking = a['mask_ratio'], False, a['masking']
    c.task.mae.decoder_depth, c.task.mae.decoder_width, c.task.mae.decoder_heads = 1, 64, 4
  else:
    c.task.jepa.pred_depth, c.task.jepa.pred_width, c.task.jepa.pred_heads = 1, 32, 2
    c.task.jepa.momentum = (0.99, 1.0)


def get_config(arg=None):
  a = _parse(arg)
  c = _base(a)
  if a['stage'] == 'pretrain':
    _pretraining(c, a)
  else:
    c.task.name, c.num_train_steps, c.schedule.base_lr = 'probe', a['probe_steps'], 1e-3
    c.task.probe.head, c.task.probe.num_heads = a['head'], 4
    c.task.probe.lrs, c.task.probe.weight_decays = PROBE_LRS, (0.01,)
    if a['layer'] not in (-1, a['depth'] - 1):  # the last block's tokens are the backbone's own features
      c.task.probe.layers = (a['layer'],)
  return c


def trials(stage: str, starts: dict, pretrained: str, num_seeds: int):
  """The trials of a stage: `pretrain` every start (name -> overrides) x seed; `probe` a probe per backbone of the
  pretrain sweep in `pretrained` (its trials `start=NAME,seed=S`), named `backbone=NAME,seed=S`."""
  seeds = sweep.seeds(num_seeds)
  if stage == 'pretrain':
    return sweep.product(sweep.variants('start', starts), seeds)
  backbones = [sweep.product(sweep.variants('backbone', {
      start: {'task.probe.backbone': f'{pretrained}/start={start},seed={s["seed"]}'}}), [s])
      for start in starts for s in seeds]
  return sweep.chain(*backbones)


def get_sweep(arg=None):
  a = _parse(arg)
  return trials(a['stage'], {a['objective']: {}, 'random': RANDOM}, a['pretrained'], a['seeds'])
