"""Texts -> token ids: a checkpoint folder's own `tokenizer.json`, read by the `tokenizers` library (Rust; no code
from the file runs, nothing is downloaded), padded and truncated as the model's processor does.

    tok = load_tokenizer(folder, max_length)          # folder: a Hugging Face or a converted vvt folder
    input_ids, attention_mask = tok.encode(['a person juggling', 'a dog'])   # (B, max_length) int32 each

VideoPrism (transformers' `VideoPrismProcessor`): padding to `max_length` (the text encoder's
max_position_embeddings, 64), truncation to it, no end-of-sequence token (its tokenizer, a SentencePiece unigram
model, has no post-processor), no lower-casing beyond what the file's own normaliser does; the pad token is
`<pad>` (id 0). A tokenizer_config.json beside the file names the pad token where it has one. What
`tokenizer.json` says itself (normaliser, pre-tokeniser, post-processor) is applied as it is; its stored padding
and truncation settings are replaced by the model's.

Refusals (`TokenizerError`, one line naming the file): no tokenizer.json, one the library cannot read, a pad token
absent from its vocabulary, a tokenizer_config.json that is not a JSON object.
"""
from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

TOKENIZER_FILE = 'tokenizer.json'
# The files of a folder's tokenizer that a converted or exported folder carries (those present).
TOKENIZER_FILES = (TOKENIZER_FILE, 'tokenizer_config.json', 'special_tokens_map.json', 'spiece.model')
DEFAULT_PAD = '<pad>'


class TokenizerError(ValueError):
  """A tokenizer that cannot be read: one line naming the file."""


def _pad_token(folder: str) -> str:
  """The pad token of tokenizer_config.json (a string, or an AddedToken's {'content': ...}), else '<pad>'."""
  path = os.path.join(folder, 'tokenizer_config.json')
  if not os.path.exists(path):
    return DEFAULT_PAD
  try:
    with open(path, encoding='utf-8') as f:
      cfg = json.load(f)
  except (OSError, ValueError) as e:
    raise TokenizerError(f'{path}: not a JSON file ({e})') from None
  if not isinstance(cfg, dict):
    raise TokenizerError(f'{path}: not a JSON object')
  pad = cfg.get('pad_token') or DEFAULT_PAD
  return pad.get('content', DEFAULT_PAD) if isinstance(pad, dict) else str(pad)


@dataclasses.dataclass(frozen=True)
class Tokenizer:
  """A loaded tokenizer padding and truncating to `max_length` with `pad_id` (`load_tokenizer`)."""
  tokenizer: object  # tokenizers.Tokenizer
  max_length: int
  pad_id: int
  path: str

  def encode(self, texts) -> tuple[np.ndarray, np.ndarray]:
    """Texts (a list of str) -> (input_ids, attention_mask), each (B, max_length) int32: the ids of each text's
    first max_length tokens then pad ids; the mask 1 on tokens, 0 on padding."""
    texts = list(texts)
    for i, t in enumerate(texts):
      if not isinstance(t, str):
        raise TokenizerError(f'text {i} is a {type(t).__name__}, not a str')
    encodings = self.tokenizer.encode_batch(texts) if texts else []
    ids = np.full((len(texts), self.max_length), self.pad_id, np.int32)
    mask = np.zeros((len(texts), self.max_length), np.int32)
    for i, e in enumerate(encodings):
      n = min(len(e.ids), self.max_length)
      ids[i, :n] = e.ids[:n]
      mask[i, :n] = 1
    return ids, mask


def load_tokenizer(folder: str, max_length: int) -> Tokenizer:
  """The tokenizer of `folder` (its tokenizer.json) padding and truncating to `max_length` (the text tower's
  model.text.max_length); TokenizerError naming the file where it cannot."""
  import tokenizers
  path = os.path.join(folder, TOKENIZER_FILE)
  if not os.path.isfile(path):
    raise TokenizerError(f'{folder}: no {TOKENIZER_FILE} (the tokenizer of a video-text model is read from the '
                         'folder\'s own tokenizer.json)')
  try:
    tok = tokenizers.Tokenizer.from_file(path)
  except Exception as e:  # the library's own error: a file it cannot parse
    raise TokenizerError(f'{path}: not a tokenizers file ({str(e).splitlines()[0] if str(e) else type(e).__name__})'
                         ) from None
  pad = _pad_token(folder)
  pad_id = tok.token_to_id(pad)
  if pad_id is None:
    raise TokenizerError(f'{path}: its pad token {pad!r} is not in its vocabulary')
  tok.no_padding()
  tok.no_truncation()
  return Tokenizer(tok, int(max_length), int(pad_id), path)


def copy_tokenizer_files(folder: str, output: str) -> list[str]:
  """Copies the tokenizer files of `folder` (TOKENIZER_FILES, those present) into `output`; returns their names."""
  import shutil
  copied = []
  for name in TOKENIZER_FILES:
    src = os.path.join(folder, name)
    if os.path.isfile(src):
      shutil.copyfile(src, os.path.join(output, name))
      copied.append(name)
  return copied
