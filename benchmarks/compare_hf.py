"""vvt against Hugging Face transformers (PyTorch): the same video transformers, side by side.

    .venv/bin/python benchmarks/compare_hf.py [--device cpu|gpu] [--batch B] [--layers N] [--image-size S]
        [--dtype float32|bfloat16] [--precision default|tf32|highest] [--compile] [--threads N]
        [--rows REGEX] [--iters N] [--warmup N] [--rounds R] [--json OUT]
    .venv/bin/python benchmarks/compare_hf.py --vvt-only ...       # every vvt scheme alone, against the ceiling
    .venv/bin/python benchmarks/compare_hf.py --layers 1 --batch 1 --iters 2 --image-size 64   # smoke check

Rows, ViT-B/16 (hidden 768, 12 heads, MLP 3072, 12 layers unless --layers), 400 classes, each as `forward`
(inference, no gradients) and `train` (forward + backward + an SGD Nesterov step, momentum 0.9, softmax
cross-entropy):
  timesformer_space / _joint / _divided  8 x S^2, 16x16 patches: HF TimesformerForVideoClassification with
                  attention_type space_only / joint_space_time / divided_space_time (vvt/convert/timesformer.py
                  maps one onto the other); HF's space_only gives a logit row per frame (its loss takes the
                  clip's label per frame), vvt their mean.
  vivit_model1    ViViT Model 1 (spatiotemporal), 32 x S^2, 2x16x16 tubelets: HF VivitForVideoClassification
                  (vvt/convert/hf_vivit.py).
The parameter counts of the two sides are checked equal (a row that differs is marked and the exit status is 1).
`--vvt-only` times every vvt scheme alone (ViViT Models 2-4, TimeSformer local_global / axial, X-ViT too).

Each measurement runs in a fresh process, one at a time: torch and transformers are imported in the HF
process only (`pip install -e '.[bench]'`), JAX in the vvt and ceiling ones; on the CPU the rounds interleave
(vvt, HF, vvt, HF, ...). A process runs the first step (compilation included: `first step`), `--warmup` more,
then `--iters` timed steps (each synchronised); median and min are over the timed steps of every round.
Peak memory: on the CPU the process's peak resident memory (ru_maxrss; `+` the part above what it held after
its imports), on the GPU JAX's peak_bytes_in_use and torch.cuda.max_memory_allocated. Persistent compilation
caches (JAX's, Inductor's) are off, so every round compiles from scratch.

FLOPs: the vvt step's, counted once with `vvt.models.summary.count_flops` on the same function with attention
as einsum (XLA's cost analysis counts a chunked loop's body once and nothing inside cuDNN's attention), from a
CPU lowering on every backend; the HF side is credited with the same count. They are the FLOPs vvt executes:
with a class-token classifier XLA drops the last block's patch-token work after its attention, which PyTorch
computes (up to 1/layers of the step: mind it with --layers 1). `% ceiling` is achieved FLOP/s (median step)
over the FLOP/s of a large matmul timed in JAX in the same run (float32 on the CPU, on the GPU the run's dtype):
timed in a process of its own before the first row and again before every round of every row, the fastest of
them all (a shared host's matmul rate drifts: 103-168 GFLOP/s within one hour on the 2-core development VM, so
one measurement at the start can put a scheme "above" the ceiling).

On the CPU the host must be idle: OpenMP (torch, MKL) slows down many times over when its threads share busy
cores (XLA's thread pool much less), so a loaded host shows HF far slower than it is; `--threads 1` pins every
process to one CPU.

On a host with JAX, torch and transformers but no TensorFlow, ml_collections or clu (a GPU image), it runs
unchanged: it imports only vvt.models (no TensorFlow), and where ml_collections is missing the vvt process
registers a minimal stand-in for the ConfigDict that vvt.models builds (`_config_dict_stand_in`).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import types

RESULT = 'RESULT '  # a child's result: one line, this prefix, then JSON.
CLASSES = 400

# name: (vvt model fields, HF model, HF attention_type). ViT-B/16; the sizes are set in _vvt_config.
ROWS = {
    'timesformer_space': (dict(family='timesformer', attention='space', positional_embedding='spatial',
                               frame_aggregation='mean'), 'timesformer', 'space_only'),
    'timesformer_joint': (dict(family='timesformer', attention='joint'), 'timesformer', 'joint_space_time'),
    'timesformer_divided': (dict(family='timesformer', attention='divided'), 'timesformer', 'divided_space_time'),
    'vivit_model1': (dict(family='vivit', attention='spatiotemporal', variant='B/16x2', num_frames=32),
                     'vivit', None),
}
# Every other vvt scheme (--vvt-only).
VVT_ONLY_ROWS = {
    'vivit_model2': dict(family='vivit', attention='factorised_encoder', variant='B/16x2', num_frames=32),
    'vivit_model3': dict(family='vivit', attention='factorised_self_attention', variant='B/16x2', num_frames=32,
                         classifier='gap'),
    'vivit_model4': dict(family='vivit', attention='factorised_dot_product', variant='B/16x2', num_frames=32,
                         classifier='gap'),
    'timesformer_local_global': dict(family='timesformer', attention='local_global'),
    'timesformer_axial': dict(family='timesformer', attention='axial'),
    'xvit': dict(family='xvit', attention='space_time_mixing'),
}
MODES = ('forward', 'train')
LR, MOMENTUM = 0.01, 0.9


# ---------------------------------------------------------------------------------------------- vvt child


def _config_dict_stand_in() -> None:
  """Registers a minimal `ml_collections` (ConfigDict, config_dict.FieldReference) if it is not installed.

  vvt.models builds its configs as ml_collections ConfigDicts; a GPU image may have JAX but not
  ml_collections. The stand-in has what vvt.models uses of them: attribute and item access, nested dicts
  as ConfigDicts, keys / items / get, to_dict; a FieldReference is its value.
  """
  try:
    import ml_collections  # noqa: F401
    return
  except ImportError:
    pass

  class ConfigDict:
    """Attribute-access dict (the part of ml_collections.ConfigDict that vvt.models uses)."""

    def __init__(self, values=None):
      object.__setattr__(self, '_fields', {})
      for key, value in dict(values or {}).items():
        self[key] = value

    def __setitem__(self, key, value):
      self._fields[key] = ConfigDict(value) if isinstance(value, dict) else value

    def __getitem__(self, key):
      return self._fields[key]

    def __getattr__(self, key):
      fields = self.__dict__.get('_fields', {})
      if key in fields:
        return fields[key]
      raise AttributeError(key)

    def __setattr__(self, key, value):
      self[key] = value

    def __contains__(self, key):
      return key in self._fields

    def __iter__(self):
      return iter(self._fields)

    def __len__(self):
      return len(self._fields)

    def __eq__(self, other):
      return isinstance(other, ConfigDict) and self.to_dict() == other.to_dict()

    __hash__ = object.__hash__

    def keys(self):
      return self._fields.keys()

    def items(self):
      return self._fields.items()

    def get(self, key, default=None):
      return self._fields.get(key, default)

    def to_dict(self) -> dict:
      return {k: v.to_dict() if isinstance(v, ConfigDict) else v for k, v in self._fields.items()}

    def copy_and_resolve_references(self):
      return ConfigDict(self.to_dict())

    def __repr__(self):
      return f'ConfigDict({self.to_dict()!r})'

  module = types.ModuleType('ml_collections')
  module.ConfigDict = ConfigDict
  module.config_dict = types.ModuleType('ml_collections.config_dict')
  module.config_dict.FieldReference = lambda value, field_type=None: value
  module.config_dict.ConfigDict = ConfigDict
  sys.modules['ml_collections'] = module
  sys.modules['ml_collections.config_dict'] = module.config_dict


def _vvt_config(fields: dict, spec: dict, **overrides):
  """The row's vvt model config at the run's sizes (ViT-B/16, --layers, --image-size, --dtype)."""
  import vvt.models
  fields = dict(fields)
  layers = spec['layers']
  if layers and fields.get('attention') == 'factorised_encoder':
    fields['temporal_layers'] = min(layers, 4)  # Model 2's temporal encoder shrinks alike
  return vvt.models.get_config(**fields, image_size=spec['image_size'], num_classes=CLASSES,
                               **({'num_layers': layers} if layers else {}), dtype=spec['dtype'], **overrides)


def _vvt_functions(module, mode: str):
  """(step(state, video, labels) -> (state, output), make_state(params)) of a vvt module. In `forward` the
  state is the params and comes back as it went in; in `train` it is (params, optimiser state), updated."""
  import jax
  import jax.numpy as jnp
  import optax
  if mode == 'forward':
    def forward(params, video, labels):
      del labels
      return params, module.apply({'params': params}, video, train=False)
    return forward, lambda params: params
  tx = optax.sgd(LR, momentum=MOMENTUM, nesterov=True)

  def train(state, video, labels):
    params, opt_state = state

    def loss_fn(p):
      logits = module.apply({'params': p}, video, train=True, rngs={'dropout': jax.random.key(0)})
      return jnp.mean(optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels))

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return (optax.apply_updates(params, updates), opt_state), loss

  return train, lambda params: (params, tx.init(params))


def _vvt_flops(fields: dict, spec: dict, video, labels) -> tuple[float, str]:
  """FLOPs of one step of the row's function: attention as einsum, layers unrolled (see the docstring)."""
  import jax

  import vvt.models
  from vvt.models import summary
  module = vvt.models.build(_vvt_config(fields, spec, attention_impl='einsum', scan_layers=False, remat='none'))
  step, make_state = _vvt_functions(module, spec['mode'])
  params = jax.eval_shape(lambda v: module.init({'params': jax.random.key(0)}, v, train=False), video)['params']
  state = jax.eval_shape(make_state, params)
  return summary.count_flops(step, state, video, labels)


