"""The published V-JEPA 2 and VideoPrism sizes as the converters write them: vvt's parameter count (jax.eval_shape,
nothing allocated) equals transformers' (models built on torch's meta device, nothing allocated).

Sizes from transformers 5.23 (VJEPA2Config's defaults are ViT-L; ViT-g is its conversion script's `vit_giant`:
width 1408, 40 layers, 22 heads, MLP ratio 48/11; VideoPrismVisionConfig's defaults are VideoPrism-B, -L its
conversion script's `backbone_large`). Classes: 174 (the SSv2 probes V-JEPA 2 publishes), 400 (Kinetics)."""
import math

import pytest
import torch
import transformers

from vvt.convert import conversion
from vvt.convert import hf_videoprism
from vvt.convert import hf_vjepa2
from vvt.convert import video
from vvt.convert import weight_files
from vvt.models import summary

VJEPA2 = {
    'V-JEPA 2 ViT-L/16': dict(),
    'V-JEPA 2 ViT-g/16': dict(hidden_size=1408, num_attention_heads=22, num_hidden_layers=40, mlp_ratio=48 / 11),
}
VIDEOPRISM = {
    'VideoPrism-B': dict(),
    'VideoPrism-L': dict(hidden_size=1024, intermediate_size=4096, num_attention_heads=16, num_frames=8,
                         num_spatial_layers=24, num_temporal_layers=4),
}


def hf_count(model, skip=()) -> int:
  return sum(p.numel() for name, p in model.named_parameters() if not name.startswith(skip))


def vvt_counts(fields) -> tuple[int, int]:
  """(all parameters, those of the encoder: without the pooler and the head) of a model of `fields`."""
  params = video.abstract_params(conversion.Converted({}, fields, conversion.Report()).model_config())
  flat = weight_files.flatten(params)
  total = sum(math.prod(v.shape) for v in flat.values())
  head = sum(math.prod(v.shape) for k, v in flat.items() if k.startswith(('pooler/', 'head/')))
  return total, total - head


@pytest.mark.parametrize('name', sorted(VJEPA2))
def test_vjepa2_parameters_equal_transformers(name):
  cfg = transformers.VJEPA2Config(num_labels=174, **VJEPA2[name])
  with torch.device('meta'):
    classifier = hf_count(transformers.VJEPA2ForVideoClassification(cfg), skip=('vjepa2.predictor.',))
    encoder = hf_count(transformers.VJEPA2Model(cfg), skip=('predictor.',))
  read = hf_vjepa2.read_config(cfg.to_dict())
  fields = hf_vjepa2.model_fields(read, num_frames=2, image_size=cfg.crop_size, num_classes=174,
                                  mlp_dim=int(cfg.hidden_size * cfg.mlp_ratio),
                                  pooler_mlp_dim=int(cfg.hidden_size * hf_vjepa2.POOLER_MLP_RATIO),
                                  num_pooler_layers=cfg.num_pooler_layers)
  total, backbone = vvt_counts(fields)  # RoPE: no table, the count is the same for every clip
  print(f'{name}: vvt {total:,} (encoder {backbone:,}), transformers {classifier:,} (encoder {encoder:,}) '
        'without the predictor')
  assert (total, backbone) == (classifier, encoder)


@pytest.mark.parametrize('name', sorted(VIDEOPRISM))
def test_videoprism_parameters_equal_transformers(name):
  cfg = transformers.VideoPrismVisionConfig(num_labels=400, **VIDEOPRISM[name])
  with torch.device('meta'):
    classifier = hf_count(transformers.VideoPrismForVideoClassification(cfg))
    encoder = hf_count(transformers.VideoPrismVisionModel(cfg))
  read = hf_videoprism.read_config(cfg.to_dict())
  side = cfg.image_size // cfg.tubelet_size[1]
  fields = hf_videoprism.model_fields(read, num_frames=cfg.num_frames, image_size=cfg.image_size, num_classes=400,
                                      table_grid=(cfg.num_frames, side, side))
  total, backbone = vvt_counts(fields)
  print(f'{name}: vvt {total:,} (encoder {backbone:,}), transformers {classifier:,} (encoder {encoder:,})')
  assert (total, backbone) == (classifier, encoder)


@pytest.mark.parametrize('name,gflops', [('V-JEPA 2 ViT-L/16', 947.3), ('VideoPrism-B', 513.9)])
def test_vvt_summary_of_the_published_sizes(name, gflops):
  """`vvt summary`'s figures (vvt.models.summary.summarise) for V-JEPA 2 ViT-L at 16 x 256^2 and VideoPrism-B at
  16 x 288^2: transformers' parameter count, and the GFLOPs per view of the papers' table in docs/models.md."""
  if name in VJEPA2:
    cfg = transformers.VJEPA2Config(num_labels=174, frames_per_clip=16, **VJEPA2[name])
    fields = hf_vjepa2.model_fields(hf_vjepa2.read_config(cfg.to_dict()), num_frames=16, image_size=256,
                                    num_classes=174, mlp_dim=4096, pooler_mlp_dim=4096, num_pooler_layers=3)
    with torch.device('meta'):
      expected = hf_count(transformers.VJEPA2ForVideoClassification(cfg), skip=('vjepa2.predictor.',))
  else:
    cfg = transformers.VideoPrismVisionConfig(num_labels=400, **VIDEOPRISM[name])
    fields = hf_videoprism.model_fields(hf_videoprism.read_config(cfg.to_dict()), num_frames=16, image_size=288,
                                        num_classes=400, table_grid=(16, 16, 16))
    with torch.device('meta'):
      expected = hf_count(transformers.VideoPrismForVideoClassification(cfg))
  s = summary.summarise(conversion.Converted({}, fields, conversion.Report()).model_config())
  print(summary.format_summary(name, s))
  assert s['params'] == expected
  assert abs(s['gflops'] - gflops) / gflops < 0.005, s['gflops']
