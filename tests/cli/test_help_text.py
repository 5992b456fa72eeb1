"""Every command's --help shows its module docstring line for line: a line that ends with a backslash (a shell
continuation in an example) keeps its line break."""
import ast
import importlib
import pathlib

import pytest

from vvt.cli import COMMANDS
from vvt.cli import train as train_cli

MODULES = sorted({module for module, _, _ in COMMANDS.values()})


@pytest.mark.parametrize('name', MODULES)
def test_the_docstring_keeps_every_line_of_its_source(name):
  module = importlib.import_module(name)
  source = pathlib.Path(module.__file__).read_text()
  node = ast.parse(source).body[0]
  written = ast.get_source_segment(source, node.value)  # the literal as written, quotes included
  assert module.__doc__.count('\n') == written.count('\n'), f'{name}: a backslash at a line end joins two lines'


def test_train_help_shows_the_fine_tune_example_on_two_lines(capsys):
  with pytest.raises(SystemExit):
    train_cli.train_main(['--help'])
  lines = capsys.readouterr().out.splitlines()
  at = next(i for i, l in enumerate(lines) if '--init CHECKPOINT --workdir runs/mine' in l)
  assert lines[at].endswith('--workdir runs/mine \\')
  assert lines[at + 1].strip().startswith('--config.dataset.train_files=...')
