"""docs/weights.md's table of which --config to pass has a row for every `vvt convert --source`, naming the base
config of `vvt convert --help` (`vvt.cli.convert.BASE_CONFIGS`)."""
import re

from tests.conftest import REPO
from vvt.cli import convert as convert_cli
from vvt.convert.video import SOURCES


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
  assert sorted(s for s in rows if s in SOURCES) == sorted(SOURCES)
  for source in SOURCES:
    assert rows[source].startswith(f'`{convert_cli.BASE_CONFIGS[source][0]}`'), (source, rows[source])
