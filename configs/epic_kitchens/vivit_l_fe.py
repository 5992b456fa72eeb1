"""ViViT-L/16x2 factorised encoder on Epic-Kitchens-100 (Arnab et al. 2021).

Two heads — verb (97 classes) and noun (300) — summed cross-entropy; the
action is right when both heads are (reported as `video_top1_action`).
Regularisation as in ViViT's Epic-Kitchens table: RandAugment, label
smoothing 0.2, mixup 0.1, stochastic depth 0.2; 32 frames at stride 1 (the
clips are short), SGD momentum, cosine, 50 epochs; 4x1 test views.
Records carry `verb_label` and `noun_label` (int64) in the context.
"""
import ml_collections

from configs import common

HEADS = {'verb': 97, 'noun': 300}


def get_config(arg=None):
  del arg
  c = common.paper_config(
      model=dict(family='vivit', attention='factorised_encoder', variant='L/16x2',
                 num_frames=32, image_size=224, temporal_layers=4, stochastic_depth=0.2),
      dataset=dict(stride=1, num_test_clips=4, num_spatial_crops=1,
                   train_files='epic_kitchens/train@256', eval_files='epic_kitchens/validation@64',
                   label_keys={'verb': 'verb_label', 'noun': 'noun_label'},
                   horizontal_flip=True, randaugment={'num_layers': 2, 'magnitude': 15},
                   normalization='zero_centre'),
      batch_size=64, num_epochs=50.0,
      optimizer__name='sgd', optimizer__momentum=0.9, optimizer__grad_clip_norm=1.0,
      schedule__name='cosine', schedule__base_lr=0.5, schedule__warmup_epochs=2.5,
      loss__label_smoothing=0.2, loss__mixup_alpha=0.1,
      eval__batch_size=64, eval__split='validation', checkpoint__every_steps=1000)
  c.num_classes = HEADS  # the shared field: the model and the data read it
  c.init_from = ml_collections.ConfigDict(dict(
      path='imagenet21k/ViT-L_16.npz', format='big_vision', tubelet_init='central_frame',
      positional_embedding='repeat'))
  return c
