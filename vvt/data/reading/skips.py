"""What a pass over a split skipped under dataset.on_error='skip', file by file.

    report = skip_report(spec, split, skipped_indices)   # JSON-ready dict
    skip_line(report, split, total)                      # the one console line

Two kinds of skipped videos: records of the index that the pipeline skipped
as bad (their global indices, e.g. `pipeline.skipped_videos` of evaluation
batches, named by the source's `locate`; reason and detail from
`errors.skipped_records()` where this process read them), and records past the
damage in a TFRecord file whose framing breaks (a truncated file, a corrupt
record header, a file of other bytes: the source's `damaged`), which are never
indexed. A video of a video list is named by the list and its row. The report lists each
file with its skipped records, the reasons and the first detail:

    {'videos': N, 'reasons': {reason: n}, 'files': [{'file', 'records': [record
     in file ...], 'not_indexed': n, 'reasons': {reason: n}, 'detail'}]}
"""
from typing import Optional

from vvt.data.reading import errors
from vvt.data.reading import registry

_MAX_FILES_SAID = 4
_SAID = set()  # records and damaged files already said by `new_skips_line`


def _entry(files, path):
  return files.setdefault(path, {'file': path, 'records': [], 'not_indexed': 0,
                                 'reasons': {}, 'detail': ''})


def _add(entry, reason, detail, n=1):
  entry['reasons'][reason] = entry['reasons'].get(reason, 0) + n
  if detail and not entry['detail']:
    entry['detail'] = detail


def skip_report(spec, split, skipped_indices) -> dict:
  """The videos of `split` skipped under on_error='skip', by file (see the module doc)."""
  source = registry.make_source(spec, split)
  noted = errors.skipped_records()
  files = {}
  for g in sorted(int(i) for i in skipped_indices):
    path, record = source.locate(g)
    reason, detail = noted.get((path, record), ('bad_record', ''))
    entry = _entry(files, path)
    entry['records'].append(record)
    _add(entry, reason, detail)
  for path, record, byte, why, lost in source.damaged:
    entry = _entry(files, path)
    entry['not_indexed'] += int(lost)
    _add(entry, 'damaged_file', f'{why}; records from {record} on (byte {byte}) not read', int(lost))
  reasons = {}
  for entry in files.values():
    for reason, n in entry['reasons'].items():
      reasons[reason] = reasons.get(reason, 0) + n
  return {'videos': sum(len(e['records']) + e['not_indexed'] for e in files.values()),
          'reasons': reasons, 'files': list(files.values())}


def _ranges(numbers) -> str:
  """[1, 3, 4, 5] -> '1, 3-5'."""
  out, run = [], []
  for n in numbers:
    if run and n == run[-1] + 1:
      run.append(n)
      continue
    if run:
      out.append(f'{run[0]}-{run[-1]}' if len(run) > 1 else str(run[0]))
    run = [n]
  if run:
    out.append(f'{run[0]}-{run[-1]}' if len(run) > 1 else str(run[0]))
  return ', '.join(out)


def _file_text(entry) -> str:
  parts = []
  if entry['records']:
    word = 'records' if len(entry['records']) > 1 else 'record'
    parts.append(f'{word} {_ranges(entry["records"])}')
  if entry['not_indexed']:
    n = entry['not_indexed']
    parts.append(f'{n} record{"s" if n > 1 else ""} past its damage')
  reasons = ', '.join(f'{r} {n}' for r, n in sorted(entry['reasons'].items()))
  detail = f': {entry["detail"]}' if entry['detail'] else ''
  return f'{entry["file"]}: {" and ".join(parts)} ({reasons}{detail})'


def skip_line(report, split: str, total: int) -> str:
  """One line: how many videos of `split` (of `total`) were skipped, in which files, why."""
  files = report['files']
  said = '; '.join(_file_text(e) for e in files[:_MAX_FILES_SAID])
  more = len(files) - _MAX_FILES_SAID
  tail = f'; and {more} more files (all in the results JSON)' if more > 0 else ''
  n = report['videos']
  return (f'[eval] {split}: skipped {n} of {total} videos under dataset.on_error=skip, in '
          f'{len(files)} file{"s" if len(files) != 1 else ""}: {said}{tail}')


def start_account() -> None:
  """Forgets what this process skipped and said so far (`errors.reset_error_counts`, the records
  `new_skips_line` said): a run starts its own account, so a second run in one process (a command called through
  its `main(argv)`) names only its own skips."""
  errors.reset_error_counts()
  _SAID.clear()


def new_skips_line(prefix: str = '[train]') -> Optional[str]:
  """One line naming the records this process skipped under on_error='skip' (and the damaged files whose
  tails were not indexed) since the last call, by file; None when there are none. For training, where
  bad records are dropped from the stream: its counts are the `data_skipped_*` metrics."""
  files = {}
  new_records = sorted(k for k in errors.skipped_records().items() if k[0] not in _SAID)
  for (path, record), (reason, detail) in new_records:
    entry = _entry(files, path)
    entry['records'].append(record)
    _add(entry, reason, detail)
    _SAID.add((path, record))
  for path, why in errors.damaged_files():
    if (path, why) not in _SAID:
      _add(_entry(files, path), 'damaged_file', f'{why}; the rest of the file not read')
      _SAID.add((path, why))
  if not files:
    return None
  said = '; '.join(_file_text(e) for e in list(files.values())[:_MAX_FILES_SAID])
  more = len(files) - _MAX_FILES_SAID
  tail = f'; and {more} more files' if more > 0 else ''
  n = len(new_records)
  return (f'{prefix} skipped under dataset.on_error=skip: {n} record{"s" if n != 1 else ""} '
          f'in {len(files)} file{"s" if len(files) != 1 else ""}: {said}{tail}')
