"""Lists of video files: a CSV or TSV of `path,label` lines and a class list (no TensorFlow).

What `vvt data convert --input train.csv --classes classes.txt` reads and what the `video_folder` source reads
at training time. A header line whose first field is `path` is allowed (its other column names then name the
extra columns); a label is a class name or an integer index into the class list (one name per line, line i =
label i); several labels of one video (multi-label data) are separated by ';' (`path,label1;label2`). Relative
video paths are taken from a root, by default the list's folder. A header naming a `caption` column
(`path,label,caption`) makes a caption list (video-text data): a row per caption, the rows of one video merged
(`merge_captions`).

A list of paths only (unlabelled video, for a task that reads no labels: `mae`, `jepa`) has a header `path`
alone, or one column on every line and no header; its rows' label is None (`NO_LABEL`). A folder given where a
list is expected (`read_video_rows` of a directory) lists every video file under it, recursively (hidden files
and folders left out), sorted by their paths relative to it: unlabelled too.

Without a class list, the classes are the labels' set: sorted names, or, when every label is an integer, the
labels themselves (no names).
"""
import csv
import os
from typing import Optional

from vvt.data.reading.video_files import VIDEO_EXTENSIONS

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


def _text(path) -> str:
  """The text of a list file; ValueError naming it and the first line that is not UTF-8."""
  with open(path, 'rb') as f:
    data = f.read()
  try:
    return data.decode('utf-8')
  except UnicodeDecodeError as e:
    line = data[:e.start].count(b'\n') + 1
    raise ValueError(f'{path}: line {line}: not UTF-8 text (byte 0x{data[e.start]:02x}); save the list as '
                     'UTF-8') from None


def _rows(text, delimiter):
  """[(1-based line, fields)] of the lines of `text` with any non-blank field."""
  lines = text.splitlines()
  return [(n, r) for n, r in ((n, next(csv.reader([line], delimiter=delimiter), []))
                              for n, line in enumerate(lines, start=1)) if r and any(c.strip() for c in r)]


def _check_columns(path, line, row, names, delimiter):
  """ValueError naming the list and line of a row with fewer than 2 columns, or more than `names` name."""
  shown = delimiter.join(row)
  if len(row) < 2:
    raise ValueError(f'{path}: line {line}: expected path{delimiter}label, got "{shown}"')
  if len(row) > len(names):
    named = f'its header names {len(names)} ({delimiter.join(names)})' if len(names) > 2 else 'the format is path,label'
    raise ValueError(f'{path}: line {line}: {len(row)} columns in "{shown}", but {named}; several labels of one '
                     f'video are separated by "{LABEL_SEPARATOR}" (path{delimiter}label1{LABEL_SEPARATOR}label2), '
                     'and other columns need a header line naming them (path,label,...)')


NO_LABEL = None  # the label of a row of a list of paths only, or of a folder's video


def _path_rows(path, rows, delimiter):
  """[(line, path, NO_LABEL, {})] of a list of paths only; ValueError naming the list and line of a row with more
  than one column."""
  for line, row in rows:
    if len(row) > 1:
      raise ValueError(f'{path}: line {line}: {len(row)} columns in "{delimiter.join(row)}", but the list gives '
                       'paths only (a header `path` alone, or one column on every line)')
  return [(line, row[0].strip(), NO_LABEL, {}) for line, row in rows]


def folder_videos(folder) -> list:
  """The video files under `folder` (recursive; hidden files and folders left out), as paths relative to it,
  sorted; ValueError naming the folder when it holds none."""
  found = []
  for top, dirs, files in os.walk(folder):
    dirs[:] = [d for d in dirs if not d.startswith('.')]
    found += [os.path.relpath(os.path.join(top, f), folder) for f in files
              if not f.startswith('.') and f.lower().endswith(VIDEO_EXTENSIONS)]
  if not found:
    raise ValueError(f'{folder}: a folder with no video files ({", ".join(VIDEO_EXTENSIONS)}) under it')
  return sorted(found)


