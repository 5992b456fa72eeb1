"""`config.mesh` without JAX: the mesh axes, the logical axis rules, the sharding rules, and the partition spec of
every parameter.

  axes = resolve_axes(config.mesh.axes, num_devices)      # (('data', 4), ('fsdp', 8), ('model', 1))
  logical = logical_rules_of(config.mesh)                 # (('batch', ('data', 'fsdp')), ('heads', ('model',)), ...)
  specs = param_specs({path: shape}, dict(axes), rules=config.mesh.rules, min_size=config.mesh.fsdp_min_size,
                      logical_rules=logical)

`config.mesh.logical_rules` maps the models' logical axis names (`vvt.models.axes`: batch, heads, head_dim, embed,
mlp) to mesh axes, as MaxText's `logical_axis_rules`: (logical name, mesh axes) pairs, the mesh axes a tuple of
'data' / 'fsdp' / 'model' (a single name, or () / None for unsharded); names not given keep the models'
`DEFAULT_RULES` (batch over data and fsdp, heads and MLP units over model). They decide the batch's axes
(`vvt.models.axes.batch_axes`), the tensor-parallel specs (`tensor_parallel`) and what the models shard when traced.

A parameter's path is its keys joined by '/', e.g. `encoder/layers/block_0/mlp/Dense_0/kernel`.
Its spec is, in order:

1. the first of `config.mesh.rules` whose regex matches the path (`re.search`): exactly that spec,
   one of
     'replicate'                  every device holds it all
     'fsdp'                       the FSDP default below, whatever its size
     (None, 'model'), ('fsdp',)…  a PartitionSpec, one entry per leading dimension: None, an axis
                                  name, or a tuple of axis names
   (for the layers stacked by `model.scan_layers`, `.../blocks/block/...` of shape (L, *shape), the
   spec is one layer's: the layer axis is left whole)
2. otherwise the defaults: tensor parallelism (`tensor_parallel` of the logical rules; by default
   `TENSOR_PARALLEL`: heads and MLP units over `model`), where it shards over an axis of > 1 device
   and the dimension divides, then FSDP: a parameter of at least `fsdp_min_size` elements gets its
   largest free dimension divisible by the `fsdp` size sharded over `fsdp` (big_vision's strategy;
   not when the first already shards it over `fsdp`); smaller ones (biases, norms) stay replicated.

Optimiser-state leaves follow their parameter (`follow`): a leaf whose path ends with a parameter's path and
has its shape takes its spec (momentum, Adam's mu / nu); the others (counts, scalars) are replicated.
Rule errors (a rule that matches no parameter, a spec that names an unknown axis, that does not divide the
dimension, or has more entries than dimensions) raise `ConfigError` naming `mesh.rules[i]` before anything
compiles; the config loader checks the axes, the rules' form and the logical rules at once (`axes_of`,
`resolve_axes`, `check_rules`, `check_logical_rules`). `vvt.train.sharding` turns the specs into NamedShardings
of a JAX mesh.
"""
import math
import re
from typing import Any, Mapping, Optional, Sequence

from vvt.config import paths
from vvt.config.errors import ConfigError
from vvt.models import axes as logical_axes

DATA_AXIS, FSDP_AXIS, MODEL_AXIS = 'data', 'fsdp', 'model'
AXES = (DATA_AXIS, FSDP_AXIS, MODEL_AXIS)
DEFAULT_AXES = ((DATA_AXIS, -1),)
DEFAULT_MIN_SIZE = 2 ** 18
REPLICATE, FSDP = 'replicate', 'fsdp'


class MeshError(ConfigError):
  """`config.mesh` is malformed or does not fit the devices (the message names the field)."""


# ----------------------------------------------------------------------------- axes


def axes_of(value: Any) -> tuple[tuple[str, int], ...]:
  """`mesh.axes` (dict, ConfigDict or (name, size) pairs) -> ((name, size), ...) in the given order.

  Raises MeshError for a malformed value, an unknown or repeated name, or a bad size.
  """
  if value is None:
    return DEFAULT_AXES
  items = value.items() if hasattr(value, 'items') else value
  try:
    pairs = tuple((k, v) for k, v in items)
  except (TypeError, ValueError):
    raise MeshError(f"mesh.axes must be a dict such as {{'data': -1, 'fsdp': 8}} or (name, size) "
                    f'pairs, got {value!r}') from None
  if not pairs:
    raise MeshError("mesh.axes is empty: name at least one axis, e.g. {'data': -1}")
  seen = set()
  for name, size in pairs:
    if name not in AXES:
      raise MeshError(f'mesh.axes: unknown axis {name!r} (known axes: {", ".join(AXES)})')
    if name in seen:
      raise MeshError(f'mesh.axes: axis {name!r} is given twice')
    seen.add(name)
    if not isinstance(size, int) or isinstance(size, bool) or (size < 1 and size != -1):
      raise MeshError(f'mesh.axes[{name!r}] must be a positive integer or -1 (the rest), got {size!r}')
  if sum(size == -1 for _, size in pairs) > 1:
    raise MeshError(f'mesh.axes: at most one axis may be -1 (the rest), got {dict(pairs)}')
  return tuple((str(k), int(v)) for k, v in pairs)