def _set_jax_precision(precision: str) -> None:
  import jax
  if precision != 'default':
    jax.config.update('jax_default_matmul_precision', {'tf32': 'tensorfloat32', 'highest': 'highest'}[precision])


def run_vvt(spec: dict) -> dict:
  """Times the row's vvt step in this process (warm-up, then timed steps); see the module docstring."""
  _config_dict_stand_in()
  import jax
  import jax.numpy as jnp
  import numpy as np

  import vvt.models
  from vvt.models import summary
  from vvt.models import video_transformer  # noqa: F401
  _set_jax_precision(spec['precision'])
  jax.devices()  # the backend is up: what the process holds now is the base of its peak memory
  base_mib = _rss_mib()
  fields = spec['fields']
  cfg = vvt.models.resolve(_vvt_config(fields, spec))
  module = vvt.models.build(cfg)
  rng = np.random.default_rng(0)
  shape = (spec['batch'], cfg.num_frames, cfg.image_size, cfg.image_size, 3)
  video = jnp.asarray(rng.standard_normal(shape, dtype=np.float32))
  labels = jnp.asarray(rng.integers(0, CLASSES, spec['batch']), jnp.int32)
  params = jax.jit(lambda v: module.init({'params': jax.random.key(0)}, v, train=False))(video)['params']
  step, make_state = _vvt_functions(module, spec['mode'])
  state = make_state(params)
  train = spec['mode'] == 'train'
  # forward: the params are not an output (no copy, nothing to forward); train: the state is donated.
  jitted = jax.jit(step, donate_argnums=0) if train else jax.jit(lambda *a: step(*a)[1])

  def run_once():
    nonlocal state
    if train:
      state, out = jitted(state, video, labels)
    else:
      out = jitted(state, video, labels)
    jax.block_until_ready((state, out))

  times, first = _time_steps(run_once, spec)
  result = dict(times=times, first_step_s=first, params=summary.count_params(params), peak_mib=_rss_mib(),
                base_mib=base_mib, attention_impl=cfg.attention_impl, backend=jax.default_backend(),
                device=str(jax.devices()[0].device_kind), jax=jax.__version__)
  if spec['device'] == 'gpu':
    stats = jax.devices()[0].memory_stats() or {}
    result['peak_mib'] = stats.get('peak_bytes_in_use', float('nan')) / 2**20
    result['base_mib'] = 0.0
  if spec.get('count_flops'):
    abstract = jax.ShapeDtypeStruct(shape, jnp.float32), jax.ShapeDtypeStruct((spec['batch'],), jnp.int32)
    result['flops'], result['flops_source'] = _vvt_flops(fields, spec, *abstract)
  return result


