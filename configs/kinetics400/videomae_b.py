"""VideoMAE ViT-B/16 self-supervised pretraining on Kinetics-400 (Tong et al. 2022): task.name='mae'.

  --config configs/kinetics400/videomae_b.py               1600 epochs (the released K400 ViT-B)
  --config configs/kinetics400/videomae_b.py:800           the 800-epoch schedule of the paper's ablations
16 frames at stride 4, 90% tube masking, a 4-block decoder of width 384; AdamW, batch 2048, lr 1.2e-3, 40 warmup
epochs (`configs.common.videomae_pretraining`; sources: docs/recipes.md). The videos' labels are not read.
"""
from configs import common


def get_config(arg=None):
  epochs = float(arg or 1600)
  return common.videomae_pretraining(stride=4, epochs=epochs, train_files='kinetics400/train@1024',
                                     eval_files='kinetics400/validation@64')
