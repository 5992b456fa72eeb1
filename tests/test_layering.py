"""Dependencies between vvt's packages run one way, bottom to top:

  vvt.fileio, vvt.progress (modules) <- models <- tasks <- data <- convert <- config <- train
    <- {inspection, studies} <- cli

`inspection` and `studies` are siblings (neither imports the other). Config files (`configs/`) and studies
(`experiments/`) build on vvt.config, vvt.studies and vvt.models, never on vvt.train or vvt.cli.
"""
import ast
import pathlib
import subprocess
import sys

import pytest

from tests.conftest import REPO

# Each rank imports only lower ranks (and itself); packages of one rank are siblings.
RANKS = (('models',), ('tasks',), ('data',), ('convert',), ('config',), ('train',), ('inspection', 'studies'), ('cli',))
LAYERS = tuple(layer for rank in RANKS for layer in rank)
RANK = {layer: i for i, rank in enumerate(RANKS) for layer in rank}
BOTTOM = ('fileio', 'progress')  # modules every package may import; they import no vvt module
NOT_FOR_SCRIPTS = ('train', 'cli')  # what configs/ and experiments/ may not import


def imports_of(path: pathlib.Path) -> set[str]:
  """The vvt packages (and the bottom modules) a module imports, at the top or inside functions."""
  out = set()
  for node in ast.walk(ast.parse(path.read_text())):
    names = []
    if isinstance(node, ast.Import):
      names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
      names = [node.module] + [f'{node.module}.{a.name}' for a in node.names]
    for name in names:
      parts = name.split('.')
      if parts[0] == 'vvt' and len(parts) > 1 and parts[1] in LAYERS + BOTTOM:
        out.add(parts[1])
  return out


def allowed(layer: str) -> set[str]:
  return {other for other in LAYERS if RANK[other] < RANK[layer]} | {layer, *BOTTOM}


def bad_imports(files, allowed_layers) -> dict:
  return {str(p.relative_to(REPO)): sorted(imports_of(p) - allowed_layers)
          for p in sorted(files) if imports_of(p) - allowed_layers}


@pytest.mark.parametrize('layer', LAYERS)
def test_a_package_imports_only_the_layers_below_it(layer):
  package = REPO / 'vvt' / layer
  assert package.is_dir(), f'vvt/{layer} is missing'
  assert bad_imports(package.rglob('*.py'), allowed(layer)) == {}, \
      f'vvt/{layer} may import only {sorted(allowed(layer))}'


@pytest.mark.parametrize('module', BOTTOM)
def test_the_bottom_modules_import_no_vvt_package(module):
  assert imports_of(REPO / 'vvt' / f'{module}.py') == set()


def test_the_siblings_do_not_import_each_other():
  assert 'studies' not in allowed('inspection') and 'inspection' not in allowed('studies')


@pytest.mark.parametrize('folder', ['configs', 'experiments'])
def test_config_files_and_studies_build_on_vvt_config_not_on_train_or_cli(folder):
  usable = set(LAYERS + BOTTOM) - set(NOT_FOR_SCRIPTS)
  assert bad_imports((REPO / folder).rglob('*.py'), usable) == {}, \
      f'{folder}/ may not import vvt.{" or vvt.".join(NOT_FOR_SCRIPTS)}'


def test_vvt_config_imports_without_jax_flax_or_tensorflow():
  """The CLI reports a bad config before loading the heavy libraries: every vvt.config module is light."""
  modules = sorted(p.stem for p in (REPO / 'vvt' / 'config').glob('*.py') if p.stem != '__init__')
  code = (f'import sys\nfor m in {modules!r}:\n  __import__("vvt.config." + m)\n'
          'print(sorted(m for m in ("jax", "flax", "tensorflow") if m in sys.modules))')
  proc = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0 and proc.stdout.strip() == '[]', proc.stdout + proc.stderr


def test_the_checker_sees_imports_inside_functions(tmp_path):
  module = tmp_path / 'm.py'
  module.write_text('def f():\n  from vvt.train import checkpoints\n  import vvt.cli.summary\n'
                    '  from vvt import fileio\n')
  assert imports_of(module) == {'train', 'cli', 'fileio'}


def data_reaches_of(path: pathlib.Path) -> set[str]:
  """What a module imports from vvt.data other than its entry's names: `vvt.data.<submodule>` (an import of a
  submodule, or a name imported from one) or a name of `vvt.data` that is not one of its entries."""
  import vvt.data
  out = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      out |= {a.name for a in node.names if a.name.startswith('vvt.data.')}
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
      if node.module.startswith('vvt.data.'):
        out.add(node.module)
      elif node.module == 'vvt.data':
        out |= {f'vvt.data.{a.name}' for a in node.names if a.name not in vvt.data.__all__}
  return out


def test_outside_vvt_data_only_its_entry_is_imported():
  """vvt.data has one narrow entry (`vvt/data/__init__.py`): the rest of vvt imports its names, never a
  submodule of it."""
  outside = [p for p in (REPO / 'vvt').rglob('*.py') if (REPO / 'vvt' / 'data') not in p.parents]
  reaches = {str(p.relative_to(REPO)): sorted(data_reaches_of(p)) for p in sorted(outside) if data_reaches_of(p)}
  assert reaches == {}


def test_the_entry_check_sees_submodules_and_unknown_names(tmp_path):
  module = tmp_path / 'm.py'
  module.write_text('def f():\n  from vvt.data import pipeline\n  from vvt.data.reading import errors\n'
                    '  import vvt.data.spec\n  from vvt.data import make_train_iterator\n')
  assert data_reaches_of(module) == {'vvt.data.pipeline', 'vvt.data.reading', 'vvt.data.spec'}


def test_the_entry_names_resolve_without_tensorflow_until_the_pipeline_is_asked_for():
  """Every name of the entry resolves; the config layer's names load no TensorFlow, the pipeline's do."""
  code = ('import sys\nimport vvt.data as d\nfrom vvt.data import CHOICES, missing_files, list_problems, DataSpec\n'
          'light = "tensorflow" not in sys.modules\nmissing = [n for n in d.__all__ if getattr(d, n, None) is None]\n'
          'print(light, missing, "tensorflow" in sys.modules)')
  proc = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True, timeout=300)
  assert proc.returncode == 0 and proc.stdout.split() == ['True', '[]', 'True'], proc.stdout + proc.stderr
