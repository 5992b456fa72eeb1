"""Fields of a Hugging Face config.json that several converters read alike, each refused with one line naming
`hf_config.FIELD` where vvt cannot express it."""
from __future__ import annotations

from vvt.convert import torch_layout


def square_patch_size(value) -> int:
  """`patch_size` of a config: an int, or a list / tuple of equal sides (ValueError for non-square patches)."""
  if isinstance(value, (list, tuple)):
    if len(set(value)) != 1:
      raise ValueError(f'hf_config.patch_size={list(value)}: vvt takes square patches')
    return value[0]
  return value


def gelu_approximate(hidden_act: str) -> bool:
  """vvt's gelu_approximate of a config's `hidden_act` (ValueError naming hf_config.hidden_act for no GELU)."""
  try:
    return torch_layout.gelu_approximate_of(hidden_act)
  except ValueError as e:
    raise ValueError(f'hf_config.{e}') from None
