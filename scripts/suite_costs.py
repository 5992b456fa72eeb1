"""The CPU seconds of each test module, the costliest first, as JSON, from the `--cpu-durations=0` report of a
whole-suite run (tests/conftest.py): where the suite's time goes, module by module.

  python -m pytest -n 2 --dist loadscope -q --cpu-durations=0 tests > suite.log
  python scripts/suite_costs.py suite.log > costs.json
"""
import json
import re
import sys

ROW = re.compile(r'^\s*([\d.]+)s (setup|call|teardown)\s+(\S+?)::')


def module_costs(lines) -> dict:
  """{test module path: its tests' CPU seconds (every phase)}, the costliest first, from a report's lines: the rows
  under its 'CPU time' header only (--durations' rows of wall time look the same)."""
  costs, inside = {}, False
  for line in lines:
    if line.startswith('='):
      inside = 'CPU time' in line
      continue
    m = ROW.match(line) if inside else None
    if m:
      costs[m.group(3)] = costs.get(m.group(3), 0.0) + float(m.group(1))
  return {k: round(v, 1) for k, v in sorted(costs.items(), key=lambda kv: -kv[1])}


def main(argv) -> int:
  if len(argv) != 1:
    print(__doc__, file=sys.stderr)
    return 2
  with open(argv[0], encoding='utf-8') as f:
    costs = module_costs(f)
  if not costs:
    print(f'{argv[0]}: no --cpu-durations rows (run pytest with --cpu-durations=0)', file=sys.stderr)
    return 2
  print(json.dumps(costs, indent=0))
  return 0


if __name__ == '__main__':
  sys.exit(main(sys.argv[1:]))
