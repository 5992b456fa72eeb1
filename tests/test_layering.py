"""Dependencies between vvt's packages run one way: models <- data <- convert <- train <- cli."""
import ast
import pathlib

import pytest

from tests.conftest import REPO

LAYERS = ('models', 'data', 'convert', 'train', 'cli')


def imports_of(path: pathlib.Path) -> set[str]:
  """The vvt packages a module imports, at the top or inside functions."""
  out = set()
  for node in ast.walk(ast.parse(path.read_text())):
    names = []
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      names = [node.module] + [f'{node.module}.{a.name}' for a in node.names]
    for name in names:
      parts = name.split('.')
      if parts[0] == 'vvt' and len(parts) > 1 and parts[1] in LAYERS:
        out.add(parts[1])
  return out


@pytest.mark.parametrize('layer', LAYERS)
def test_a_package_imports_only_the_layers_below_it(layer):
  allowed = set(LAYERS[:LAYERS.index(layer) + 1])
  bad = {str(p.relative_to(REPO)): sorted(imports_of(p) - allowed)
         for p in sorted((REPO / 'vvt' / layer).rglob('*.py')) if imports_of(p) - allowed}
  assert bad == {}, f'vvt/{layer} may import only {sorted(allowed)}'


def test_the_checker_sees_imports_inside_functions(tmp_path):
  module = tmp_path / 'm.py'
  module.write_text('def f():\n  from vvt.train import checkpoints\n  import vvt.cli.config\n')
  assert imports_of(module) == {'train', 'cli'}
