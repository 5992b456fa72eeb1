"""The DMVR source keeps the source contract across several files: random access by global index reads the row
the range reader gives, and `locate` names the file and the record in it."""
from data_helpers import check_source_contract
from data_helpers import small_config

from vvt.data.reading import registry
from vvt.data.reading import source


def test_random_access_across_files_equals_the_range_reader(labelled_dir):
  directory, files = labelled_dir  # 3 + 4 + 2 records
  src = registry.make_source(small_config(eval_files='data.tfrecord@3', data_dir=directory), 'test')
  rows = check_source_contract(src)
  want = [(f, k) for f, n in zip(files, (3, 4, 2), strict=True) for k in range(n)]
  assert [(r[0].decode(), int(r[1])) for r in rows] == want
  assert src.files == tuple(files) and src.damaged == ()
  assert src.record(5) == source.Row(files[1].encode(), 2, 5, rows[5][3], b'')