def run_ceiling(spec: dict) -> dict:
  """FLOP/s of an n x n x n matmul in JAX (float32; on the GPU the run's dtype): the fastest of the timed runs
  (what the machine can do; a busy host slows some runs down)."""
  import jax
  import jax.numpy as jnp
  _set_jax_precision(spec['precision'])
  n = spec['ceiling_size']
  dtype = jnp.bfloat16 if spec['device'] == 'gpu' and spec['dtype'] == 'bfloat16' else jnp.float32
  a, b = (jax.random.normal(jax.random.key(i), (n, n), dtype) for i in (0, 1))
  matmul = jax.jit(lambda x, y: x @ y)
  times, _ = _time_steps(lambda: matmul(a, b).block_until_ready(), dict(spec, iters=max(spec['iters'], 10)))
  return dict(flops_per_s=2 * n**3 / min(times), n=n, dtype=jnp.dtype(dtype).name,
              device=str(jax.devices()[0].device_kind))


# ----------------------------------------------------------------------------------------------- HF child


def _hf_model(spec: dict):
  """The row's transformers model (random init) on the device: same sizes as the vvt config."""
  import transformers
  sizes = dict(image_size=spec['image_size'], hidden_size=768, num_hidden_layers=spec['layers'] or 12,
               num_attention_heads=12, intermediate_size=3072, num_labels=CLASSES, layer_norm_eps=1e-6,
               qkv_bias=True, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
  if spec['hf_model'] == 'vivit':
    config = transformers.VivitConfig(num_frames=32, tubelet_size=[2, 16, 16], hidden_act='gelu_fast', **sizes)
    return transformers.VivitForVideoClassification(config)
  config = transformers.TimesformerConfig(num_frames=8, patch_size=16, hidden_act='gelu', drop_path_rate=0,
                                          attention_type=spec['hf_attention'], **sizes)
  return transformers.TimesformerForVideoClassification(config)


def run_hf(spec: dict) -> dict:
  """Times the row's transformers step in this process (same protocol as run_vvt)."""
  import contextlib

  import numpy as np
  import torch
  import transformers
  if spec['precision'] != 'default':
    torch.set_float32_matmul_precision({'tf32': 'high', 'highest': 'highest'}[spec['precision']])
  _ = transformers.TimesformerForVideoClassification, transformers.VivitForVideoClassification  # load them now
  base_mib = _rss_mib()
  device = 'cuda' if spec['device'] == 'gpu' else 'cpu'
  torch.manual_seed(0)
  model = _hf_model(spec).to(device)
  frames = model.config.num_frames
  rng = np.random.default_rng(0)
  shape = (spec['batch'], frames, 3, spec['image_size'], spec['image_size'])  # HF: channels before H, W
  video = torch.from_numpy(rng.standard_normal(shape, dtype=np.float32)).to(device)
  labels = torch.from_numpy(rng.integers(0, CLASSES, spec['batch'])).to(device)
  if spec['hf_attention'] == 'space_only':  # one logit row per frame: the clip's label for each
    labels = labels.repeat_interleave(frames)
  run_model = torch.compile(model) if spec['compile'] else model
  autocast = (torch.autocast(device, dtype=torch.bfloat16) if spec['dtype'] == 'bfloat16'
              else contextlib.nullcontext())
  sync = torch.cuda.synchronize if device == 'cuda' else (lambda: None)
  if spec['mode'] == 'forward':
    model.eval()

    def run_once():
      with torch.inference_mode(), autocast:
        _ = run_model(pixel_values=video).logits
      sync()
  else:
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, nesterov=True)

    def run_once():
      optimizer.zero_grad(set_to_none=True)
      with autocast:
        logits = run_model(pixel_values=video).logits
      torch.nn.functional.cross_entropy(logits.float(), labels).backward()
      optimizer.step()
      sync()

  times, first = _time_steps(run_once, spec)
  peak = torch.cuda.max_memory_allocated() / 2**20 if device == 'cuda' else _rss_mib()
  return dict(times=times, first_step_s=first, params=sum(p.numel() for p in model.parameters()),
              peak_mib=peak, base_mib=0.0 if device == 'cuda' else base_mib,
              attention_impl=getattr(model.config, '_attn_implementation', None), threads=torch.get_num_threads(),
              torch=torch.__version__, transformers=transformers.__version__)


