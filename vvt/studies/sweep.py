"""Sweeps: a study's trials as dicts of config overrides, built from small generators, and their names.

An experiment file (`experiments/*.py`) has `get_config(arg=None)` (the base run config) and
`get_sweep(arg=None)`, which returns or yields one dict per trial, `{dotted field path: value}`, e.g.

  from vvt.studies import sweep

  def get_sweep(arg=None):
    return sweep.product(sweep.axis('model.attention', ['space', 'divided']), sweep.seeds(3))

The helpers (in the spirit of Kauldron's sweep generators and Scenic's `get_hyper`) all return lists of
dicts, so they nest: `axis` (one field over values), `product` (every combination), `zipped` (element by
element), `chain` (one study after another), `seeds` (the `seed` field 0..n-1), `fixed` (one trial), and
`variants` (named settings of several fields at once, e.g. a model family with the fields it implies,
which then appear in the trial's name by their label only). A field is always its dotted path as a string,
`'model.attention'`, in every helper.

Every trial is applied to the base config with the same loader as `--config.a.b=VALUE`
(`vvt.config.loader.load`), so values are given as Python values (`'divided'`, `(1, 8, 8)`, `0.1`) and turned
into that syntax by `raw_value`. A trial's name comes from its overrides (`trial_name`): readable, stable
across runs (the same overrides always give the same name) and safe as a directory name.
Nothing here imports JAX.
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import re
from typing import Any, Iterable, Mapping, Sequence

from vvt.config.errors import ConfigError

Overrides = dict[str, Any]

NAME_KEY = '__name__'  # in a trial dict: [(label, value, fields it stands for)] from `variants`
MAX_NAME = 120  # longer names end in a hash of the full name instead
_UNSAFE = re.compile(r'[^A-Za-z0-9._+=-]+')


class SweepError(ConfigError):
  """A sweep definition is wrong (no sweep, duplicate trial names, a bad axis): one line naming it."""


# ----------------------------------------------------------------------------- building sweeps


def fixed(fields: Mapping[str, Any]) -> list[Overrides]:
  """One trial setting `fields` ({dotted path: value}): `fixed({'model.attention': 'joint', 'seed': 0})`."""
  return [dict(fields)]


def axis(field: str, values: Iterable) -> list[Overrides]:
  """`field` over `values`: [{field: v} for v in values]."""
  values = list(values)
  if not values:
    raise SweepError(f'sweep axis {field!r} has no values')
  return [{field: v} for v in values]


def seeds(n: int, start: int = 0, field: str = 'seed') -> list[Overrides]:
  """The run's `seed` over start..start+n-1 (results are averaged over it)."""
  if n < 1:
    raise SweepError(f'seeds(n={n}): n must be >= 1')
  return axis(field, range(start, start + n))


def variants(label: str, options: Mapping[str, Mapping[str, Any]]) -> list[Overrides]:
  """Named settings of several fields: `variants('scheme', {'space': {'model.attention': 'space',
  'model.positional_embedding': 'spatial'}, ...})`. The trial name shows `scheme=space`, not the fields."""
  if not options:
    raise SweepError(f'sweep variants {label!r} has no options')
  return [{NAME_KEY: [(label, name, tuple(fields))], **fields} for name, fields in options.items()]


def _merge(dicts: Sequence[Mapping]) -> Overrides:
  out = {}
  for d in dicts:
    for k, v in d.items():
      if k == NAME_KEY:
        out[k] = [*out.get(k, []), *v]
      elif k in out and out[k] != v:
        raise SweepError(f'sweep: field {k!r} set twice in one trial ({out[k]!r} and {v!r})')
      out[k] = v
  return out


def product(*axes: Iterable[Mapping]) -> list[Overrides]:
  """Every combination of the axes (the last varies fastest)."""
  return [_merge(combo) for combo in itertools.product(*[list(a) for a in axes])]


def zipped(*axes: Iterable[Mapping]) -> list[Overrides]:
  """The axes element by element (all of the same length)."""
  axes = [list(a) for a in axes]
  if len({len(a) for a in axes}) > 1:
    raise SweepError(f'zipped(): the axes have different lengths {[len(a) for a in axes]}')
  return [_merge(combo) for combo in zip(*axes, strict=True)]


def chain(*sweeps: Iterable[Mapping]) -> list[Overrides]:
  """The trials of each sweep, one after another (e.g. two separate one-field studies)."""
  return [dict(t) for s in sweeps for t in s]


# ----------------------------------------------------------------------------- trials


def raw_value(value) -> str:
  """A Python value as the loader's command-line text (`--config.a.b=TEXT`)."""
  if isinstance(value, str):
    return value
  if isinstance(value, list):
    value = tuple(value)
  return repr(value)


def _name_value(value) -> str:
  if isinstance(value, (tuple, list)):
    return 'x'.join(_name_value(v) for v in value) or 'empty'
  if isinstance(value, Mapping):
    return '+'.join(f'{k}-{_name_value(v)}' for k, v in sorted(value.items()))
  if isinstance(value, float):
    return f'{value:g}'
  return str(value)


