"""The CPU seconds of each test module, the costliest first, as JSON, from the `--cpu-durations=0` report of a
whole-suite run (tests/conftest.py): where the suite's time goes, module by module.

  python -m pytest -n 2 --dist loadscope -q --cpu-durations=0 tests > suite.log
  python scripts/suite_costs.py suite.log > costs.json
  python scripts/suite_costs.py suite.log --replay

--replay: xdist's `loadscope` scheduling replayed on 2 workers with each test's measured CPU seconds (a module is
handed to a worker once that worker has at most 2 tests left), for xdist's default order of the modules (the most
tests first) and for the costliest first: when each worker would finish, against the ideal (half the total).
"""
import argparse
import json
import re
import sys

ROW = re.compile(r'^\s*([\d.]+)s (setup|call|teardown)\s+((\S+?)::\S+)')


def test_costs(lines) -> dict:
  """{test node id: its CPU seconds (every phase)}, from a report's lines: the rows under its 'CPU time' header
  only (--durations' rows of wall time look the same)."""
  costs, inside = {}, False
  for line in lines:
    if line.startswith('='):
      inside = 'CPU time' in line
      continue
    m = ROW.match(line) if inside else None
    if m:
      costs[m.group(3)] = costs.get(m.group(3), 0.0) + float(m.group(1))
  return costs


def by_module(tests: dict) -> dict:
  """{module path: [its tests' seconds]} of `test_costs`' table, in node id order."""
  out = {}
  for nodeid in sorted(tests):
    out.setdefault(nodeid.split('::')[0], []).append(tests[nodeid])
  return out


def module_costs(lines) -> dict:
  """{test module path: its tests' CPU seconds}, the costliest first, from a report's lines."""
  costs = {m: sum(v) for m, v in by_module(test_costs(lines)).items()}
  return {k: round(v, 1) for k, v in sorted(costs.items(), key=lambda kv: -kv[1])}


def replay(modules: dict, order, workers: int = 2) -> list:
  """Each worker's finishing time when xdist's loadscope hands out `modules` ({module: [test seconds]}) in
  `order`: one module each at the start, then a module to a worker whenever it has at most 2 tests left."""
  queue, clock, pending = list(order), [0.0] * workers, [[] for _ in range(workers)]

  def refill(w):
    if queue and len(pending[w]) <= 2:
      pending[w].extend(modules[queue.pop(0)])
  for w in range(workers):
    pending[w].extend(modules[queue.pop(0)] if queue else [])
  for w in range(workers):
    refill(w)
  while any(pending):
    _, w = min((clock[w] + pending[w][0], w) for w in range(workers) if pending[w])
    clock[w] += pending[w].pop(0)
    refill(w)
  return clock


def main(argv) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('log')
  p.add_argument('--replay', action='store_true', help='replay the scheduling on 2 workers (module docstring)')
  args = p.parse_args(argv)
  with open(args.log, encoding='utf-8') as f:
    lines = f.read().splitlines()
  tests = test_costs(lines)
  if not tests:
    print(f'{args.log}: no --cpu-durations rows (run pytest with --cpu-durations=0)', file=sys.stderr)
    return 2
  modules = by_module(tests)
  if not args.replay:
    print(json.dumps(module_costs(lines), indent=0))
    return 0
  ideal = sum(tests.values()) / 2
  for name, order in (('most tests first (xdist default)', sorted(modules, key=lambda m: -len(modules[m]))),
                      ('costliest first', sorted(modules, key=lambda m: -sum(modules[m])))):
    ends = replay(modules, order)
    print(f'{name}: workers done at {", ".join(f"{e:.0f} s" for e in ends)}; ideal {ideal:.0f} s')
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