# ----------------------------------------------------------------------------------------- both children


def _rss_mib() -> float:
  return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _time_steps(run_once, spec: dict) -> tuple[list[float], float]:
  """(timed step seconds, first step seconds): the first step (compilation), warm-up steps, timed steps."""
  start = time.perf_counter()
  run_once()
  first = time.perf_counter() - start
  for _ in range(spec['warmup']):
    run_once()
  times = []
  for _ in range(spec['iters']):
    start = time.perf_counter()
    run_once()
    times.append(time.perf_counter() - start)
  return times, first


def _limit_threads(threads: int) -> None:
  """Pins this process to its first `threads` CPUs before JAX or torch start: XLA's thread pool and OpenMP
  (torch, MKL) size themselves by the CPUs a process may run on (and OMP_NUM_THREADS, set by the parent)."""
  if threads:
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:threads])


def child_main(side: str, spec: dict) -> None:
  _limit_threads(spec.get('threads', 0))
  result = {'vvt': run_vvt, 'hf': run_hf, 'ceiling': run_ceiling}[side](spec)
  print(RESULT + json.dumps(result), flush=True)


# ------------------------------------------------------------------------------------------------- parent


def _child_env(device: str, threads: int, cache_dir: str) -> dict:
  """Environment of a child: the device, its threads, no persistent compilation caches (every round compiles
  afresh; Inductor's own cache in the empty `cache_dir`)."""
  env = dict(os.environ)
  if threads:
    env['OMP_NUM_THREADS'] = env['MKL_NUM_THREADS'] = str(threads)
  env['PYTHONPATH'] = os.pathsep.join(filter(None, [_repo(), env.get('PYTHONPATH')]))
  env['TF_CPP_MIN_LOG_LEVEL'] = '3'
  env['JAX_ENABLE_COMPILATION_CACHE'] = 'false'
  env['TORCHINDUCTOR_FX_GRAPH_CACHE'] = '0'
  env['TORCHINDUCTOR_AUTOGRAD_CACHE'] = '0'
  env['TORCHINDUCTOR_CACHE_DIR'] = cache_dir
  if device == 'cpu':
    env['JAX_PLATFORMS'] = 'cpu'
    env['CUDA_VISIBLE_DEVICES'] = ''
  return env