def _short_keys(keys: Sequence[str]) -> dict[str, str]:
  """Each dotted path by its last part, or by more parts where the last is ambiguous among `keys`."""
  out = {}
  for key in keys:
    parts = key.split('.')
    for n in range(1, len(parts) + 1):
      short = '.'.join(parts[-n:])
      if sum(1 for k in keys if k == short or k.endswith('.' + short)) == 1:
        break
    out[key] = short
  return out


def trial_labels(overrides: Mapping[str, Any], all_fields: Sequence[str] | None = None) -> dict[str, Any]:
  """What names a trial, in order: {short field or variants label: value}.

  Keys are shortened to their last part unless that is ambiguous among `all_fields` (the fields of the
  whole sweep; default: this trial's); fields set by `variants` appear as their label only.
  """
  named = list(overrides.get(NAME_KEY, ()))
  covered = {f for _, _, fields in named for f in fields}
  fields = [k for k in overrides if k != NAME_KEY]
  short = _short_keys(sorted(set(all_fields or ()) | set(fields)))
  out = {label: value for label, value, _ in named}
  for k in fields:
    if k not in covered:
      out[short[k]] = overrides[k]
  return out


def trial_name(overrides: Mapping[str, Any], all_fields: Sequence[str] | None = None) -> str:
  """`{'model.attention': 'divided', 'seed': 1}` -> 'attention=divided,seed=1' (see `trial_labels`).

  Characters other than letters, digits and `._+=-` become `-`; no overrides is 'base'. Names longer than
  MAX_NAME keep their start and end in a hash of the full name.
  """
  labels = trial_labels(overrides, all_fields)
  if not labels:
    return 'base'
  items = [f'{k}={_name_value(v)}' for k, v in labels.items()]
  name = ','.join(_UNSAFE.sub('-', item).strip('-') or '-' for item in items)
  if len(name) > MAX_NAME:
    digest = hashlib.sha1(name.encode()).hexdigest()[:10]
    name = f'{name[:MAX_NAME - 11]}~{digest}'
  return name


@dataclasses.dataclass(frozen=True)
class Trial:
  """One run of a sweep: its name (its directory under the sweep's), overrides, and the labels naming it."""
  name: str
  overrides: dict
  labels: dict = dataclasses.field(default_factory=dict)

  def raw_overrides(self) -> list[tuple[str, str]]:
    """[(field path, command-line text)] for `vvt.config.loader.load` / `--config.a.b=TEXT`."""
    return [(k, raw_value(v)) for k, v in self.overrides.items()]


def _as_list(defined) -> list[dict]:
  if defined is None:
    raise SweepError('get_sweep() returned None: return or yield dicts of config overrides')
  if isinstance(defined, Mapping):
    defined = [defined]
  out = []
  for i, item in enumerate(defined):
    if not isinstance(item, Mapping):
      raise SweepError(f'sweep item {i} is {type(item).__name__}, not a dict of config overrides')
    bad = [k for k in item if not isinstance(k, str) or not k or (k.startswith('_') and k != NAME_KEY)]
    if bad:
      raise SweepError(f'sweep item {i}: field names must be dotted paths, got {bad[0]!r}')
    out.append(dict(item))
  return out


def trials(defined: Iterable[Mapping] | Mapping) -> list[Trial]:
  """The named trials of a sweep definition (what `get_sweep` returned or yielded).

  Raises SweepError for an empty sweep or two trials with the same name.
  """
  items = _as_list(defined)
  if not items:
    raise SweepError('the sweep has no trials (get_sweep() returned nothing)')
  fields = sorted({k for item in items for k in item if k != NAME_KEY})
  out, seen = [], {}
  for i, item in enumerate(items):
    name = trial_name(item, fields)
    overrides = {k: v for k, v in item.items() if k != NAME_KEY}
    if name in seen:
      j = seen[name]
      same = ('the same overrides' if out[j].overrides == overrides
              else f'{out[j].overrides!r} and {overrides!r}')
      raise SweepError(f'trials {j} and {i} have the same name {name!r} ({same}); every trial '
                       'needs its own overrides')
    seen[name] = i
    out.append(Trial(name, overrides, trial_labels(item, fields)))
  return out


def select(all_trials: Sequence[Trial], pattern: str | None) -> list[Trial]:
  """The trials whose name matches the regular expression `pattern` (re.search); all if None."""
  if not pattern:
    return list(all_trials)
  try:
    rx = re.compile(pattern)
  except re.error as e:
    raise SweepError(f'--only {pattern!r} is not a regular expression: {e}') from None
  chosen = [t for t in all_trials if rx.search(t.name)]
  if not chosen:
    names = ', '.join(t.name for t in all_trials[:6]) + (', ...' if len(all_trials) > 6 else '')
    raise SweepError(f'--only {pattern!r} matches none of the {len(all_trials)} trials ({names})')
  return chosen

