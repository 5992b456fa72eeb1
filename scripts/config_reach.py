"""How far the run config (an ml_collections.ConfigDict) reaches into vvt/: a reproducible count from the source.

    python scripts/config_reach.py [--root vvt] [--list]

Prints, by static reading of every module under ROOT (no imports):
  modules receiving a ConfigDict   modules with a function whose parameter is named like a config (`config`, `cfg`,
                                   `*_cfg`, `*_config`) or that passes one on (an argument `config`, `cfg.model`,
                                   `config.dataset`, ...): the modules the dict travels through
  .get( re-defaults                `X.get(...)` and `getattr(X, name, default)` on a config-named X, outside
                                   ROOT/config (the schema's home, where defaults belong)
  lines per package                `wc -l` of each package's modules
A heuristic of names, the same before and after a change: a renamed parameter that still receives a ConfigDict
would escape it, so read `--list` too.
"""
import argparse
import ast
import collections
import pathlib
import re

CONFIG_NAME = re.compile(r'^(config|cfg|[a-z_]+_cfg|[a-z_]+_config)$')
SECTIONS = ('model', 'dataset', 'optimizer', 'schedule', 'loss', 'eval', 'checkpoint', 'mesh', 'distributed',
            'init_from')


def _root_name(node):
  """The Name at the root of an attribute / subscript / call chain (`config.eval.get` -> 'config')."""
  while isinstance(node, (ast.Attribute, ast.Subscript, ast.Call)):
    node = node.func if isinstance(node, ast.Call) else node.value
  return node.id if isinstance(node, ast.Name) else None


def _is_config_value(node) -> bool:
  """`config`, `cfg`, `model_cfg`, or a section of one (`config.dataset`, `cfg.model`)."""
  if isinstance(node, ast.Name):
    return bool(CONFIG_NAME.match(node.id))
  if isinstance(node, ast.Attribute) and node.attr in SECTIONS:
    return _is_config_value(node.value)
  return False


def scan(path: pathlib.Path) -> dict:
  tree = ast.parse(path.read_text(), str(path))
  params, passes, gets = [], [], []
  for node in ast.walk(tree):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
      args = node.args
      for a in args.posonlyargs + args.args + args.kwonlyargs:
        if CONFIG_NAME.match(a.arg):
          params.append(f'{getattr(node, "name", "lambda")}({a.arg})')
    elif isinstance(node, ast.Call):
      values = list(node.args) + [k.value for k in node.keywords]
      passes += [f'line {node.lineno}' for v in values if _is_config_value(v)]
      func = node.func
      if isinstance(func, ast.Attribute) and func.attr == 'get' and CONFIG_NAME.match(_root_name(func.value) or ''):
        gets.append(f'line {node.lineno}')
      elif (isinstance(func, ast.Name) and func.id == 'getattr' and len(node.args) == 3
            and CONFIG_NAME.match(_root_name(node.args[0]) or '')):
        gets.append(f'line {node.lineno}')
  return dict(params=params, passes=passes, gets=gets)


def main():
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument('--root', default='vvt')
  p.add_argument('--list', action='store_true', help='name the modules and the .get( sites')
  args = p.parse_args()
  root = pathlib.Path(args.root)
  receiving, gets, lines = [], [], collections.Counter()
  for path in sorted(root.rglob('*.py')):
    rel = path.relative_to(root.parent)
    package = rel.parts[1] if len(rel.parts) > 2 else '(top)'
    lines[package] += len(path.read_text().splitlines())
    found = scan(path)
    if found['params'] or found['passes']:
      receiving.append((str(rel), found))
    if rel.parts[1] != 'config':
      gets += [f'{rel} {g}' for g in found['gets']]
  print(f'modules receiving a ConfigDict: {len(receiving)}')
  if args.list:
    for rel, found in receiving:
      print(f'  {rel}: {len(found["params"])} parameters, {len(found["passes"])} calls passing one')
  print(f'.get( re-defaults of config fields outside {root}/config: {len(gets)}')
  if args.list:
    for g in gets:
      print(f'  {g}')
  print('lines per package: ' + ', '.join(f'{k} {v}' for k, v in sorted(lines.items())) +
        f'; total {sum(lines.values())}')


if __name__ == '__main__':
  main()