def _repo() -> str:
  return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_child(side: str, spec: dict, timeout: float) -> dict:
  """Runs one measurement in a fresh process; {'error': ...} if it failed."""
  cmd = [sys.executable, os.path.abspath(__file__), '--child', side, '--spec', json.dumps(spec)]
  try:
    with tempfile.TemporaryDirectory(prefix='compare_hf_') as cache_dir:
      proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=_repo(), check=False,
                            env=_child_env(spec['device'], spec['threads'], cache_dir))
  except subprocess.TimeoutExpired:
    return {'error': f'timed out after {timeout:.0f} s'}
  lines = [l for l in proc.stdout.splitlines() if l.startswith(RESULT)]
  if proc.returncode or not lines:
    tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
    return {'error': f'exit {proc.returncode}: ' + ' | '.join(tail)}
  return json.loads(lines[-1][len(RESULT):])


def _merge_rounds(rounds: list[dict]) -> dict:
  """One side's rounds -> median / min over every timed step, first-step median, peak memory max."""
  errors = [r['error'] for r in rounds if 'error' in r]
  if errors:
    return {'error': errors[0]}
  times = [t for r in rounds for t in r['times']]
  merged = dict(rounds[0], times=times, median_s=statistics.median(times), min_s=min(times),
                first_step_s=statistics.median(r['first_step_s'] for r in rounds),
                peak_mib=max(r['peak_mib'] for r in rounds), base_mib=min(r['base_mib'] for r in rounds))
  if 'flops' in rounds[0]:
    merged['flops'], merged['flops_source'] = rounds[0]['flops'], rounds[0]['flops_source']
  return merged


