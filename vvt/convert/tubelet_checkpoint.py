"""The opening of a Hugging Face video transformer's conversion whose tokeniser is a Conv3d over tubelets (VideoMAE,
V-JEPA 2): the writer of its state dict, the prefix of its keys, and its tokeniser checked against its config.

    w, p, hidden = tubelet_checkpoint.open_checkpoint(state, 'VideoMAE', 'videomae.',
                                                      'embeddings.patch_embeddings.projection', 'num_channels',
                                                      tubelet_size=2, patch_size=16)
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

from vvt.convert import conversion
from vvt.convert import torch_layout


def open_checkpoint(state: Mapping[str, np.ndarray], model: str, prefix: str, tokeniser: str, channels_field: str,
                    *, tubelet_size: int, patch_size: int,
                    hidden_size: int | None = None) -> tuple[conversion.Writer, str, int]:
  """(writer, key prefix, hidden size D) of `model`'s state dict `state`, whose config.json gives `tubelet_size`,
  `patch_size` and, where it names the width, `hidden_size`.

  prefix: the classifier's key prefix ('videomae.'); the bare model's keys have none ('' then). The tokeniser
  `{prefix}{tokeniser}` (Conv3d (D, 3, tubelet_size, patch_size, patch_size)) is written as vvt's `embedding/conv`;
  ValueError naming hf_config.FIELD where its shape contradicts the config: `channels_field` (3 channels),
  tubelet_size, patch_size and hidden_size (where given)."""
  w = conversion.Writer(conversion.Source(state, f'Hugging Face {model} checkpoint'))
  p = prefix if any(k.startswith(prefix) for k in state) else ''
  kernel = torch_layout.torch_conv3d_tokeniser(w, 'embedding/conv', f'{p}{tokeniser}', model)
  hidden, channels, tt, th, tw = kernel.shape
  checks = ((channels_field, 3, channels), ('tubelet_size', tubelet_size, tt), ('patch_size', patch_size, th),
            ('patch_size', patch_size, tw))
  if hidden_size is not None:
    checks += (('hidden_size', hidden_size, hidden),)
  width = 'D' if hidden_size is None else 'hidden_size'
  torch_layout.check_kernel(kernel, checks, f'{width}, {channels_field}, tubelet_size, patch_size, patch_size')
  return w, p, int(hidden)
