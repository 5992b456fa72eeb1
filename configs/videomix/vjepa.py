"""V-JEPA and V-JEPA 2 latent-prediction pretraining (`task.name='jepa'`) on VideoMix2M.

  --config configs/videomix/vjepa.py:v1_l                V-JEPA ViT-L/16:  16 frames x 224^2, sin-cos positions
  --config configs/videomix/vjepa.py:v2_l                V-JEPA 2 ViT-L/16: 16 frames x 256^2, 3D RoPE (stage 1)
  --config configs/videomix/vjepa.py:v2_g                V-JEPA 2 ViT-g/16: 16 frames x 256^2 (stage 1)
  --config configs/videomix/vjepa.py:v2_l,cooldown=True  stage 2: 64 frames x 256^2, lr annealed
  --config configs/videomix/vjepa.py:v2_g,cooldown=True  stage 2: 64 frames x 384^2 (the high-resolution one)

V-JEPA 2's progressive resolution is two runs, a config per stage: the cool-down run starts from the stage-1 run's
weights (`vvt train --init RUN_1 --config ...:v2_g,cooldown=True`; RoPE has no table, so the same weights run at
64 frames of 384^2). Two runs rather than a schedule field: the stages differ in clip shape, batch layout and
compiled step, so one run would recompile and reshape its data pipeline mid-way, and each stage is the released
code's own run too (its `cooldown-*.yaml` configs resume the stage-1 checkpoint). Every setting and its source:
docs/recipes.md.
"""
from configs import common

# name: (model fields, clip (frames, size), stage-1 / cool-down batch and steps and lr)
MODELS = {
    'v1_l': dict(variant='L/16x2', positional_embedding='sinusoidal'),
    'v2_l': dict(variant='L/16x2', positional_embedding='rope'),
    'v2_g': dict(variant='H/16x2', hidden_size=1408, num_layers=40, num_heads=22, mlp_dim=6144,
                 positional_embedding='rope'),
}
SIZES = {'v1_l': 224, 'v2_l': 256, 'v2_g': 256}
COOLDOWN_SIZES = {'v2_l': 256, 'v2_g': 384}
DATA = 'videomix2m/train@1024'


def _model(name: str, frames: int, size: int) -> dict:
  return dict(family='vivit', attention='spatiotemporal', tubelet=(2, 16, 16), num_frames=frames, image_size=size,
              num_classes=1, classifier='gap', class_token=None, layer_norm_eps=1e-6, gelu_approximate=False,
              **MODELS[name])


def _train(name: str, cooldown: bool) -> dict:
  """The optimiser, schedule and EMA of a stage (ipe 300 iterations per 'epoch' in the released configs)."""
  if name == 'v1_l':  # jepa configs/pretrain/vitl16.yaml: 300 epochs x 300, warmup 40, cosine to 1e-6
    return {'batch_size': 3072, 'num_train_steps': 90000, 'schedule.name': 'cosine', 'schedule.base_lr': 6.25e-4,
            'schedule.end_lr': 1e-6, 'schedule.warmup_steps': 12000, 'optimizer.weight_decay': 0.04,
            'task.jepa.momentum': (0.998, 1.0)}
  if cooldown:  # vjepa2 configs/train/vit*16/cooldown-*-64f.yaml: 40 x 300 iterations, lr annealed to 1e-6
    return {'batch_size': 3072, 'num_train_steps': 12000, 'schedule.name': 'cosine', 'schedule.base_lr': 5.25e-4,
            'schedule.end_lr': 1e-6, 'schedule.warmup_steps': 0, 'optimizer.weight_decay': 0.04,
            'task.jepa.momentum': (0.99925, 0.99925)}
  # vjepa2 configs/train/vitg16/pretrain-256px-16f.yaml: 800 x 300 iterations, warmup 40 x 300, constant lr
  return {'batch_size': 3072, 'num_train_steps': 240000, 'schedule.name': 'constant', 'schedule.base_lr': 5.25e-4,
          'schedule.warmup_steps': 12000, 'optimizer.weight_decay': 0.04, 'task.jepa.momentum': (0.99925, 0.99925)}


def get_config(arg=None):
  a = common.parse_arg(arg, model='v2_l', cooldown=False)
  name = a['model'].lower()
  if name not in MODELS:
    raise ValueError(f'vjepa.py: unknown model {a["model"]!r}; expected one of {", ".join(MODELS)}')
  if a['cooldown'] and name not in COOLDOWN_SIZES:
    raise ValueError(f'vjepa.py: {name} has no cool-down stage (V-JEPA 2 only: {", ".join(COOLDOWN_SIZES)})')
  frames, size = (64, COOLDOWN_SIZES[name]) if a['cooldown'] else (16, SIZES[name])
  train = {'task.name': 'jepa', 'optimizer.name': 'adamw', 'optimizer.b1': 0.9, 'optimizer.b2': 0.999,
           'optimizer.grad_clip_norm': 10.0 if name == 'v1_l' else 0.0, 'model.remat': True,
           'task.jepa.pred_depth': 12, 'task.jepa.pred_width': 384, 'task.jepa.pred_heads': 12,
           'task.jepa.mask_sets': ((8, 0.15), (2, 0.7)), 'task.jepa.aspect_ratio': (0.75, 1.5),
           'task.jepa.loss_exp': 1.0, 'checkpoint.every_steps': 1000, 'eval.batch_size': 256}
  train.update(_train(name, a['cooldown']))
  return common.paper_config(
      model=_model(name, frames, size),
      # V-JEPA: every 4th frame of 30 fps video (`sampling_rate: 4`); V-JEPA 2: 4 fps (`fps: 4`)
      dataset=dict(train_files=DATA, eval_files='videomix2m/val@64', stride=4 if name == 'v1_l' else 1,
                   fps=30 if name == 'v1_l' else 4, train_min_resize=size, train_max_resize=int(size * 1.15),
                   eval_resize=size,
                   num_test_clips=1, num_spatial_crops=1, horizontal_flip=True, normalization='imagenet'),
      train=train)
