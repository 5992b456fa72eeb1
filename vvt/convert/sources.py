"""Every video converter source, one record each: the one table of what `vvt convert --source` takes.

  SOURCES                 {name: Record}, in `vvt convert --help`'s order
  get(name)               its record (ValueError naming the sources for an unknown one)
  of_model_type(t)        the Hugging Face source whose folders' config.json says `model_type` t (None: none)
  targets() / no_class()  the transformers classes `vvt export --format hf` writes, and the schemes it has none for

A record says how the source is read (`reader`: a `convert_for(state, ask)` of its module), its sizes (`native_sizes`),
the run config to convert it with (`base_config`, `base_note`: `vvt convert --help`'s table, and docs/weights.md's,
whose test reads these), what a Hugging Face folder of it holds (`model_types`: `vvt train --init` takes such a
folder; `normalization`: what its weights were trained with, where the folder's preprocessor config does not say),
the transformers classes its models export to (`exports`), and what it refuses (`safetensors_only`: a PyTorch
pickle; `native_sizes`: frames that are not square; `no_class`: schemes transformers has no class for).

The entries name modules as strings, so this table imports nothing heavy (config checks read it without JAX).
Adding a source: its module (a `convert_for(state, ask)`; `HF_CLASS` and `to_hf` where `vvt export --format hf`
writes it) and one entry here; docs/weights.md's base-config table gets its row (a test checks it).
"""
from __future__ import annotations

import dataclasses
import importlib


def _function(target: str):
  """The function of a 'module:function' string (its module imported now)."""
  module, name = target.split(':')
  return getattr(importlib.import_module(module), name)


@dataclasses.dataclass(frozen=True)
class Target:
  """One transformers class `vvt export --format hf` writes: the vvt models it expresses (`selects`: (field, allowed
  values) pairs), the module whose `HF_CLASS` and `to_hf(params, model_cfg)` write it, and `reads`: model fields
  beyond `hf_export.READ` that its `to_hf` reads and checks itself."""
  module: str
  selects: tuple[tuple[str, tuple], ...]
  reads: tuple[str, ...] = ()
  text: bool = False  # it writes video-text models (model.text set); else video models (model.text None)

  @property
  def hf_class(self) -> str:
    return importlib.import_module(self.module).HF_CLASS

  def to_hf(self, params, model_cfg):
    return importlib.import_module(self.module).to_hf(params, model_cfg)

  def mismatches(self, model_cfg) -> list[tuple[str, tuple]]:
    """(field, allowed values) of every selecting field the model does not have (model.text first)."""
    text = [] if (model_cfg.get('text') is not None) == self.text else [('text', ('a text tower',) if self.text
                                                                                 else (None,))]
    return text + [(f, allowed) for f, allowed in self.selects if model_cfg[f] not in allowed]


def target(module: str, reads: tuple[str, ...] = (), text: bool = False, **selects) -> Target:
  """A Target selecting the models whose fields have the given values (a value or a tuple of values); `text`:
  video-text models."""
  return Target(module, tuple((f, v if isinstance(v, tuple) else (v,)) for f, v in selects.items()), reads, text)


@dataclasses.dataclass(frozen=True)
class Record:
  """One converter source (see the module doc)."""
  name: str
  reader: str                             # 'module:function': convert_for(state, ask: conversion.Ask) -> Converted
  base_config: str                        # the run config `vvt convert --config` takes for it
  base_note: str = ''                     # what else fits, or what to know of it
  native_sizes: bool = False              # runs at another clip / square frame size itself, else converted, resized
  safetensors_only: bool = False          # refuses a PyTorch pickle (pytorch_model.bin)
  model_types: tuple[str, ...] = ()       # a Hugging Face folder's config.json model_type (its config is read)
  normalization: str | None = None        # dataset.normalization its weights were trained with (HF folders)
  exports: tuple[Target, ...] = ()        # the transformers classes `vvt export --format hf` writes its models as
  no_class: tuple[tuple[str, str], ...] = ()  # (model.attention, why no transformers class expresses it)

  @property
  def hf_folder(self) -> bool:
    """Whether it reads a Hugging Face folder (its config.json, or --hf-config)."""
    return bool(self.model_types)

  def convert(self, state, ask):
    """The source's converter on a loaded state dict -> conversion.Converted."""
    return _function(self.reader)(state, ask)


JOINT = ('spatiotemporal', 'joint')  # ViViT Model 1 and TimeSformer 'ST': the same single joint stage
# Fields of the attentive-pooler encoders, read and checked by their exporters.
POOLED = ('attentive_pooler', 'layer_norm_scale_offset', 'attention_logit_cap')
_M = 'vvt.convert.'

