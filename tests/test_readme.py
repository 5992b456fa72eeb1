"""The commands of README.md and docs/*.md run as written, and their links lead somewhere.

Marker convention: a fenced ```bash (or ```sh) block whose line just above is `<!-- checked -->` is run here, the
whole block as one bash script (`set -eo pipefail`), from a scratch folder that sees the repository's `configs/`,
`experiments/` and `scripts/`, with `vvt` meaning `python -m vvt` of this checkout. A comment line `# -> TEXT`
under a command says what the block prints: the pieces of TEXT between ` ... ` must appear in its output (stdout
and stderr), in that order. Mark only blocks that take seconds (help, `vvt summary`, dry runs, `vvt memory` of a
tiny config); the ones that train, convert datasets or need files from elsewhere are checked by hand.

Also: the README stays a front page (at most 250 lines), and every relative link of README.md and docs/*.md names
a file that exists and, with `#anchor`, a heading of that file.
"""
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.conftest import REPO

MARKER = '<!-- checked -->'
PAGES = [REPO / 'README.md', *sorted((REPO / 'docs').glob('*.md'))]
LINKED = ('configs', 'experiments', 'scripts')  # what the commands read, seen from the scratch folder
FENCE = re.compile(r'^```(\w*)\s*$')
EXPECT = '# -> '


def blocks(page: pathlib.Path):
  """(first line number, language, lines, checked) of every fenced block of a page."""
  out, lines = [], page.read_text().splitlines()
  i = 0
  while i < len(lines):
    m = FENCE.match(lines[i])
    if m:
      j = i + 1
      while j < len(lines) and not lines[j].startswith('```'):
        j += 1
      checked = i > 0 and lines[i - 1].strip() == MARKER
      out.append((i + 2, m.group(1), lines[i + 1:j], checked))
      i = j
    i += 1
  return out


def checked_blocks():
  found = []
  for page in PAGES:
    for line, _lang, body, checked in blocks(page):
      if checked:
        found.append(pytest.param(body, id=f'{page.relative_to(REPO)}:{line}'))
  return found


def expectations(body) -> list:
  """The `# -> TEXT` pieces of a block, in order."""
  pieces = []
  for line in body:
    if line.strip().startswith(EXPECT):
      pieces += [p.strip() for p in line.strip()[len(EXPECT):].split(' ... ') if p.strip()]
  return pieces


def test_the_marker_is_used_and_only_on_shell_blocks():
  marked = [(page.name, line, lang) for page in PAGES for line, lang, _, checked in blocks(page) if checked]
  assert {'README.md', 'configs.md', 'sweeps.md'} <= {name for name, _, _ in marked}, marked
  assert all(lang in ('bash', 'sh') for _, _, lang in marked), marked
  for page in PAGES:  # a marker not directly above a shell block would be silently ignored
    lines = page.read_text().splitlines()
    for i, text in enumerate(lines):
      if text.strip() == MARKER:
        assert i + 1 < len(lines) and re.match(r'^```(bash|sh)\s*$', lines[i + 1]), f'{page.name}:{i + 1}'


@pytest.mark.parametrize('body', checked_blocks())
def test_a_checked_block_runs_as_written(body, tmp_path):
  for name in LINKED:
    (tmp_path / name).symlink_to(REPO / name)
  script = '\n'.join(['set -eo pipefail', f'vvt() {{ "{sys.executable}" -m vvt "$@"; }}', *body, ''])
  env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get('PYTHONPATH', ''), JAX_PLATFORMS='cpu')
  proc = subprocess.run(['bash', '-c', script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
  output = proc.stdout + proc.stderr
  assert proc.returncode == 0, output
  at = 0
  for piece in expectations(body):
    found = output.find(piece, at)
    assert found >= 0, f'{piece!r} not in the output (after position {at}):\n{output}'
    at = found + len(piece)


def test_the_readme_is_a_front_page():
  assert len((REPO / 'README.md').read_text().splitlines()) <= 250


def slug(heading: str) -> str:
  """A heading's anchor as GitHub makes it: lower case, punctuation dropped, spaces to hyphens."""
  text = re.sub(r'[^\w\- ]', '', heading.strip().lower())
  return text.replace(' ', '-')


def anchors(page: pathlib.Path) -> set:
  out, fenced = set(), False
  for line in page.read_text().splitlines():
    if line.startswith('```'):
      fenced = not fenced
    elif not fenced and (m := re.match(r'^#{1,6} (.*)$', line)):
      out.add(slug(m.group(1)))
  return out


def test_slug_matches_github_s_anchors():
  assert slug("Parameters and FLOPs: the papers' tables") == 'parameters-and-flops-the-papers-tables'
  assert slug('Image checkpoints: `init_from`') == 'image-checkpoints-init_from'
  assert slug('Real footage, end to end') == 'real-footage-end-to-end'


@pytest.mark.parametrize('page', PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_leads_to_a_file_and_heading(page):
  text = re.sub(r'```.*?```', '', page.read_text(), flags=re.S)
  bad = []
  for target in re.findall(r'\]\(([^)\s]+)\)', text):
    if re.match(r'^[a-z]+:', target):
      continue
    path, _, anchor = target.partition('#')
    file = (page.parent / path).resolve() if path else page
    if not file.exists():
      bad.append(f'{target}: no such file')
    elif anchor and file.suffix == '.md' and anchor not in anchors(file):
      bad.append(f'{target}: no heading #{anchor}')
  assert bad == [], f'{page.relative_to(REPO)}: {bad}'
