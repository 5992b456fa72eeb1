"""Packaging: pyproject.toml declares version ranges from the tested pins up to the next release that may break,
requirements*.txt pin the tested versions exactly, and installing vvt keeps a newer allowed JAX. Offline: pip
resolves against tiny local wheels only."""
import email.parser
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tomllib
import venv
import zipfile

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version
import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
EXTRAS = ('test', 'tpu', 'cuda12', 'cuda13', 'bench')
NEWER_JAX = ('0.11.0', '0.11.2', '0.12.0', '0.12.0.1')


def _project():
  return tomllib.loads((REPO / 'pyproject.toml').read_text())['project']


def _pins(name):
  """{canonical name: Version} of a requirements file; every line must be an exact `NAME==VERSION`."""
  pins = {}
  for line in (REPO / name).read_text().splitlines():
    line = line.split('#', 1)[0].strip()
    if not line:
      continue
    req = Requirement(line)
    (spec,) = req.specifier
    assert spec.operator == '==' and not req.extras and not req.marker, line
    pins[canonicalize_name(req.name)] = Version(spec.version)
  return pins


def _bounds(req):
  """(lower, upper) Versions of a `>=lower,<upper` requirement."""
  ops = {spec.operator: Version(spec.version) for spec in req.specifier}
  assert set(ops) == {'>=', '<'}, f'{req}: want exactly >=tested,<next'
  return ops['>='], ops['<']


def _requirements(lines):
  return [Requirement(line) for line in lines]


def test_runtime_dependencies_range_from_the_tested_pin():
  pins = _pins('requirements.txt')
  deps = _requirements(_project()['dependencies'])
  assert {canonicalize_name(r.name) for r in deps} == set(pins), 'requirements.txt pins exactly the runtime deps'
  for req in deps:
    lower, upper = _bounds(req)
    assert lower == pins[canonicalize_name(req.name)], f'{req}: lower bound is not the tested pin'
    assert upper > lower and req.specifier.contains(lower), req


def test_extras_range_from_the_tested_pins():
  pins = {**_pins('requirements.txt'), **_pins('requirements-test.txt')}
  extras = _project()['optional-dependencies']
  assert set(EXTRAS) <= set(extras)
  for extra in EXTRAS:
    for req in _requirements(extras[extra]):
      lower, _ = _bounds(req)
      assert lower == pins[canonicalize_name(req.name)], f'[{extra}] {req}: lower bound is not the tested pin'
  test_names = {canonicalize_name(r.name) for r in _requirements(extras['test'])}
  assert {'pytest', 'pytest-xdist', 'torch', 'transformers', 'ruff'} <= test_names
  assert set(_pins('requirements-test.txt')) <= test_names | {'libtpu'}  # libtpu: through jax[tpu]
  for extra, jax_extra in (('tpu', 'tpu'), ('cuda12', 'cuda12'), ('cuda13', 'cuda13')):
    (req,) = _requirements(extras[extra])
    assert req.name == 'jax' and req.extras == {jax_extra}


@pytest.mark.parametrize('name', ['jax', 'jaxlib'])
def test_newer_jax_is_allowed(name):
  (req,) = [r for r in _requirements(_project()['dependencies']) if r.name == name]
  for version in NEWER_JAX:
    assert req.specifier.contains(version), f'{req} refuses {version}'
  assert not req.specifier.contains('0.13.0') and not req.specifier.contains('0.10.1')


def test_python_versions_and_entry_point():
  project = _project()
  requires_python = SpecifierSet(project['requires-python'])
  assert all(requires_python.contains(v) for v in ('3.11.7', '3.12.1', '3.13.0'))
  assert project['scripts'] == {'vvt': 'vvt.cli:console'}
  import vvt.cli
  assert callable(vvt.cli.console)
  assert not (REPO / 'setup.py').exists()


def test_make_installs_the_tested_pins_and_lints():
  makefile = (REPO / 'Makefile').read_text()
  assert "-c requirements.txt -c requirements-test.txt" in makefile and "-e '.[test]'" in makefile
  assert 'test: lint' in makefile
  ruff = tomllib.loads((REPO / 'pyproject.toml').read_text())['tool']['ruff']
  assert ruff['line-length'] == 120
  selected = ruff['lint']['select']
  assert 'F' in selected and 'E9' in selected
  assert not any(rule == 'E' or rule.startswith('E1') for rule in selected), 'E1 wants 4-space indentation'


def test_make_demo_installs_no_test_extras(tmp_path):
  """`make demo` from a fresh clone installs vvt and its runtime dependencies only; `make test` the test extras,
  after which `make demo` installs nothing more (`make -n`: the commands it would run)."""
  for name in ('Makefile', 'pyproject.toml', 'requirements.txt', 'requirements-test.txt'):
    shutil.copy(REPO / name, tmp_path / name)
  def planned(target):
    return subprocess.run(['make', '-n', target], cwd=tmp_path, capture_output=True, text=True, check=True).stdout
  demo = planned('demo')
  assert '.venv/bin/pip install -q -c requirements.txt -e .\n' in demo
  assert '[test]' not in demo and 'requirements-test.txt' not in demo and 'vvt demo' in demo
  test = planned('test')
  assert "-c requirements.txt -c requirements-test.txt -e '.[test]'" in test
  assert 'touch .venv/.installed .venv/.installed-demo\n' in test  # the test install holds the demo's
  (tmp_path / '.venv').mkdir()
  for stamp in ('.installed', '.installed-demo'):
    (tmp_path / '.venv' / stamp).touch()
  assert 'pip install' not in planned('demo')