def read_video_rows(path):
  """[(1-based line, path, label, extra dict)] from a CSV/TSV file, or a folder's videos (line: 1-based position,
  label NO_LABEL); a list of paths only gives label NO_LABEL. ValueError naming the file and line of a file that is
  not UTF-8, a row without a label or a row with more columns than its header names (path,label without a
  header)."""
  if os.path.isdir(path):
    return [(i, p, NO_LABEL, {}) for i, p in enumerate(folder_videos(path), start=1)]
  text = _text(path)
  first = text.splitlines()[0] if text.strip() else ''
  delimiter = '\t' if path.endswith('.tsv') or '\t' in first else ','
  rows = _rows(text, delimiter)
  names = ['path', 'label']
  if rows and rows[0][1][0].strip().lower() == 'path':
    header, rows = [c.strip() for c in rows[0][1]], rows[1:]
    if len(header) == 1:
      return _path_rows(path, rows, delimiter)
    names = header if len(header) >= 2 else names
  elif rows and all(len(row) == 1 for _, row in rows):
    return _path_rows(path, rows, delimiter)
  out = []
  for line, row in rows:
    _check_columns(path, line, row, names, delimiter)
    extra = {names[i]: row[i].strip() for i in range(2, len(row))}
    out.append((line, row[0].strip(), row[1].strip(), extra))
  return out


def read_video_list(path):
  """[(path, label, extra dict)] from a CSV/TSV file (`read_video_rows` without the line numbers; a caption list's
  rows of one video merged, `merge_captions`)."""
  return [row[1:] for row in merge_captions(path, read_video_rows(path))]


CAPTION = 'caption'  # the header's name of a caption column (video-text data)


def merge_captions(path, rows) -> list:
  """`rows` (of `read_video_rows`) of a list whose header names a `caption` column, merged per video: one row per
  path (where it is first listed), its extra field 'captions' the captions of all its rows in list order (the
  `caption` field dropped); other lists' rows unchanged. ValueError naming the list and line of an empty caption,
  or of a video listed again with another label."""
  if not rows or CAPTION not in rows[0][3]:
    return rows
  merged = {}
  for line, video, label, extra in rows:
    caption = extra.pop(CAPTION, '')
    if not caption:
      raise ValueError(f'{path}: line {line}: empty caption (a caption list gives each row a caption)')
    first = merged.setdefault(video, (line, video, label, {**extra, 'captions': []}))
    if first[2] != label:
      raise ValueError(f'{path}: line {line}: {video} has label {label!r} here but {first[2]!r} on line '
                       f'{first[0]} (the caption rows of a video share its label)')
    first[3]['captions'].append(caption)
  return list(merged.values())


def missing_videos(list_path, root=None) -> list:
  """One line per listed video file that does not exist (a stat each, nothing opened): the list, the 1-based
  line and the path; relative paths taken from `root`, by default the list's folder."""
  root = list_root(list_path) if root is None else root
  return [f'{list_path}: line {line}: video file {full} does not exist'
          for line, path, _, _ in read_video_rows(list_path)
          for full in [video_path(path, root)] if not os.path.isfile(full)]


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


def list_root(where: str) -> str:
  """The folder a list's relative video paths are taken from: the list's folder (a folder of videos: itself)."""
  return where if os.path.isdir(where) else os.path.dirname(where)


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


def unlabelled(rows) -> bool:
  """Whether rows (of `read_video_rows` or `read_video_list`) give no labels: a list of paths only, a folder."""
  return bool(rows) and all(row[-2] is NO_LABEL for row in rows)


def needs_labels_line(field: str, where: str, reason: str) -> str:
  """The refusal of unlabelled videos `where` (a list of paths only, or a folder) named by dataset field `field`,
  for a run that reads labels (`reason` says why)."""
  if os.path.isdir(where):
    return (f'dataset.{field}: {where} is a folder of videos, which gives no labels, but {reason}: list the videos '
            f'with their labels in a CSV (path,label lines, a classes.txt beside it) and point dataset.{field} at it')
  return (f'dataset.{field}: {where} lists paths only (no label column), but {reason}: give path,label rows (a '
          "classes.txt beside the list), or leave num_classes unset for a task that reads no labels "
          "(task.name='mae' or 'jepa')")


def list_class_names(list_path: str) -> Optional[tuple]:
  """The class names of a video list: its `classes.txt`, else its labels' set (None for integer labels, and for a
  list of paths only or a folder)."""
  if unlabelled(read_video_rows(list_path)):
    return None
  beside = class_list_beside(list_path)
  if beside:
    return tuple(read_class_list(beside))
  return labels_set(part.strip() for _, label, _ in read_video_list(list_path)
                    for part in label.split(LABEL_SEPARATOR))
