"""docs/weights.md's table of which --config to pass has a row for every `vvt convert --source`, naming the base
config of `vvt convert --help` (each source's record in `vvt.convert.sources`)."""
import re

from tests.conftest import REPO
from vvt.convert import sources


def _table_rows() -> dict:
  """{source: the --config cell} of the docs table whose header is `| --source | --config |`."""
  text = (REPO / 'docs' / 'weights.md').read_text()
  table = text[text.index('| `--source` | `--config` |'):].split('\n\n')[0]
  rows = {}
  for line in table.splitlines()[2:]:
    sources, config = [c.strip() for c in line.strip('|').split('|')]
    for source in re.findall(r'`(\w+)`', sources):
      rows[source] = config
  return rows


def test_every_source_has_its_base_config_row():
  rows = _table_rows()
  assert sorted(s for s in rows if s in sources.SOURCES) == sorted(sources.SOURCES)
  for source in sources.SOURCES.values():
    assert rows[source.name].startswith(f'`{source.base_config}`'), (source.name, rows[source.name])