SOURCES = {s.name: s for s in (
    # scenic ViViT, Models 1-4 (flax params: .npz, .msgpack; '/'-joined names)
    Record('scenic_vivit', _M + 'scenic:convert_for', 'configs/kinetics400/vivit_b_fe.py',
           "ViViT-L: vivit_l_fe.py, ViViT-H: vivit_h.py, or the dataset's (kinetics600/, ssv2/, ...); Model 4: "
           '--config.model.attention=factorised_dot_product'),
    # official TimeSformer PyTorch checkpoint (.pyth/.pth; divided_space_time, joint_space_time, space_only)
    Record('timesformer', _M + 'timesformer:convert_official_for', 'configs/kinetics400/timesformer_b.py',
           ':hr for TimeSformer-HR, :l for -L; or ssv2/, diving48/, howto100m/'),
    # official X-ViT PyTorch checkpoint (space-time mixing + TA head); any multiple of its time table's rows
    Record('xvit', _M + 'xvit:convert_for', 'configs/kinetics400/xvit_b.py',
           ':16 for 16 frames; or kinetics600/, ssv2/, epic_kitchens/', native_sizes=True),
    # Hugging Face TimesformerForVideoClassification (folder with config.json, .safetensors, .bin)
    Record('hf_timesformer', _M + 'timesformer:convert_hf_for', 'configs/kinetics400/timesformer_b.py',
           "or the dataset's timesformer_b.py", model_types=('timesformer',), normalization='imagenet',
           exports=(target(_M + 'timesformer', attention='divided'),
                    target(_M + 'timesformer', attention=JOINT, classifier='token', positional_embedding='separable')),
           no_class=(('space', "transformers' space_only TimeSformer returns one row of logits per frame, not one "
                               'per video'),)),
    # Hugging Face VivitForVideoClassification (old and new key names)
    Record('hf_vivit', _M + 'hf_vivit:convert_for', 'configs/kinetics400/vivit_b_fe.py',
           "its [-1, 1] inputs and 256-px test views are HF ViViT's", model_types=('vivit',),
           normalization='zero_centre',
           exports=(target(_M + 'hf_vivit', attention=JOINT, classifier='token', positional_embedding='joint'),)),
    # Hugging Face VideoMAEForVideoClassification, bare VideoMAEModel or VideoMAEForPreTraining (a backbone gets a new
    # head of the config's num_classes)
    Record('hf_videomae', _M + 'hf_videomae:convert_for', 'configs/kinetics400/timesformer_b.py',
           "its ImageNet normalisation and 224-px test views are VideoMAE's", safetensors_only=True,
           model_types=('videomae',), normalization='imagenet',
           exports=(target(_M + 'hf_videomae', attention=JOINT, classifier='gap',
                           positional_embedding='sinusoidal'),)),
    # Hugging Face VJEPA2ForVideoClassification or bare VJEPA2Model (3D RoPE, attentive pooler; the predictor unused;
    # any clip length and frame size divisible by the tubelet)
    Record('hf_vjepa2', _M + 'hf_vjepa2:convert_for', 'configs/kinetics400/timesformer_b.py',
           "its ImageNet normalisation is V-JEPA 2's; --image-size 256 for the 256-px checkpoints", native_sizes=True,
           safetensors_only=True, model_types=('vjepa2',), normalization='imagenet',
           exports=(target(_M + 'hf_vjepa2', POOLED, attention=JOINT, positional_embedding='rope'),)),
    # Hugging Face VideoPrismForVideoClassification, bare VideoPrismVisionModel, or the video-text
    # VideoPrismClipModel, both towers (hf_videoprism_clip) (space_then_time; its position tables resized at run
    # time to the clip asked)
    Record('hf_videoprism', _M + 'hf_videoprism:convert_for', 'configs/kinetics400/timesformer_b.py',
           'VideoPrism reads [0, 1] pixels, which no dataset.normalization gives: evaluate its features with care; '
           "a VideoPrismClipModel's two towers: a config with model.text, e.g. configs/synthetic_video_text.py",
           native_sizes=True, safetensors_only=True, model_types=('videoprism_vision_model', 'videoprism'),
           exports=(target(_M + 'hf_videoprism', POOLED + ('pos_table_grid', 'temporal_layers', 'temporal_num_heads',
                                                          'temporal_mlp_dim'), attention='space_then_time'),
                    target(_M + 'hf_videoprism_clip', POOLED + ('pos_table_grid', 'temporal_layers',
                                                               'temporal_num_heads', 'temporal_mlp_dim', 'text'),
                           text=True, attention='space_then_time'))),
    # Hugging Face PeVideoModel (Perception Encoder video): both towers, family 'pe_video' (timm's PE core ViT per
    # frame, the frame-level encoder, ModernBERT); any clip length, the frame model's frame size
    Record('hf_pe_video', _M + 'hf_pe_video:convert_for', 'configs/synthetic_video_text.py',
           "its frame size is its frame model's; its pixels as its video processor gives them (dataset.normalization "
           'to match)', native_sizes=True, safetensors_only=True, model_types=('pe_video',),
           exports=(target(_M + 'hf_pe_video', ('text', 'pe_video'), text=True, family='pe_video'),)),
)}


def get(name: str) -> Record:
  """The record of source `name`; ValueError naming the sources for an unknown one."""
  if name not in SOURCES:
    raise ValueError(f'unknown source {name!r}; expected one of {", ".join(SOURCES)}')
  return SOURCES[name]


def of_model_type(model_type) -> Record | None:
  """The Hugging Face source whose folders' config.json says `model_type` (None: no source reads it)."""
  return next((s for s in SOURCES.values() if model_type in s.model_types), None)


def targets() -> tuple[Target, ...]:
  """Every transformers class `vvt export --format hf` writes, in the sources' order."""
  return tuple(t for s in SOURCES.values() for t in s.exports)


def no_class() -> dict[str, str]:
  """{model.attention: why no transformers class expresses it}, where there is more to say than that."""
  return {scheme: why for s in SOURCES.values() for scheme, why in s.no_class}
