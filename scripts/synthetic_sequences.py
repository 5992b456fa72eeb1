"""Writes synthetic feature sequences with events and their annotations (`vvt.data.write_synthetic_sequences`).

  python scripts/synthetic_sequences.py data/untrimmed_features [--videos 40] [--length 128] [--seed 0]

then `vvt train --config configs/localization.py:data/untrimmed_features --workdir runs/loc`.
"""
import argparse

from vvt.data import write_synthetic_sequences


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  p.add_argument('output')
  p.add_argument('--videos', type=int, default=40)
  p.add_argument('--length', type=int, default=128)
  p.add_argument('--dim', type=int, default=32)
  p.add_argument('--classes', type=int, default=4)
  p.add_argument('--seed', type=int, default=0)
  a = p.parse_args(argv)
  ann = write_synthetic_sequences(a.output, videos=a.videos, length=a.length, dim=a.dim, classes=a.classes,
                                  seed=a.seed)
  segments = sum(len(v.segments) for v in ann.videos.values())
  print(f'{a.videos} videos, {segments} segments of {a.classes} classes: {a.output}')


if __name__ == '__main__':
  main()