# --- pip, offline: a fresh environment holding a newer JAX, and local wheels of every dependency ---------------


def _write_wheel(folder, name, version, requires=()):
  """A wheel with nothing but metadata: enough for pip to resolve (never to import)."""
  stem = f'{canonicalize_name(name).replace("-", "_")}-{version}'
  metadata = '\n'.join(['Metadata-Version: 2.1', f'Name: {name}', f'Version: {version}']
                       + [f'Requires-Dist: {r}' for r in requires]) + '\n'
  wheel = 'Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n'
  with zipfile.ZipFile(folder / f'{stem}-py3-none-any.whl', 'w') as zf:
    zf.writestr(f'{stem}.dist-info/METADATA', metadata)
    zf.writestr(f'{stem}.dist-info/WHEEL', wheel)
    zf.writestr(f'{stem}.dist-info/RECORD', '')


def _install_metadata_only(env, name, version):
  """Marks `name==version` installed in the environment `env` (a dist-info folder, as pip leaves it)."""
  (site,) = env.glob('lib/python3*/site-packages')
  info = site / f'{canonicalize_name(name).replace("-", "_")}-{version}.dist-info'
  info.mkdir()
  (info / 'METADATA').write_text(f'Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n')
  (info / 'INSTALLER').write_text('pip\n')
  (info / 'RECORD').write_text('')


def _vvt_requires(tmp_path):
  """Requires-Dist of vvt's wheel, as setuptools writes it from pyproject.toml."""
  src = tmp_path / 'src'
  (src / 'vvt').mkdir(parents=True)
  (src / 'vvt' / '__init__.py').write_text('')
  for name in ('pyproject.toml', 'README.md'):
    (src / name).write_text((REPO / name).read_text())
  code = ('import sys; from setuptools import build_meta; '
          'print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))')
  out = subprocess.run([sys.executable, '-c', code, str(tmp_path)], cwd=src, check=True, capture_output=True,
                       text=True).stdout.strip().splitlines()[-1]
  metadata = email.parser.Parser().parsestr((tmp_path / out / 'METADATA').read_text())
  return [r for r in metadata.get_all('Requires-Dist') if 'extra ==' not in r]


def _pip_would_install(env, wheels, requirement):
  """{name: version} that `pip install requirement` would install into `env`, offline, from `wheels` only."""
  report = wheels.parent / 'report.json'
  pip_env = {k: v for k, v in os.environ.items() if not k.startswith('PIP_')}
  pip_env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK='1')
  subprocess.run([sys.executable, '-m', 'pip', '--python', str(env / 'bin' / 'python'), 'install', '--dry-run',
                  '--no-index', '--find-links', str(wheels), '--report', str(report), '-q', requirement],
                 check=True, env=pip_env, capture_output=True, text=True)
  return {canonicalize_name(i['metadata']['name']): i['metadata']['version']
          for i in json.loads(report.read_text())['install']}


@pytest.fixture
def env_with_newer_jax(tmp_path):
  """A fresh environment holding jax/jaxlib 0.12.0, and local wheels: every dependency at its tested pin (jax
  0.10.2 included, so pip could downgrade) and `vvt` requiring what setuptools makes of pyproject.toml."""
  env, wheels = tmp_path / 'env', tmp_path / 'wheels'
  venv.create(env, with_pip=False)
  wheels.mkdir()
  for name in ('jax', 'jaxlib'):
    _install_metadata_only(env, name, '0.12.0')
  for name, version in _pins('requirements.txt').items():
    _write_wheel(wheels, name, version)
  return env, wheels, _vvt_requires(tmp_path / 'meta')


def test_pip_install_keeps_a_newer_allowed_jax(env_with_newer_jax):
  env, wheels, requires = env_with_newer_jax
  _write_wheel(wheels, 'vvt', '0.1.0', requires)
  assert any(Requirement(r).name == 'jax' for r in requires), requires
  would_install = _pip_would_install(env, wheels, 'vvt==0.1.0')
  assert would_install.get('vvt') == '0.1.0' and would_install.get('flax') == '0.12.8', would_install
  assert 'jax' not in would_install and 'jaxlib' not in would_install, would_install


def test_pip_install_would_downgrade_jax_under_exact_pins(env_with_newer_jax):
  """The check above can fail: the same environment and wheels, with vvt requiring the pins, downgrade JAX."""
  env, wheels, _ = env_with_newer_jax
  _write_wheel(wheels, 'vvt', '0.1.0', [f'{n}=={v}' for n, v in _pins('requirements.txt').items()])
  would_install = _pip_would_install(env, wheels, 'vvt==0.1.0')
  assert would_install['jax'] == '0.10.2' and would_install['jaxlib'] == '0.10.2'
