"""Text search over the videos of a `vvt features` folder (`vvt search`): the query through the text tower only,
the videos' embeddings read from the folder (the video tower does not run).

    videos = video_text_features(folder)            # (embeddings (N, E) unit norm, ids, features.json); refuses
                                                    # a folder whose embeddings are not a video-text model's
    hits = top_k(videos_emb (N, E), query (E,), k)  # [(video row, cosine similarity)], best first
    texts = read_queries(path)                      # the lines of a query file; refuses an empty one

The similarity is the cosine of the query's text embedding with each video's embedding (its views' mean,
renormalised): the video-text model's own retrieval score without its learned scale (which does not change the
order).
"""
from __future__ import annotations

import json
import os

import numpy as np

TEXTS = 'texts.npz'   # what `vvt features --text FILE` writes beside the shards: `embedding` (Q, E), `text` (Q,)


def read_queries(path: str) -> list:
  """The non-blank lines of the query file `path` (one query a line, stripped); ValueError naming the file when it
  has none or is not UTF-8."""
  try:
    with open(path, encoding='utf-8') as f:
      lines = [line.strip() for line in f]
  except UnicodeDecodeError:
    raise ValueError(f'{path}: not UTF-8 text; save the queries as UTF-8, one a line') from None
  queries = [line for line in lines if line]
  if not queries:
    raise ValueError(f'{path}: no query in it (one query a line)')
  return queries


def normalize(x: np.ndarray) -> np.ndarray:
  """Rows of `x` (..., E) divided by their L2 norm (float32)."""
  x = np.asarray(x, np.float64)
  return (x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)).astype(np.float32)


def index_of(folder: str) -> dict:
  """features.json of the `vvt features` folder `folder`; ValueError naming it when there is none."""
  path = os.path.join(folder, 'features.json')
  if not os.path.isfile(path):
    raise ValueError(f'--features {folder}: no features.json in it (write one with vvt features --output)')
  with open(path) as f:
    return json.load(f)


def video_text_features(folder: str) -> tuple:
  """(embeddings (N, E) float32 unit norm, video ids, features.json) of the folder; ValueError naming it when its
  embeddings are not a video-text model's (`video_text` in features.json) or it holds no video."""
  from vvt.inspection import features
  index = index_of(folder)
  if not index.get('video_text'):
    raise ValueError(f'--features {folder}: its embeddings are not a video-text model\'s video embeddings (write '
                     'them with vvt features of a video-text checkpoint, one with model.text)')
  emb, ids, _ = features.read(folder)
  if not len(ids):
    raise ValueError(f'--features {folder}: it holds no video')
  return normalize(emb), ids, index


def top_k(videos: np.ndarray, query: np.ndarray, k: int) -> list:
  """[(row, cosine similarity)] of the `k` videos (rows of `videos` (N, E)) nearest `query` (E,), best first (ties:
  the lower row)."""
  scores = normalize(videos) @ normalize(query)
  order = np.argsort(-scores, kind='stable')[:max(int(k), 0)]
  return [(int(i), float(scores[i])) for i in order]


def write_texts(folder: str, texts: list, embeddings: np.ndarray) -> str:
  """Writes the query texts and their text embeddings (Q, E) beside a features folder's shards; returns the path."""
  path = os.path.join(folder, TEXTS)
  np.savez(path, text=np.array(texts, dtype=str), embedding=np.asarray(embeddings, np.float32))
  return path


def encode_queries(index: dict, queries: list) -> np.ndarray:
  """(Q, E) float32: the text embeddings of `queries` by the checkpoint a features folder was written by (its
  features.json `index`: `checkpoint`, `step`), its text tower alone (`vvt.train.texts.text_params`)."""
  import jax
  import jax.numpy as jnp

  from vvt.config import loader
  from vvt.config import run_file
  import vvt.models
  from vvt.train import texts
  workdir = index['checkpoint']
  run = loader.load_run(run_file.path(workdir), purpose='summary')
  params, _ = texts.text_params(workdir, index.get('step'), raw=index.get('weights') == 'raw')
  module = vvt.models.build(run.model)
  ids, mask = texts.tokenizer(run.data, run.model, workdir, run.init_from)(queries)
  out = module.apply({'params': params}, jnp.asarray(ids), jnp.asarray(mask), method='encode_text')
  return np.asarray(jax.device_get(out), np.float32)
