"""Whether two sets of run directories hold the same results, exactly: what a refactor must leave unchanged.

    bash scripts/tiny_runs.sh CHECKOUT_A OUT_A DATA    # the same tiny runs from two checkouts
    bash scripts/tiny_runs.sh CHECKOUT_B OUT_B DATA
    python scripts/compare_runs.py OUT_A OUT_B

Compares every metrics.jsonl, results .json, .npz and .csv file under OUT_A with its namesake under OUT_B, value
for value, leaving out wall-clock figures (times, rates, TFLOP/s, MFU, input wait, the workdir); config.json byte
for byte. Prints each file that differs and the count; exits 1 if any differs.
"""
import json
import pathlib
import sys

import numpy as np

TIMING = {'time', 'steps_per_sec', 'clips_per_sec', 'eval_seconds', 'workdir', 'tflops_per_device', 'mfu',
          'input_wait_fraction'}  # wall-clock figures


def _strip(x):
  if isinstance(x, dict):
    return {k: _strip(v) for k, v in x.items() if k not in TIMING}
  return x


def same(pa: pathlib.Path, pb: pathlib.Path) -> bool:
  """Whether the run files `pa` and `pb` hold the same values (timings left out)."""
  if pa.suffix == '.jsonl':
    return ([_strip(json.loads(line)) for line in pa.read_text().splitlines()]
            == [_strip(json.loads(line)) for line in pb.read_text().splitlines()])
  if pa.suffix == '.json' and pa.name != 'config.json':
    try:
      return _strip(json.loads(pa.read_text())) == _strip(json.loads(pb.read_text()))
    except json.JSONDecodeError:
      pass
  if pa.suffix == '.npz':
    za, zb = np.load(pa), np.load(pb)
    return sorted(za) == sorted(zb) and all(np.array_equal(za[k], zb[k]) for k in za)
  return pa.read_bytes() == pb.read_bytes()


def main(a: str, b: str) -> int:
  a, b = pathlib.Path(a), pathlib.Path(b)
  files = sorted(p.relative_to(a) for p in a.rglob('*') if p.suffix in ('.jsonl', '.json', '.npz', '.csv')
                 and 'meta' not in p.parts and p.name != 'checksums.json')
  bad = 0
  for rel in files:
    if not (b / rel).exists():
      print('missing in B:', rel)
      bad += 1
    elif not same(a / rel, b / rel):
      print('DIFFERS:', rel)
      bad += 1
  print(f'{len(files)} files compared, {bad} differ')
  return 1 if bad else 0


if __name__ == '__main__':
  sys.exit(main(*sys.argv[1:3]))
