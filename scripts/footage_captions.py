"""Captions for the README's real footage (scripts/make_example_clips.py), and a word-level tokenizer for them.

  python scripts/footage_captions.py --footage data/footage

Writes FOOTAGE/train_captions.csv and test_captions.csv (`path,label,caption`: a row per caption, the captions
below, written by hand, two per clip chosen by the clip's piece number) from its train.csv and test.csv, and
FOOTAGE/tokenizer/tokenizer.json: a word-level tokenizer (the `tokenizers` library) over the captions' words,
lower-cased, `<pad>` id 0, `<unk>` id 1 (vvt reads it as `dataset.tokenizer`). A caption describes its clip's
scene; the clips of a scene share their captions' wording, so text->video R@1 cannot exceed 1 / (clips of a scene)
on these data.
"""
import argparse
import csv
import os

CAPTIONS = {
    'street': ['cyclists riding along a city street', 'bikes passing by on a busy road',
               'people on bicycles in the town outside'],
    'animation': ['a cartoon rabbit in a green meadow', 'an animated bunny standing in the grass',
                  'a colourful cartoon scene with a big rabbit'],
    'car': ['a man talking inside a car', 'a person speaking on the phone in a car',
            'a driver talking while sitting in a vehicle'],
}


def caption_rows(list_path: str) -> list:
  """[(path, label, caption)]: two captions of each listed clip's scene, chosen by its piece number."""
  rows = []
  with open(list_path, newline='') as f:
    for path, label in csv.reader(f):
      piece = int(os.path.basename(path).split('_')[-2])
      pool = CAPTIONS[label]
      rows += [(path, label, pool[(piece + k) % len(pool)]) for k in range(2)]
  return rows


def write_tokenizer(folder: str) -> str:
  """FOLDER/tokenizer.json over the captions' words; returns its path."""
  from tokenizers import Tokenizer
  from tokenizers import models
  from tokenizers import normalizers
  from tokenizers import pre_tokenizers
  words = sorted({w for pool in CAPTIONS.values() for c in pool for w in c.lower().split()})
  vocab = {'<pad>': 0, '<unk>': 1, **{w: i + 2 for i, w in enumerate(words)}}
  tok = Tokenizer(models.WordLevel(vocab, unk_token='<unk>'))
  tok.normalizer = normalizers.Lowercase()
  tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
  os.makedirs(folder, exist_ok=True)
  path = os.path.join(folder, 'tokenizer.json')
  tok.save(path)
  return path


def main():
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument('--footage', default='data/footage', help='the folder make_example_clips.py wrote')
  args = ap.parse_args()
  for split in ('train', 'test'):
    rows = caption_rows(os.path.join(args.footage, f'{split}.csv'))
    out = os.path.join(args.footage, f'{split}_captions.csv')
    with open(out, 'w', newline='') as f:
      writer = csv.writer(f)
      writer.writerow(['path', 'label', 'caption'])
      writer.writerows(rows)
    print(f'{out}: {len(rows)} captions of {len(rows) // 2} clips')
  print(write_tokenizer(os.path.join(args.footage, 'tokenizer')))


if __name__ == '__main__':
  main()
