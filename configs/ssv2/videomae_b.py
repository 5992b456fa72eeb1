"""VideoMAE ViT-B/16 self-supervised pretraining on Something-Something v2 (Tong et al. 2022): task.name='mae'.

  --config configs/ssv2/videomae_b.py                      2400 epochs (the released SSv2 ViT-B)
  --config configs/ssv2/videomae_b.py:800                  the 800-epoch schedule of the paper's ablations
16 frames at stride 2, 90% tube masking, a 4-block decoder of width 384; AdamW, batch 2048, lr 1.2e-3, 40 warmup
epochs (`configs.common.videomae_pretraining`; sources: docs/recipes.md). The videos' labels are not read.
"""
from configs import common


def get_config(arg=None):
  epochs = float(arg or 2400)
  return common.videomae_pretraining(stride=2, epochs=epochs, train_files='ssv2/train@256',
                                     eval_files='ssv2/validation@64')
