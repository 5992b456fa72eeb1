"""`vvt results`: a sweep's results table and plot (also run at the end of every `vvt sweep`).

  vvt results runs/schemes              -> runs/schemes/results.csv, results.md, results.png
  vvt results runs/schemes --no_summary    (skip params / GFLOPs: no JAX lowering)

Collects every trial's final metrics (its task's main metric, which the table leads with: video_top1,
reconstruction_loss, t2v_r1, average_map ...; and its task's other results, e.g. clip_top1), its best evaluation,
params, GFLOPs per view and steps/s; groups the trials by the swept fields (mean ± standard deviation over seeds);
lists the trials that are missing with their state (not started, claimed or running on a worker: host, pid, since,
lease; lease expired: its worker died; partial: interrupted; failed: with the error).
Works on a sweep that is still running.
"""
import sys

from vvt import fileio
from vvt.cli import common


def report(sweep_dir: str, with_summary: bool = True, out=print, selected=None) -> int:
  """Writes the results files, prints the grouped table; 1 (and a one-line message) if nothing finished.
  `selected`: the trials `vvt sweep --only` ran (the others not started are not counted as missing)."""
  from vvt.studies import results
  table = results.collect(sweep_dir, with_summary=with_summary, selected=selected)
  paths = results.write(table)
  out(results.markdown(table))
  out(f'[results] {paths["csv"]}, {paths["md"]}' + (f', {paths["png"]}' if paths['png'] else ''))
  if not table.finished:
    print(f'vvt results: error: no finished trial in {sweep_dir} yet: 0 of {len(table.rows)} finished '
          f'(missing: {", ".join(r["trial"] + " " + r["status"] for r in table.missing[:4])}'
          f'{", ..." if len(table.missing) > 4 else ""})', file=sys.stderr)
    return 1
  return 0


def _results(argv):
  p = common.Parser('vvt results', __doc__)
  p.add_argument('sweep_dir', metavar='DIR', help='a sweep directory (vvt sweep --workdir) or a folder of runs')
  p.add_argument('--no_summary', action='store_true', help='leave out params and GFLOPs per view')
  args, spec, overrides = common.parse(p, argv)
  if spec or overrides:
    raise common.UsageError('vvt results takes no --config: it reads each trial\'s config.json')
  if not fileio.exists(args.sweep_dir):
    raise common.UsageError(f'no such sweep directory: {args.sweep_dir}')
  try:
    return report(args.sweep_dir, with_summary=not args.no_summary)
  except FileNotFoundError as e:  # a directory without trials
    raise common.UsageError(str(e)) from None


def main(argv) -> int:
  return common.run('vvt results', _results, argv)
