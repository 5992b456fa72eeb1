"""`vvt search`: the videos of a `vvt features` folder nearest a text query, by a video-text model.

  vvt search --features feats/ "a person in a car" ["another query" ...] [--queries FILE] [--k 5]

The folder's embeddings are a video-text checkpoint's video embeddings (`vvt features` of one); the query goes
through that checkpoint's text tower only (its text params read alone, its tokenizer: dataset.tokenizer or the
checkpoint folder's tokenizer.json), and each query prints its top-k videos, best first: rank, cosine similarity
and the video's id (its path as listed, for a video list). `--queries FILE`: one query a line. The video tower
does not run.
"""
import sys

from vvt.cli import common


def _queries(args) -> list:
  queries = [q.strip() for q in args.query if q.strip()]
  if args.queries:
    from vvt.inspection import search
    try:
      queries += search.read_queries(args.queries)
    except (OSError, ValueError) as e:
      raise common.UsageError(f'--queries {e}') from None
  if not queries:
    raise common.UsageError('no query: give one ("a person in a car") or --queries FILE (one a line)')
  return queries


def _search(argv):
  p = common.Parser('vvt search', __doc__, config=False)
  p.add_argument('query', nargs='*', help='the text queries')
  p.add_argument('--features', required=True, help='a vvt features folder of a video-text checkpoint')
  p.add_argument('--queries', default='', help='a file of queries, one a line')
  p.add_argument('--k', type=int, default=5, help='videos shown per query (default 5)')
  args, _, _ = common.parse(p, argv)
  if args.k < 1:
    raise common.UsageError(f'--k must be a positive number of videos, got {args.k}')
  queries = _queries(args)
  from vvt.inspection import search
  try:
    videos, ids, index = search.video_text_features(args.features)
  except (OSError, ValueError) as e:
    raise common.UsageError(str(e)) from None
  embeddings = search.encode_queries(index, queries)
  for query, emb in zip(queries, embeddings, strict=True):
    print(f'{query}')
    for rank, (row, score) in enumerate(search.top_k(videos, emb, args.k), start=1):
      print(f'  {rank}. {score:.4f}  {ids[row]}')
  sys.stdout.flush()


def main(argv) -> int:
  return common.run('vvt search', _search, argv)
