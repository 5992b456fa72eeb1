"""Shared by the V-JEPA 2 and VideoPrism converter tests: tiny transformers models built here from a config, every
parameter random at scales that keep attention far from uniform, saved as `save_pretrained` folders."""
from __future__ import annotations

import json
import pathlib

import jax
import numpy as np
import pytest
import torch

from vvt.convert import video
import vvt.models

ATOL = 1e-5  # logits and features, float32 under highest matmul precision (tests/conftest.py)
FIXED = ('query_tokens', 'position_embeddings', 'pooling_attention_query', 'mask_tokens', 'cls_emb')


QK = ('query.weight', 'key.weight', 'q_proj.weight', 'k_proj.weight')


def randomise(model: torch.nn.Module, seed: int, norm_offset: float = 1.0) -> torch.nn.Module:
  """Every parameter random: query and key matrices N(0, 1.6^2 / fan_in) (attention logits of std ~2.5, peaked
  softmax rows, so a wrong head split, position or token order shows), other matrices N(0, 1 / fan_in), biases and
  1-D vectors N(0, 0.5^2), LayerNorm weights norm_offset + N(0, 0.3^2) (VideoPrism stores them as offsets from 1:
  norm_offset 0), tables and query tokens N(0, 1). transformers' 0.02 init would leave attention near uniform."""
  g = torch.Generator().manual_seed(seed)
  with torch.no_grad():
    for name, p in model.named_parameters():
      r = torch.randn(p.shape, generator=g)
      if 'norm' in name and name.endswith('weight'):
        p.copy_(norm_offset + 0.3 * r)
      elif any(f in name for f in FIXED):
        p.copy_(r)
      elif p.ndim == 1:
        p.copy_(0.5 * r)
      else:
        gain = 1.6 if name.endswith(QK) else 1.0
        p.copy_(gain * r / np.sqrt(int(np.prod(p.shape[1:]))))
  return model.eval()


def folder_with_config(folder: pathlib.Path, out: pathlib.Path, change: dict) -> str:
  """`out` holding `folder`'s weights (a link to them) beside its config.json updated by `change`."""
  cfg = json.loads((folder / 'config.json').read_text())
  (out / 'config.json').write_text(json.dumps({**cfg, **change}))
  (out / 'model.safetensors').symlink_to(folder / 'model.safetensors')
  return str(out)


def refusal(converter: str, path: str) -> str:
  """The message of the ValueError with which `converter` refuses the folder `path`, checked to be one line."""
  with pytest.raises(ValueError) as info:
    video.convert(converter, path)
  message = str(info.value)
  assert '\n' not in message, message
  return message


def session_builder(prefix: str, make):
  """`built(name, tmp_path_factory)`: (name, the transformers model `make(name)`, its `save_pretrained` folder),
  made once per test session."""
  cache = {}

  def built(name, tmp_path_factory):
    if name not in cache:
      model = make(name)
      cache[name] = name, model, save(model, tmp_path_factory.mktemp(f'{prefix}_{name}'))
    return cache[name]
  return built


def classifier_fixtures(names, built):
  """Two fixtures over `built`: `classifier` (each of `names`) and `classifier_a` (the model 'a')."""
  @pytest.fixture(params=sorted(names))
  def classifier(request, tmp_path_factory):
    return built(request.param, tmp_path_factory)

  @pytest.fixture
  def classifier_a(tmp_path_factory):
    return built('a', tmp_path_factory)
  return classifier, classifier_a


def attention_peak(model: torch.nn.Module, **inputs) -> float:
  """The mean over heads and queries of the largest attention weight of each row, in transformers' first layer:
  1 / L for uniform attention, 1 for one-hot."""
  previous = model.config._attn_implementation
  model.set_attn_implementation('eager')  # sdpa returns no weights
  try:
    with torch.no_grad():
      out = model(**inputs, output_attentions=True)
  finally:
    model.set_attn_implementation(previous)
  return float(out.attentions[0].max(dim=-1).values.mean())


def save(model: torch.nn.Module, folder: pathlib.Path) -> pathlib.Path:
  """`save_pretrained` (config.json + model.safetensors), as a hub folder holds it."""
  model.save_pretrained(str(folder), safe_serialization=True)
  assert (folder / 'model.safetensors').exists()
  json.loads((folder / 'config.json').read_text())
  return folder


def clip(batch: int, frames: int, size: int, seed: int = 0) -> np.ndarray:
  """A random clip (B, T, H, W, 3)."""
  return np.random.default_rng(seed).standard_normal((batch, frames, size, size, 3)).astype(np.float32)


def torch_video(x: np.ndarray) -> torch.Tensor:
  """(B, T, H, W, C) -> transformers' pixel_values_videos (B, T, C, H, W)."""
  return torch.from_numpy(x).permute(0, 1, 4, 2, 3)


def run_vvt(converted, x: np.ndarray, **overrides):
  """(logits, features (B, T * N, D): the normalised tokens the pooler reads) of a converted model."""
  cfg = converted.model_config(**overrides)
  module = vvt.models.build(cfg)
  logits, state = jax.jit(lambda v: module.apply({'params': converted.params}, v, mutable=['intermediates']))(x)
  features = np.asarray(state['intermediates']['features'][0])
  return np.asarray(logits), features.reshape(features.shape[0], -1, features.shape[-1])


def max_diff(a, b) -> float:
  a, b = np.asarray(a), np.asarray(b)
  assert a.shape == b.shape, (a.shape, b.shape)
  return float(np.abs(a - b).max())


def assert_parity_at_shapes(converter: str, folder, shapes, reference) -> None:
  """vvt's `converter` model of `folder`, converted for each (frames, size) of `shapes`, within ATOL of
  `reference(x)` ((logits (B, C), features (B, L, D))) on a 2-clip batch x, the two clips' logits apart."""
  for frames, size in shapes:
    x = clip(2, frames, size, seed=frames + size)
    ref_logits, ref_features = reference(x)
    conv = video.convert(converter, str(folder), num_frames=frames, image_size=size)
    logits, features = run_vvt(conv, x)
    d_logits, d_features = max_diff(logits, ref_logits), max_diff(features, ref_features)
    print(f'{converter} {frames}x{size}x{size}: max |logit diff| {d_logits:.2g}, features (float64 reference) '
          f'{d_features:.2g}; logits up to {np.abs(ref_logits).max():.2f}')
    assert d_logits < ATOL and d_features < ATOL, (frames, size, d_logits, d_features)
    assert np.abs(ref_logits[0] - ref_logits[1]).max() > 0.01  # the two clips differ: nothing is a no-op
