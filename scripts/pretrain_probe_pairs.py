"""The pretrained / random pairs of pretrain -> probe sweeps (experiments/pretrain_probe.py) in one picture.

    python scripts/pretrain_probe_pairs.py experiments/results/pretrain_probe/{synthetic,synthetic_256_labels} \\
        --out experiments/results/pretrain_probe/pairs.png

Each DIR is a probe sweep's folder (or a copy of its results.csv, as `vvt results` writes it: columns backbone,
seed, video_top1): one panel per DIR, titled with its name, one point per seed at (the probe's `video_top1` on the
random backbone, on the pretrained one), the diagonal where they are equal. A point above the diagonal is a seed
where pretraining paid. Prints one line per DIR: its pairs.
"""
import argparse
import csv
import os
import sys

RANDOM = 'random'


def pairs(results_csv: str) -> list:
  """[(seed, pretrained video_top1, random video_top1)] of the seeds with both backbones finished, by seed."""
  by_seed = {}
  with open(results_csv, newline='', encoding='utf-8') as f:
    for row in csv.DictReader(f):
      if row.get('status') == 'finished' and row.get('video_top1'):
        side = 'random' if row['backbone'] == RANDOM else 'pretrained'
        by_seed.setdefault(int(row['seed']), {})[side] = float(row['video_top1'])
  return [(s, v['pretrained'], v['random']) for s, v in sorted(by_seed.items()) if len(v) == 2]


def draw(panels: dict, out: str) -> None:
  """A PNG `out` of one scatter panel per name of `panels` (name -> its `pairs`)."""
  import matplotlib
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt
  cols = min(3, len(panels))
  rows = -(-len(panels) // cols)
  fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 3.6 * rows + 0.4), squeeze=False)
  for ax in axes.flat[len(panels):]:
    ax.set_axis_off()
  for ax, (name, points) in zip(axes.flat[:len(panels)], panels.items(), strict=True):
    ax.plot([0, 1], [0, 1], color='0.6', lw=1, ls='--')
    ax.scatter([r for _, _, r in points], [p for _, p, _ in points], color='C0', zorder=3)
    for seed, p, r in points:
      ax.annotate(str(seed), (r, p), textcoords='offset points', xytext=(4, -10), fontsize=7)
    ax.set(xlim=(0, 1.02), ylim=(0, 1.02), aspect='equal', title=name, xlabel='random backbone: video_top1')
    ax.title.set_fontsize(9)
    ax.set_ylabel('pretrained backbone: video_top1')
  fig.suptitle('pretrained vs random, per seed (above the diagonal: pretraining paid)', fontsize=10)
  fig.tight_layout(rect=(0, 0, 1, 0.96))
  fig.savefig(out, dpi=100)
  plt.close(fig)


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('dirs', nargs='+', help='probe sweep folders (each with its results.csv)')
  p.add_argument('--out', required=True, help='the PNG to write')
  args = p.parse_args(argv)
  panels = {}
  for d in args.dirs:
    path = os.path.join(d, 'results.csv')
    if not os.path.isfile(path):
      print(f'pretrain_probe_pairs: {path}: no such file', file=sys.stderr)
      return 2
    panels[os.path.basename(os.path.normpath(d))] = pairs(path)
  empty = [name for name, points in panels.items() if not points]
  if empty:
    print(f'pretrain_probe_pairs: no seed with both backbones finished in {", ".join(empty)}', file=sys.stderr)
    return 2
  for name, points in panels.items():
    print(f'{name}: ' + '; '.join(f'{s}: {p:.3f} / {r:.3f}' for s, p, r in points))
  draw(panels, args.out)
  return 0


if __name__ == '__main__':
  sys.exit(main())
