"""XLA:CPU options A/B: vvt's step under several XLA_FLAGS sets against one Hugging Face baseline, interleaved.

    .venv/bin/python benchmarks/xla_cpu_flags.py [--rows REGEX] [--variants NAME,NAME] [--layers N]
        [--rounds R] [--iters N] [--warmup N] [--json OUT]

Each round runs, for every selected row of `benchmarks/compare_hf.py`, one fresh vvt process per variant (in a
rotating order, so no variant always runs first) and one HF process, each exactly as compare_hf.py runs its
children (same spec, compilation caches off). On a shared host the speed drifts between minutes, so the figures
to read are the ratios within a round: `variant / default` (vvt time under the variant over vvt time with no
extra flags, in the same round) and `HF / vvt`; the report gives their min and median over the rounds, and the
min / median step times.

Variants (XLA_FLAGS added to the environment's own):
  default       nothing added
  onednn        --xla_cpu_use_onednn=true                           oneDNN matmuls and fused ops
  xnnpack       --xla_cpu_use_xnnpack=true                          XNNPACK for what it supports
  xnn_dot       --xla_cpu_experimental_xnn_fusion_type=dot          XNNPACK fusions rooted at dots
  ynn_dot       --xla_cpu_experimental_ynn_fusion_type=dot          YNNPACK fusions rooted at dots
  onednn_dot    --xla_cpu_experimental_onednn_fusion_type=dot       oneDNN fusions rooted at dots
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys

VARIANTS = {
    'default': '',
    'onednn': '--xla_cpu_use_onednn=true',
    'xnnpack': '--xla_cpu_use_xnnpack=true',
    'xnn_dot': '--xla_cpu_experimental_xnn_fusion_type=dot',
    'ynn_dot': '--xla_cpu_experimental_ynn_fusion_type=dot',
    'onednn_dot': '--xla_cpu_experimental_onednn_fusion_type=dot',
}


def _compare_hf():
  path = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'compare_hf.py')
  spec = importlib.util.spec_from_file_location('compare_hf', path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def _with_flags(flags: str, fn):
  """Runs `fn()` with `flags` appended to XLA_FLAGS (the children inherit the environment)."""
  before = os.environ.get('XLA_FLAGS')
  os.environ['XLA_FLAGS'] = ' '.join(filter(None, [before, flags]))
  try:
    return fn()
  finally:
    if before is None:
      os.environ.pop('XLA_FLAGS', None)
    else:
      os.environ['XLA_FLAGS'] = before


def measure(cmp, name: str, mode: str, args, variants: list[str]) -> dict:
  """Every round of one row: each variant's vvt process (rotating order) and one HF process."""
  fields, hf_model, hf_attention = cmp.ROWS[name]
  spec = dict(fields=fields, hf_model=hf_model, hf_attention=hf_attention, mode=mode, device='cpu',
              batch=args.batch, layers=args.layers, image_size=args.image_size, dtype='float32',
              precision='default', compile=False, iters=args.iters, warmup=args.warmup, threads=args.threads,
              count_flops=False)
  rounds = []
  for r in range(args.rounds):
    order = variants[r % len(variants):] + variants[:r % len(variants)]
    result = {}
    for v in order:
      result[v] = _with_flags(VARIANTS[v], lambda: cmp.run_child('vvt', spec, args.timeout))
      cmp._progress(f'{name}/{mode} {v} round {r + 1}: ' + (
          result[v].get('error') or f'median {statistics.median(result[v]["times"]) * 1e3:.0f} ms'))
    result['hf'] = cmp.run_child('hf', spec, args.timeout)
    cmp._progress(f'{name}/{mode} hf round {r + 1}: ' + (
        result['hf'].get('error') or f'median {statistics.median(result["hf"]["times"]) * 1e3:.0f} ms'))
    rounds.append(result)
  return dict(row=name, mode=mode, rounds=rounds)


def summarise(row: dict, variants: list[str]) -> list[str]:
  """Markdown lines: per variant, min / median ms, and min / median over rounds of the paired ratios."""
  lines = []
  ok = [r for r in row['rounds'] if not any('error' in s for s in r.values())]
  if not ok:
    errors = [s['error'] for r in row['rounds'] for s in r.values() if 'error' in s]
    return [f'| {row["row"]}/{row["mode"]} | error: {errors[0]} | | | |']
  med = {k: [statistics.median(r[k]['times']) for r in ok] for k in variants + ['hf']}
  for v in variants:
    times = [t for r in ok for t in r[v]['times']]
    vs_default = [m / d for m, d in zip(med[v], med['default'], strict=True)]
    hf_over = [h / m for h, m in zip(med['hf'], med[v], strict=True)]
    lines.append(f'| {row["row"]}/{row["mode"]} | {v} | {min(times) * 1e3:.0f} / {statistics.median(times) * 1e3:.0f}'
                 f' | {min(vs_default):.2f} / {statistics.median(vs_default):.2f}'
                 f' | {min(hf_over):.2f} / {statistics.median(hf_over):.2f} |')
  hf_times = [t for r in ok for t in r['hf']['times']]
  lines.append(f'| {row["row"]}/{row["mode"]} | HF | {min(hf_times) * 1e3:.0f} / '
               f'{statistics.median(hf_times) * 1e3:.0f} | | |')
  return lines


def main(argv=None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  ap.add_argument('--rows', default='timesformer_divided/train', help='regex over compare_hf ROW/MODE')
  ap.add_argument('--variants', default='default,onednn,xnn_dot,ynn_dot',
                  help=f'comma-separated, from {", ".join(VARIANTS)} (default is always measured)')
  ap.add_argument('--layers', type=int, default=4)
  ap.add_argument('--batch', type=int, default=1)
  ap.add_argument('--image-size', type=int, default=224)
  ap.add_argument('--rounds', type=int, default=3)
  ap.add_argument('--iters', type=int, default=3)
  ap.add_argument('--warmup', type=int, default=1)
  ap.add_argument('--threads', type=int, default=0)
  ap.add_argument('--timeout', type=float, default=1800)
  ap.add_argument('--json')
  args = ap.parse_args(argv)
  variants = [v for v in args.variants.split(',') if v]
  unknown = [v for v in variants if v not in VARIANTS]
  if unknown:
    print(f'xla_cpu_flags: unknown variant {unknown[0]!r}; known: {", ".join(VARIANTS)}', file=sys.stderr)
    return 2
  variants = ['default'] + [v for v in variants if v != 'default']
  cmp = _compare_hf()
  import re
  selected = [(n, m) for n in cmp.ROWS for m in cmp.MODES if re.search(args.rows, f'{n}/{m}')]
  if not selected:
    print(f'xla_cpu_flags: no row matches --rows {args.rows!r}', file=sys.stderr)
    return 2
  rows = [measure(cmp, n, m, args, variants) for n, m in selected]
  print(f'{args.layers} layers, batch {args.batch}, {args.image_size}^2, float32, {args.rounds} rounds x '
        f'{args.iters} timed steps after {args.warmup} warm-up; XLA_FLAGS of the environment: '
        f'{os.environ.get("XLA_FLAGS", "") or "none"}')
  print()
  print('| row | variant | vvt min / median ms | variant / default, min / median | HF / vvt, min / median |')
  print('|---|---|---:|---:|---:|')
  for row in rows:
    print('\n'.join(summarise(row, variants)))
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(dict(args=vars(args), variants={v: VARIANTS[v] for v in variants}, rows=rows), f, indent=1)
  return 0


if __name__ == '__main__':
  sys.exit(main())
