"""Lists of video files: a CSV or TSV of `path,label` lines and a class list (no TensorFlow).

What `vvt data convert --input train.csv --classes classes.txt` reads and what the `video_folder` source reads
at training time. A header line whose first field is `path` is allowed (its other column names then name the
extra columns); a label is a class name or an integer index into the class list (one name per line, line i =
label i); several labels of one video (multi-label data) are separated by ';' (`path,label1;label2`). Relative
video paths are taken from a root, by default the list's folder.

Without a class list, the classes are the labels' set: sorted names, or, when every label is an integer, the
labels themselves (no names).
"""
import csv
import os
from typing import Optional

CLASS_LIST = 'classes.txt'  # the class list beside a video list, when none is given


def read_class_list(path):
  """The names of a class list file (one a line); ValueError when it is empty or repeats a name."""
  with open(path, encoding='utf-8') as f:
    names = [line.strip() for line in f if line.strip()]
  if not names:
    raise ValueError(f'class list {path} is empty')
  dup = {n for n in names if names.count(n) > 1}
  if dup:
    raise ValueError(f'class list {path} repeats {sorted(dup)}')
  return names


def read_video_list(path):
  """[(path, label, extra dict)] from a CSV/TSV file."""
  with open(path, encoding='utf-8', newline='') as f:
    text = f.read()
  first = text.splitlines()[0] if text.strip() else ''
  delimiter = '\t' if path.endswith('.tsv') or '\t' in first else ','
  rows = [r for r in csv.reader(text.splitlines(), delimiter=delimiter)
          if r and any(c.strip() for c in r)]
  header = None
  if rows and rows[0][0].strip().lower() == 'path':
    header, rows = [c.strip() for c in rows[0]], rows[1:]
  out = []
  for line, row in enumerate(rows, start=2 if header else 1):
    if len(row) < 2:
      raise ValueError(f'{path}: line {line}: expected path{delimiter}label, '
                       f'got {delimiter.join(row)!r}')
    names = header or [f'column{i}' for i in range(len(row))]
    extra = {names[i]: row[i].strip() for i in range(2, min(len(row), len(names)))}
    out.append((row[0].strip(), row[1].strip(), extra))
  return out


LABEL_SEPARATOR = ';'  # several labels of one video (multi-label data): `path,label1;label2`


def label_index(label, classes):
  """Index of `label` (a class name or an int), or a tuple of indices for several labels `a;b` (multi-label
  data); raises ValueError naming a label not in the class list."""
  if LABEL_SEPARATOR in label and label not in classes:
    return tuple(label_index(part.strip(), classes) for part in label.split(LABEL_SEPARATOR))
  if label in classes:
    return classes.index(label)
  try:
    index = int(label)
  except ValueError:
    index = None
  if index is None or not 0 <= index < len(classes):
    raise ValueError(f'label {label!r} is not in the class list '
                     f'({len(classes)} classes)')
  return index


def video_path(path: str, root: str) -> str:
  """A listed video's path: relative ones taken from `root`."""
  return path if os.path.isabs(path) else os.path.join(root, path)


def class_list_beside(list_path: str) -> Optional[str]:
  """The class list file beside a video list (`classes.txt` in its folder), or None."""
  path = os.path.join(os.path.dirname(os.path.abspath(list_path)), CLASS_LIST)
  return path if os.path.isfile(path) else None


def labels_set(labels) -> Optional[tuple]:
  """The class names of a list without a class list: its labels sorted, or None when they are all integers."""
  labels = set(labels)
  if all(_is_int(label) for label in labels):
    return None
  return tuple(sorted(labels))


def _is_int(text: str) -> bool:
  try:
    int(text)
  except ValueError:
    return False
  return True


def list_class_names(list_path: str) -> Optional[tuple]:
  """The class names of a video list: its `classes.txt`, else its labels' set (None for integer labels)."""
  beside = class_list_beside(list_path)
  if beside:
    return tuple(read_class_list(beside))
  return labels_set(part.strip() for _, label, _ in read_video_list(list_path)
                    for part in label.split(LABEL_SEPARATOR))
