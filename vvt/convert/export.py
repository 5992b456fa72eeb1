"""vvt params <-> safetensors, so other tools can read vvt checkpoints (and write them back).

Flat names: the parameter path inside the flax `params` collection joined with '/', exactly the tree that
`vvt.models.build(cfg).init(...)['params']` returns, e.g.
  embedding/conv/kernel                                   (t, h, w, C, D)
  encoder/cls                                             (1, 1, D)
  encoder/posembed/pos_embedding                          (1, [1 +] N, D)    (+ encoder/posembed/time_embedding)
  encoder/layers/block_0/space_attention/query/kernel     (D, H, d_h)        (query/key/value; bias (H, d_h))
  encoder/layers/block_0/space_attention/out/kernel       (H, d_h, D)
  encoder/layers/block_0/mlp/Dense_0/kernel               (D, mlp_dim)       (flax Dense: y = x @ kernel + bias)
  head/output_projection/kernel                           (D, num_classes)
All tensors are float32. File metadata (string -> string): "format": "vvt", and "config": the JSON of the
run/model config when known.
"""
from __future__ import annotations

import json
import os

import numpy as np

from vvt.convert import weight_files


def to_safetensors(params, path: str, config=None, metadata=None) -> int:
  """Writes params (nested dict of arrays) to `path`; returns the number of tensors. `metadata`: more
  string -> string entries (e.g. "weights": 'ema' for the EMA params of a checkpoint)."""
  from safetensors.numpy import save_file
  flat = {k: np.ascontiguousarray(np.asarray(v, np.float32)) for k, v in weight_files.flatten(params).items()}
  metadata = {**{str(k): str(v) for k, v in (metadata or {}).items()}, 'format': 'vvt'}
  if config is not None:
    metadata['config'] = config if isinstance(config, str) else (
        config.to_json_best_effort() if hasattr(config, 'to_json_best_effort') else json.dumps(config))
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  save_file(flat, path, metadata=metadata)
  return len(flat)


def from_safetensors(path: str):
  """Reads a file written by `to_safetensors` -> (nested params of numpy arrays, metadata dict).

  Read through `weight_files.load_state` (one WeightFileError naming the file for a broken or hostile file: data
  offsets past its end, a header that lies, non-numeric tensors); every tensor must be finite: a NaN or infinite
  value is refused naming the tensors (a checkpoint of such weights could only train or evaluate to NaN)."""
  if not os.path.exists(path):
    raise FileNotFoundError(f'safetensors file {path} does not exist')
  _, metadata = weight_files.safetensors_header(path)
  flat = weight_files.load_state(path, 'safetensors')
  check_finite(path, flat)
  return weight_files.unflatten(dict(flat)), dict(metadata)


def check_finite(path: str, flat) -> None:
  """WeightFileError naming `path` and its tensors holding NaN or infinite values (the first 3, and how many)."""
  bad = []
  for name in sorted(flat):
    value = np.asarray(flat[name])
    if value.dtype.kind == 'f':
      n = int(value.size - np.count_nonzero(np.isfinite(value)))
      if n:
        bad.append(f'{name} ({"all" if n == value.size else n} of {value.size} values)')
  if bad:
    more = f' and {len(bad) - 3} more' if len(bad) > 3 else ''
    raise weight_files.WeightFileError(f'{path}: NaN or infinite values in {len(bad)} of {len(flat)} tensors: '
                                 f'{", ".join(bad[:3])}{more}; refused (no checkpoint written)')