def resolve_axes(value: Any, num_devices: int) -> tuple[tuple[str, int], ...]:
  """Every axis of AXES with its size for `num_devices` devices: -1 filled in, missing axes 1.

  Raises MeshError when the sizes do not multiply to `num_devices`.
  """
  pairs = axes_of(value)
  fixed = math.prod(size for _, size in pairs if size != -1)
  shown = ', '.join(f'{k}={v}' for k, v in pairs)
  if any(size == -1 for _, size in pairs):
    if num_devices % fixed:
      raise MeshError(f'mesh.axes ({shown}): the fixed axes ({fixed} devices) do not divide the '
                      f'{num_devices} devices')
    pairs = tuple((k, num_devices // fixed if v == -1 else v) for k, v in pairs)
  elif fixed != num_devices:
    raise MeshError(f'mesh.axes ({shown}) needs {fixed} devices, but the mesh has {num_devices} '
                    f'(use -1 for one axis to take the rest)')
  names = [k for k, _ in pairs]
  return pairs + tuple((a, 1) for a in AXES if a not in names)


def data_size(axes: Sequence[tuple[str, int]], logical_rules: Sequence = logical_axes.DEFAULT_RULES) -> int:
  """The number of batch shards: the product of the batch's axes (`vvt.models.axes.batch_axes`; by default
  `data`, `fsdp`); -1 counts 1."""
  batch = logical_axes.batch_axes(logical_rules)
  return math.prod(size for name, size in axes if name in batch and size != -1)


def tensor_parallel(logical_rules: Sequence = logical_axes.DEFAULT_RULES) -> tuple:
  """((path regex, spec), ...): the parameters' logical axes (`vvt.models.axes.PARAM_AXES`) under
  `logical_rules`."""
  return tuple((pattern, logical_axes.mesh_spec(names, logical_rules)) for pattern, names in logical_axes.PARAM_AXES)


# Megatron-style tensor parallelism of vvt's attention and MLP blocks over `model` under the models' rules, e.g.
# q/k/v kernels (D, heads, head_dim) -> (None, 'model', None). Applied where the dimension divides.
TENSOR_PARALLEL = tensor_parallel()


# ----------------------------------------------------------------------------- logical axis rules


def logical_rules_of(mesh_cfg) -> tuple:
  """The logical axis rules of `config.mesh` (its `logical_rules`, checked; DEFAULT_RULES without)."""
  return check_logical_rules(None if mesh_cfg is None else mesh_cfg.get('logical_rules'))


def check_logical_rules(value: Any) -> tuple:
  """`mesh.logical_rules` -> every logical axis with its mesh axes, ((name, (axis, ...)), ...) in the order of
  `DEFAULT_RULES`, whose values the names not given keep; None or (): DEFAULT_RULES.

  Raises MeshError naming `mesh.logical_rules[i]` for a malformed entry, an unknown logical name or mesh axis, a
  name given twice, or a mesh axis that would shard two dimensions of one array.
  """
  if value is None:
    return logical_axes.DEFAULT_RULES
  if not isinstance(value, (tuple, list)):
    raise MeshError(f"mesh.logical_rules must be (logical name, mesh axes) pairs such as "
                    f"(('batch', ('data',)), ('heads', ())), got {value!r}")
  given, index = {}, {}
  for i, entry in enumerate(value):
    name, axes = _logical_rule(f'mesh.logical_rules[{i}]', entry)
    if name in given:
      raise MeshError(f'mesh.logical_rules[{i}]: {name!r} is given twice (also mesh.logical_rules[{index[name]}])')
    given[name], index[name] = axes, i
  rules = logical_axes.with_defaults(tuple(given.items()))
  _check_no_shared_axis(rules, index)
  return rules


def _logical_rule(where: str, entry) -> tuple:
  """One entry -> (logical name, mesh axes tuple); MeshError naming `where`."""
  if not isinstance(entry, (tuple, list)) or len(entry) != 2 or not isinstance(entry[0], str):
    raise MeshError(f"{where} must be a (logical name, mesh axes) pair such as ('heads', ('model',)), got {entry!r}")
  name, axes = entry
  if name not in logical_axes.LOGICAL_AXES:
    raise MeshError(f'{where}: unknown logical axis {name!r}{paths.hint(name, logical_axes.LOGICAL_AXES)} '
                    f'(known: {", ".join(logical_axes.LOGICAL_AXES)})')
  if axes is not None and not isinstance(axes, (str, tuple, list)):
    raise MeshError(f"{where}: the mesh axes of {name!r} must be a tuple of axis names, one name or () / None, "
                    f'got {axes!r}')
  axes = logical_axes.as_mesh_axes(axes)
  for axis in axes:
    if axis not in AXES:
      raise MeshError(f'{where}: unknown mesh axis {axis!r} for {name!r} (known axes: {", ".join(AXES)})')
  if len(set(axes)) != len(axes):
    raise MeshError(f'{where}: {name!r} names a mesh axis twice: {axes!r}')
  return name, axes


def _check_no_shared_axis(rules: tuple, index: Mapping[str, int]) -> None:
  """No mesh axis shards two dimensions of one array: a parameter of PARAM_AXES or the attention's operands."""
  arrays = [names for _, names in logical_axes.PARAM_AXES] + [logical_axes.OPERAND_AXES]
  axes_of_name = dict(rules)
  for names in arrays:
    owner = {}
    for name in names:
      for axis in axes_of_name[name]:
        other = owner.setdefault(axis, name)
        if other != name:
          i = max(index.get(name, -1), index.get(other, -1))  # the defaults share no axis: one was given
          raise MeshError(f'mesh.logical_rules[{i}]: {other!r} and {name!r} would both be sharded over mesh axis '
                          f'{axis!r} in one array of logical axes {names}; map them to different axes')


# ----------------------------------------------------------------------------- rules


def check_rules(rules: Any) -> tuple:
  """`config.mesh.rules` -> ((compiled regex, spec), ...); ConfigError for a malformed rule."""
  return tuple(_check_rule(f'mesh.rules[{i}]', rule) for i, rule in enumerate(rules or ()))


def _check_rule(where: str, rule) -> tuple:
  """One rule -> (compiled regex, 'replicate' | 'fsdp' | a spec tuple); ConfigError naming `where`."""
  if not isinstance(rule, (tuple, list)) or len(rule) != 2 or not isinstance(rule[0], str):
    raise ConfigError(f'{where} must be a (regex, spec) pair, got {rule!r}')
  pattern, spec = rule
  try:
    regex = re.compile(pattern)
  except re.error as e:
    raise ConfigError(f'{where}: bad regex {pattern!r}: {e}') from None
  if isinstance(spec, str) and spec not in (REPLICATE, FSDP):
    spec = (spec,)
  if isinstance(spec, str):
    return regex, spec
  if not isinstance(spec, (tuple, list)):
    raise ConfigError(f"{where}: spec must be 'replicate', 'fsdp' or a tuple of axis names / "
                      f'None per dimension, got {spec!r}')
  spec = tuple(tuple(e) if isinstance(e, list) else e for e in spec)
  for entry in spec:
    for axis in logical_axes.as_mesh_axes(entry):
      if axis not in AXES:
        raise ConfigError(f'{where}: spec {spec!r} names unknown axis {axis!r} '
                          f'(known axes: {", ".join(AXES)})')
  return regex, spec


def _divides(shape, spec, sizes) -> bool:
  return all(shape[d] % _size(e, sizes) == 0 for d, e in enumerate(spec))


def _size(entry, sizes) -> int:
  n = 1
  for axis in logical_axes.as_mesh_axes(entry):
    n *= sizes.get(axis, 1)
  return n


def fsdp_spec(shape: Sequence[int], sizes: Mapping[str, int], base: Optional[tuple] = None) -> tuple:
  """`base` (default all None) with the largest free dimension divisible by `fsdp` sharded over it (unless `base`
  already shards one over `fsdp`)."""
  spec = list(base or ()) + [None] * (len(shape) - len(base or ()))
  n = sizes.get(FSDP_AXIS, 1)
  if n <= 1 or any(FSDP_AXIS in logical_axes.as_mesh_axes(e) for e in spec):
    return tuple(spec)
  free = [d for d in range(len(shape)) if spec[d] is None and shape[d] % n == 0]
  if free:
    d = max(free, key=lambda k: (shape[k], -k))  # the largest; the first among equals
    spec[d] = FSDP_AXIS
  return tuple(spec)


# A parameter of layers stacked for `nn.scan` (`model.scan_layers`, vvt/models/layout.py) has a leading layer
# axis: `.../blocks/block/...`, leaves (L, *shape). The defaults see the per-layer shape and leave that axis
# whole (scan slices it every iteration; sharding it would gather the whole stack).
STACKED_LAYERS = re.compile(r'(^|/)blocks/block/')


def default_spec(path: str, shape: Sequence[int], sizes: Mapping[str, int], min_size: int,
                 tensor_specs: Sequence = TENSOR_PARALLEL) -> tuple:
  """Tensor parallelism (`tensor_specs`: those of `tensor_parallel`) where it applies, then FSDP for parameters
  of >= `min_size` elements.

  For stacked layers (STACKED_LAYERS) the rules apply to one layer's shape, the layer axis unsharded;
  `min_size` counts the whole stack (what a device would hold).
  """
  if STACKED_LAYERS.search(path) and len(shape) > 1:
    per_layer = default_spec(STACKED_LAYERS.sub(r'\1', path), shape[1:], sizes,
                             max(1, -(-min_size // shape[0])), tensor_specs)
    return (None,) + tuple(per_layer)
  base = None
  for pattern, spec in tensor_specs:
    if (re.search(pattern, path) and len(spec) == len(shape) and any(_size(e, sizes) > 1 for e in spec)
        and _divides(shape, spec, sizes)):
      base = spec
      break
  size = 1
  for s in shape:
    size *= s
  if size >= min_size:
    return fsdp_spec(shape, sizes, base)
  return tuple(base or (None,) * len(shape))


def param_specs(shapes: Mapping[str, tuple], sizes: Mapping[str, int], rules: Any = (),
                min_size: int = DEFAULT_MIN_SIZE, logical_rules: Sequence = logical_axes.DEFAULT_RULES) -> dict:
  """{path: spec tuple} of every parameter, from {path: shape}; see the module doc.

  `sizes`: {axis: size} of the mesh; `logical_rules`: those of `logical_rules_of` (the tensor-parallel specs).
  Raises ConfigError for a bad rule (naming `mesh.rules[i]`).
  """
  compiled = check_rules(rules)
  tensor_specs = tensor_parallel(logical_rules)
  used = [False] * len(compiled)
  out = {}
  paths = {p: tuple(s) for p, s in shapes.items()}
  for path, shape in paths.items():
    i = next((i for i, (regex, _) in enumerate(compiled) if regex.search(path)), None)
    if i is None:
      out[path] = tuple(default_spec(path, shape, sizes, min_size, tensor_specs))
    else:
      used[i] = True
      out[path] = _rule_spec(f'mesh.rules[{i}]', compiled[i][1], path, shape, sizes)
  for i, ok in enumerate(used):
    if not ok:
      some = ', '.join(list(paths)[:3])
      raise ConfigError(f'mesh.rules[{i}] {rules[i][0]!r} matches no parameter (paths look like '
                        f'{some}, ...)')
  return out


def _rule_spec(where: str, spec, path: str, full_shape: tuple, sizes: Mapping[str, int]) -> tuple:
  """The spec that the rule `where` (its checked `spec`) gives the parameter `path` of shape `full_shape`.

  A stacked layer's leaf (L, *shape): the rule is written for one layer's shape, the layer axis stays whole.
  """
  stacked = bool(STACKED_LAYERS.search(path)) and len(full_shape) > 1
  shape = full_shape[1:] if stacked else full_shape
  if spec == REPLICATE:
    spec = ()
  elif spec == FSDP:
    spec = fsdp_spec(shape, sizes)
  elif len(spec) > len(shape):
    raise ConfigError(f'{where}: spec {spec!r} has {len(spec)} entries but {path} has '
                      f'{len(shape)} dimensions {shape}' + (' per layer' if stacked else ''))
  elif not _divides(shape, spec, sizes):
    raise ConfigError(f'{where}: spec {spec!r} does not divide {path} of shape {shape} '
                      f'on the mesh {dict(sizes)}')
  if stacked and spec:
    spec = (None,) + tuple(spec)
  return tuple(spec)


def follow(path: str, ndim: int, specs: Mapping[str, tuple]) -> tuple:
  """The spec of a leaf (e.g. of the optimiser state) at `path` by its parameter.

  A leaf whose path ends with a parameter's path, with at least as many dimensions as the spec
  has entries, takes its spec; the others (counts, scalars) are replicated: ().
  """
  parts = path.split('/')
  for k in range(len(parts)):
    spec = specs.get('/'.join(parts[k:]))
    if spec is not None and len(spec) <= ndim:
      return spec
  return ()