def measure_row(name: str, mode: str, args, sides: tuple[str, ...], ceiling=lambda: None) -> dict:
  """Every round of every side of one row (interleaved: vvt, HF, vvt, HF, ...); `ceiling()` before each round."""
  fields, hf_model, hf_attention = ROWS[name] if name in ROWS else (VVT_ONLY_ROWS[name], None, None)
  spec = dict(fields=fields, hf_model=hf_model, hf_attention=hf_attention, mode=mode, device=args.device,
              batch=args.batch, layers=args.layers, image_size=args.image_size, dtype=args.dtype,
              precision=args.precision, compile=args.compile, iters=args.iters, warmup=args.warmup,
              threads=args.threads)
  rounds = {side: [] for side in sides}
  for r in range(args.rounds):
    ceiling()
    for side in sides:
      result = run_child(side, dict(spec, count_flops=(side == 'vvt' and r == 0)), args.timeout)
      rounds[side].append(result)
      _progress(f'{name}/{mode} {side} round {r + 1}/{args.rounds}: ' + (
          result['error'] if 'error' in result else
          f'median {statistics.median(result["times"]) * 1e3:.1f} ms, first step {result["first_step_s"]:.1f} s'))
  row = dict(row=name, mode=mode, **{side: _merge_rounds(rs) for side, rs in rounds.items()})
  vvt, hf = row['vvt'], row.get('hf')
  if hf is not None and 'error' not in vvt and 'error' not in hf:
    row['ratio_hf_over_vvt'] = hf['median_s'] / vvt['median_s']
    row['params_equal'] = vvt['params'] == hf['params']
  return row


