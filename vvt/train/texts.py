"""Texts through a video-text model: its tokenizer, and its text tower run on a list of texts.

    tokenize = tokenizer(data, model, workdir, init_from)   # fn(texts) -> (ids (n, L) int32, mask (n, L) int32)
    emb = encode(program, params, tokenize, texts)          # (n, E) float32: the model's `encode_text`

The tokenizer (`vvt.data.load_tokenizer`: a folder's own tokenizer.json) is that of `dataset.tokenizer` (a folder)
where set, else the checkpoint's: the run's folder, then the folder it was initialised from (`init_from`). A run
that needs one and has none is refused naming them, when it first tokenises.
"""
from __future__ import annotations

import os
from typing import Callable

import numpy as np

FILE = 'tokenizer.json'


def tokenizer_folder(data, workdir: str = '', init_from=None) -> str:
  """The folder of a run's tokenizer: `data.tokenizer`, else the first of `workdir` and the `init_from` source's
  folder holding a `tokenizer.json`; '' where there is none."""
  if getattr(data, 'tokenizer', ''):
    return str(data.tokenizer)
  folders = [workdir, getattr(init_from, 'path', '') if init_from is not None else '']
  for folder in folders:
    if folder and os.path.isfile(os.path.join(folder, FILE)):
      return folder
  return ''


def tokenizer(data, model, workdir: str = '', init_from=None) -> Callable:
  """fn(texts) -> (input_ids (n, L) int32, attention_mask (n, L) int32) of the run's tokenizer (`tokenizer_folder`,
  `vvt.data.load_tokenizer`) at L = model.text.max_length; loaded when first called, which raises ValueError naming
  where it was looked for when there is none."""
  folder = tokenizer_folder(data, workdir, init_from)
  length = int(model.text.max_length) if getattr(model, 'text', None) is not None else 0
  loaded = []

  def tokenize(texts):
    if not folder:
      raise ValueError(f'no tokenizer for the texts: no {FILE} in {workdir or "the run folder"} or the folder it '
                       'was initialised from; set dataset.tokenizer to the folder of the model\'s tokenizer.json')
    if not loaded:
      from vvt.data import load_tokenizer
      loaded.append(load_tokenizer(folder, length))
    return loaded[0].encode(list(texts))
  return tokenize


def encode(program, params, tokenize: Callable, texts, batch_size: int = 256) -> np.ndarray:
  """(n, E) float32: the text embeddings (`encode_text`) of `texts` by `program`'s model with `params`, in batches
  of `batch_size` (the last padded)."""
  import jax
  module = program.module
  fn = jax.jit(lambda p, ids, mask: module.apply({'params': p}, ids, mask, method='encode_text'))
  out = []
  texts = list(texts)
  for start in range(0, len(texts), batch_size):
    part = texts[start:start + batch_size]
    ids, mask = tokenize(part + [part[-1]] * (batch_size - len(part)) if len(texts) > batch_size else part)
    out.append(np.asarray(jax.device_get(fn(params, ids, mask)), np.float32)[:len(part)])
  return np.concatenate(out) if out else np.zeros((0, 0), np.float32)



def text_params(workdir: str, step=None, raw: bool = False) -> tuple:
  """(params, step): the text tower's params of a checkpoint (`text`, `logit_scale`, `logit_bias`: all but the
  video tower, restored alone: the video tower's arrays are not read), its EMA params where it has them unless
  `raw`."""
  import jax
  import orbax.checkpoint as ocp

  from vvt.train import checkpoints
  step = checkpoints.resolve_step(workdir, step)
  checkpoints.verify_step(workdir, step)
  item = 'ema' if checkpoints.has_ema(workdir, step) and not raw else 'params'
  stored = checkpoints.abstract_params_from_checkpoint(workdir, step)
  if 'text' not in stored:
    raise ValueError(f'{workdir}: its checkpoint has no text tower (params `text`): not a video-text model')
  wanted = {k: v for k, v in stored.items() if k != 'video'}
  device = jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
  args = ocp.args.PyTreeRestore(item=wanted, partial_restore=True,
                                restore_args=jax.tree.map(lambda _: ocp.ArrayRestoreArgs(sharding=device), wanted))
  restored = checkpoints.manager(workdir, create=False).restore(step, args=ocp.args.Composite(**{item: args}))
  return restored[item], step