def _progress(message: str) -> None:
  print(f'[compare_hf] {message}', file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------------- report


def _ms(side: dict) -> str:
  return f'{side["median_s"] * 1e3:.1f} / {side["min_s"] * 1e3:.1f}'


def _share(side: dict, flops: float | None, ceiling: float | None) -> str:
  if not flops or not ceiling or 'median_s' not in side:
    return '—'
  return f'{100 * flops / side["median_s"] / ceiling:.1f}%'


def _mib(side: dict) -> str:
  extra = side['peak_mib'] - side['base_mib']
  return f'{side["peak_mib"]:.0f}' + (f' (+{extra:.0f})' if side['base_mib'] else '')


def table(rows: list[dict], ceiling: float | None, vvt_only: bool) -> str:
  """The markdown table (BENCHMARKS.md)."""
  if vvt_only:
    lines = ['| row | mode | params (M) | GFLOP/step | vvt median / min (ms) | % ceiling | first step (s) | '
             'peak MiB |', '|---|---|---:|---:|---:|---:|---:|---:|']
  else:
    lines = ['| row | mode | params (M) | GFLOP/step | vvt median / min (ms) | HF median / min (ms) | HF/vvt | '
             '% ceiling vvt / HF | first step vvt / HF (s) | peak MiB vvt / HF |',
             '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|']
  for row in rows:
    vvt, hf = row['vvt'], row.get('hf', {})
    if 'error' in vvt or 'error' in hf:
      lines.append(f'| {row["row"]} | {row["mode"]} | error: {vvt.get("error") or hf.get("error")} |')
      continue
    flops = vvt.get('flops')
    params = f'{vvt["params"] / 1e6:.2f}' + ('' if row.get('params_equal', True) else f' ≠ {hf["params"] / 1e6:.2f}')
    gflop = f'{flops / 1e9:.1f}' if flops else '—'
    if vvt_only:
      lines.append(f'| {row["row"]} | {row["mode"]} | {params} | {gflop} | {_ms(vvt)} | '
                   f'{_share(vvt, flops, ceiling)} | {vvt["first_step_s"]:.1f} | {_mib(vvt)} |')
    else:
      lines.append(f'| {row["row"]} | {row["mode"]} | {params} | {gflop} | {_ms(vvt)} | {_ms(hf)} | '
                   f'{row["ratio_hf_over_vvt"]:.2f} | {_share(vvt, flops, ceiling)} / {_share(hf, flops, ceiling)} | '
                   f'{vvt["first_step_s"]:.1f} / {hf["first_step_s"]:.1f} | {_mib(vvt)} / {_mib(hf)} |')
  return '\n'.join(lines)


def header(args, rows: list[dict], ceiling: dict) -> str:
  """What was run, where, with which versions: the lines above the table."""
  vvt = next((r['vvt'] for r in rows if 'error' not in r['vvt']), {})
  hfs = [r['hf'] for r in rows if 'error' not in r.get('hf', {'error': 1})]
  hf = hfs[0] if hfs else {}
  attention = ', '.join(sorted({f'{r["row"].split("_")[0]} {r["hf"]["attention_impl"]}' for r in rows
                                if 'error' not in r.get('hf', {'error': 1})}))
  flags = (f'batch {args.batch}, image {args.image_size}^2, {args.layers or 12} layers, {args.dtype}, '
           f'{args.threads or "all"} CPU threads, '
           f'precision {args.precision}, {args.rounds} round(s) x {args.iters} timed steps after '
           f'{args.warmup} warm-up' + (', HF torch.compile' if args.compile else ''))
  out = [f'device: {args.device} ({vvt.get("device", "?")}; host {platform.machine()}, {os.cpu_count()} cores); '
         f'{flags}',
         f'jax {vvt.get("jax", "?")}' + (f', torch {hf["torch"]} ({hf["threads"]} threads), transformers '
                                          f'{hf["transformers"]}, HF attention: {attention}' if hf else ''),
         f'vvt attention_impl {vvt.get("attention_impl", "?")}; FLOPs from {vvt.get("flops_source", "?")}']
  if 'error' in ceiling:
    out.append(f'ceiling: error: {ceiling["error"]}')
  else:
    rates = [r / 1e9 for r in ceiling.get('measured', [ceiling['flops_per_s']]) if r]
    out.append(f'ceiling: {ceiling["n"]}^3 {ceiling["dtype"]} matmul in JAX, '
               f'{ceiling["flops_per_s"] / 1e9:.1f} GFLOP/s (fastest of {len(rates)} measurements in the run: '
               f'{min(rates):.1f}-{max(rates):.1f})')
  return '\n'.join(out)


def parse_args(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  ap.add_argument('--device', choices=('cpu', 'gpu'), default='cpu')
  ap.add_argument('--batch', type=int, help='default: 1 on the CPU, 8 on the GPU')
  ap.add_argument('--layers', type=int, default=0, help='encoder layers on both sides (default: 12)')
  ap.add_argument('--image-size', type=int, default=224)
  ap.add_argument('--dtype', choices=('float32', 'bfloat16'), default='float32',
                  help='compute dtype; parameters stay float32 (vvt model.dtype; HF torch.autocast)')
  ap.add_argument('--precision', choices=('default', 'tf32', 'highest'), default='default',
                  help='float32 matmuls: each library\'s default (JAX on GPU: TF32; torch: full f32), TF32 on '
                       'both, or full f32 on both')
  ap.add_argument('--compile', action='store_true', help='HF model through torch.compile')
  ap.add_argument('--threads', type=int, default=0,
                  help='CPU threads of every process (pinned to that many CPUs; default: all). OpenMP (torch) '
                       'slows down many times over when its threads share busy cores: use 1 on a loaded host')
  ap.add_argument('--rows', default='.', help='regex over ROW/MODE, e.g. "divided|vivit" or "/train"')
  ap.add_argument('--iters', type=int, help='timed steps per round (default: 5 on the CPU, 20 on the GPU)')
  ap.add_argument('--warmup', type=int, help='untimed steps after the first (default: 1 CPU, 3 GPU)')
  ap.add_argument('--rounds', type=int, help='processes per side and row (default: 2 on the CPU, 1 on the GPU)')
  ap.add_argument('--ceiling-size', type=int, help='n of the ceiling matmul (default: 2048 CPU, 8192 GPU)')
  ap.add_argument('--timeout', type=float, default=3600, help='seconds per child process')
  ap.add_argument('--json', help='write every measurement to this file')
  ap.add_argument('--vvt-only', action='store_true', help='every vvt scheme alone against the ceiling')
  ap.add_argument('--child', choices=('vvt', 'hf', 'ceiling'), help=argparse.SUPPRESS)
  ap.add_argument('--spec', help=argparse.SUPPRESS)
  args = ap.parse_args(argv)
  gpu = args.device == 'gpu'
  for name, cpu_default, gpu_default in (('batch', 1, 8), ('iters', 5, 20), ('warmup', 1, 3), ('rounds', 2, 1),
                                         ('ceiling_size', 2048, 8192)):
    if getattr(args, name) is None:
      setattr(args, name, gpu_default if gpu else cpu_default)
  return args


def main(argv=None) -> int:
  args = parse_args(argv)
  if args.child:
    child_main(args.child, json.loads(args.spec))
    return 0
  names = list(ROWS) + (list(VVT_ONLY_ROWS) if args.vvt_only else [])
  selected = [(n, m) for n in names for m in MODES if re.search(args.rows, f'{n}/{m}')]
  if not selected:
    _progress(f'no row matches --rows {args.rows!r}: rows are {", ".join(names)} x {"/".join(MODES)}')
    return 2
  sides = ('vvt',) if args.vvt_only else ('vvt', 'hf')
  ceilings = []

  def measure_ceiling():
    result = run_child('ceiling', dict(device=args.device, dtype=args.dtype, precision=args.precision,
                                       ceiling_size=args.ceiling_size, iters=args.iters, warmup=args.warmup,
                                       threads=args.threads), args.timeout)
    ceilings.append(result)
    _progress('ceiling: ' + (result.get('error') or f'{result["flops_per_s"] / 1e9:.1f} GFLOP/s'))

  measure_ceiling()
  rows = [measure_row(name, mode, args, sides, measure_ceiling) for name, mode in selected]
  ceiling = max((c for c in ceilings if 'error' not in c), key=lambda c: c['flops_per_s'], default=ceilings[0])
  ceiling = dict(ceiling, measured=[c.get('flops_per_s') for c in ceilings])
  print(header(args, rows, ceiling))
  print()
  print(table(rows, ceiling.get('flops_per_s'), args.vvt_only))
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(dict(args=vars(args), ceiling=ceiling, rows=rows), f, indent=1)
  bad = [f'{r["row"]}/{r["mode"]}' for r in rows if r.get('params_equal') is False]
  if bad:
    _progress(f'parameter counts differ between vvt and HF: {", ".join(bad)}')
  failed = any('error' in side for r in rows for side in (r['vvt'], r.get('hf', {})))
  return 1 if bad or failed else 0


if __name__ == '__main__':
  sys.exit(main())
