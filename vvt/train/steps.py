"""Jitted train and eval steps (jax.jit with NamedSharding; no pmap).

The state is sharded by `config.mesh`'s rules (`vvt.train.sharding`: replicated on a `data`-only
mesh, FSDP over `fsdp`, heads / MLP over `model`), the batch over the data-like axes; XLA inserts
the all-gathers of sharded params and the reduce-scatter / all-reduce of the gradients, which are
constrained to their parameters' shardings. The run's logical axis rules (`config.mesh.logical_rules`: what the
batch, heads and MLP units are sharded over) place the batch and are active while the steps are traced
(`traced_under`), where the models read them. Batches carry uint8 pixels; both steps
normalise them on the device (`vvt.data.transforms.normalization`). Per-step randomness is
`fold_in(state.rng, state.step)`, so a resumed run draws exactly the same
dropout / stochastic-depth / mixup masks as an uninterrupted one.

The steps read the run config through `TrainSettings` / `EvalSettings` (the fields they use, resolved
once); `vvt.train.program` builds and jits them for every command.
"""
import dataclasses
import functools
from typing import Callable, Mapping

import jax
import jax.numpy as jnp
import optax
from clu import metrics as clu_metrics
from jax.sharding import NamedSharding

from vvt.config.sharding import logical_rules_of
from vvt.data.transforms import normalization
from vvt.models import axes as logical_axes
from vvt.train import ema as ema_lib
from vvt.train import losses
from vvt.train import mesh as mesh_lib
from vvt.train.state import TrainState


def heads_of(model_cfg) -> dict:
  """{head: num_classes}; a single-head model has the head ''."""
  nc = model_cfg.num_classes
  if isinstance(nc, Mapping) or hasattr(nc, 'items'):
    return {str(k): int(v) for k, v in nc.items()}
  return {'': int(nc)}


def metric_name(head: str, base: str = 'accuracy') -> str:
  return base if head == '' else f'{base}_{head}'


# ----------------------------------------------------------------------------- settings


@dataclasses.dataclass(frozen=True)
class EvalSettings:
  """What the eval step reads of a run config."""
  heads: Mapping[str, int]  # {head: num_classes}, '' for a single head
  normalization: str        # dataset.normalization of the uint8 pixels
  average: str              # eval.average: 'logits' | 'softmax' (the scores returned)
  logical_rules: tuple = logical_axes.DEFAULT_RULES  # mesh.logical_rules, complete (logical_rules_of)

  @classmethod
  def of(cls, config) -> 'EvalSettings':
    if isinstance(config, cls):
      return config
    return cls(heads=heads_of(config.model), normalization=str(config.dataset.normalization),
               average=str(config.eval.average), logical_rules=logical_rules_of(config.get('mesh')))


@dataclasses.dataclass(frozen=True)
class TrainSettings:
  """What the train step reads of a run config."""
  heads: Mapping[str, int]  # {head: num_classes}, '' for a single head
  normalization: str        # dataset.normalization of the uint8 pixels
  accumulation_steps: int   # optimizer.accumulation_steps: micro-batches per update
  label_smoothing: float    # loss.label_smoothing
  mixup_alpha: float        # loss.mixup_alpha (0: no mixup)
  cutmix_alpha: float       # loss.cutmix_alpha (0: no cutmix)
  mix_switch_prob: float    # loss.mix_switch_prob: cutmix's share when both are on
  logical_rules: tuple = logical_axes.DEFAULT_RULES  # mesh.logical_rules, complete (logical_rules_of)
  ema_decay: float = 0.0    # optimizer.ema_decay: the EMA of a state that has one (vvt.train.ema)

  @classmethod
  def of(cls, config) -> 'TrainSettings':
    if isinstance(config, cls):
      return config
    return cls(heads=heads_of(config.model), normalization=str(config.dataset.normalization),
               accumulation_steps=int(config.optimizer.accumulation_steps),
               label_smoothing=float(config.loss.label_smoothing),
               mixup_alpha=float(config.loss.mixup_alpha), cutmix_alpha=float(config.loss.cutmix_alpha),
               mix_switch_prob=float(config.loss.mix_switch_prob),
               logical_rules=logical_rules_of(config.get('mesh')),
               ema_decay=ema_lib.decay_of(config.optimizer))

  def mix_options(self) -> dict:
    return dict(mixup_alpha=self.mixup_alpha, cutmix_alpha=self.cutmix_alpha,
                switch_prob=self.mix_switch_prob)


def train_metrics_class(heads: dict):
  fields = {
      'loss': clu_metrics.Average.from_output('loss'),
      'learning_rate': clu_metrics.LastValue.from_output('learning_rate'),
      'grad_norm': clu_metrics.LastValue.from_output('grad_norm'),
  }
  for h in heads:
    fields[metric_name(h)] = clu_metrics.Average.from_output(metric_name(h))
  if len(heads) > 1:
    fields['accuracy_action'] = clu_metrics.Average.from_output('accuracy_action')
  return clu_metrics.Collection.create(**fields)


def traced_under(mesh, rules=None):
  """Decorator: the step is traced with `mesh` as the abstract mesh and `rules` as the logical axis rules
  (`vvt.models.axes.axis_rules`; None: those active when the step is wrapped), so that the model's sharding hints
  (`vvt.models.blocks.constrain_batch`, inside scanned layers, the kernels' operand specs) know the mesh axes and
  what each logical axis is sharded over, whenever jax traces it (first call, `.lower`)."""
  rules = logical_axes.active_rules() if rules is None else rules

  def wrap(step):
    @functools.wraps(step)
    def traced(*args):
      with jax.sharding.use_abstract_mesh(mesh.abstract_mesh), logical_axes.axis_rules(rules):
        return step(*args)
    return traced
  return wrap


# ----------------------------------------------------------------------------- jit


def jit_train_step(train_step: Callable, mesh, shardings, rules=None) -> Callable:
  """`train_step` (of `train_step_fn`) jitted: the state donated and kept on `shardings` (a TrainState of
  NamedSharding), the batch sharded over the axes of logical `batch` under `rules` (None: the active rules),
  metrics and status replicated."""
  rep = mesh_lib.replicated(mesh)
  return jax.jit(train_step, in_shardings=(shardings, mesh_lib.batch_sharding(mesh, rules)),
                 out_shardings=(shardings, rep, rep), donate_argnums=(0,))


def jit_eval_step(eval_step: Callable, mesh, param_shardings, rules=None) -> Callable:
  """`eval_step` (of `eval_step_fn`) jitted, traced under `mesh` and the logical axis rules `rules` (None: those
  active now): params on `param_shardings`, the batch sharded over the axes of logical `batch`, scores and
  passthrough replicated (every host aggregates them all)."""
  rep = mesh_lib.replicated(mesh)
  rules = logical_axes.active_rules() if rules is None else rules
  return jax.jit(traced_under(mesh, rules)(eval_step),
                 in_shardings=(param_shardings, mesh_lib.batch_sharding(mesh, rules)), out_shardings=(rep, rep))


# ----------------------------------------------------------------------------- train step


def prepare_batch(batch, rng, settings: TrainSettings, batch_sharding):
  """(inputs, targets, labels, mask) of a batch: normalised pixels (B, T, H, W, 3) mixed (mixup / cutmix)
  with their soft targets {head: (B, C)}, the integer labels {head: (B,)} and the float mask (B,)."""
  heads = settings.heads
  mask = batch['mask'].astype(jnp.float32)
  labels = {h: batch[losses.label_key(h)] for h in heads}
  targets = {h: losses.one_hot_targets(labels[h], n, settings.label_smoothing) for h, n in heads.items()}
  inputs = normalization.normalize(batch['inputs'], settings.normalization)
  inputs, targets, _ = losses.mix_batch(rng, inputs, targets, **settings.mix_options())
  return jax.lax.with_sharding_constraint(inputs, batch_sharding), targets, labels, mask


def make_loss_fn(module, heads):
  """`loss(params, inputs, targets, mask, denom, rng) -> (loss, (per_example_loss (B,), logits))`: the
  heads' summed cross-entropy, masked, over `denom` (the global batch's valid rows)."""
  def loss_fn(params, inputs, targets, mask, denom, rng):
    logits = losses.as_head_dict(module.apply({'params': params}, inputs, train=True, rngs={'dropout': rng}))
    logits = {h: logits[h] for h in heads}
    per_example_loss = losses.multi_head_loss(logits, targets)
    return jnp.sum(per_example_loss * mask) / denom, (per_example_loss, logits)
  return loss_fn


def correct_of(logits, labels) -> dict:
  """{head: float (B,)}: 1 where the top-1 class is the label."""
  return {h: (jnp.argmax(logits[h], -1) == labels[h]).astype(jnp.float32) for h in labels}


def full_batch_gradients(grad_fn, params, inputs, targets, labels, mask, denom, rng):
  """(loss, per-example loss (B,), correct {head: (B,)}, grads) of the whole batch at once."""
  (loss, (per_example_loss, logits)), grads = grad_fn(params, inputs, targets, mask, denom, rng)
  return loss, per_example_loss, correct_of(logits, labels), grads


def accumulated_gradients(grad_fn, params, inputs, targets, labels, mask, denom, rng, *, accumulation_steps,
                          micro_sharding, constrain_grads):
  """As `full_batch_gradients`, over `accumulation_steps` micro-batches scanned one after the other.

  Micro-batch j takes rows j, j+k, ... so that every micro-batch stays sharded over `data`; the gradients
  are summed (over the global denominator), so the result equals the full-batch gradient.
  """
  def split(x):  # (B, ...) -> (k, B / k, ...)
    x = x.reshape((x.shape[0] // accumulation_steps, accumulation_steps) + x.shape[1:]).swapaxes(0, 1)
    return jax.lax.with_sharding_constraint(x, micro_sharding)

  def unsplit(x):  # (k, B / k, ...) -> (B, ...)
    return x.swapaxes(0, 1).reshape((-1,) + x.shape[2:])

  def micro_step(carry, micro_batch):
    grads_sum, index = carry
    micro_inputs, micro_targets, micro_mask, micro_labels = micro_batch
    (loss, (per_example_loss, logits)), grads = grad_fn(params, micro_inputs, micro_targets, micro_mask, denom,
                                                        jax.random.fold_in(rng, index))
    grads_sum = constrain_grads(jax.tree.map(jnp.add, grads_sum, grads))
    return (grads_sum, index + 1), (loss, per_example_loss, correct_of(logits, micro_labels))

  zeros = constrain_grads(jax.tree.map(jnp.zeros_like, params))
  micro_batches = jax.tree.map(split, (inputs, targets, mask, labels))
  (grads, _), (micro_losses, per_example_loss, correct) = jax.lax.scan(
      micro_step, (zeros, jnp.zeros((), jnp.int32)), micro_batches)
  return (jnp.sum(micro_losses), unsplit(per_example_loss), {h: unsplit(c) for h, c in correct.items()},
          grads)


def metric_outputs(heads, per_example_loss, correct, mask, learning_rate, grad_norm) -> dict:
  """The per-example model outputs the train metrics (`train_metrics_class`) average."""
  ones = jnp.ones_like(mask)
  outputs = {'loss': per_example_loss, 'mask': mask, 'learning_rate': learning_rate * ones,
             'grad_norm': grad_norm * ones}
  for h in heads:
    outputs[metric_name(h)] = correct[h]
  if len(heads) > 1:
    outputs['accuracy_action'] = jnp.prod(jnp.stack([correct[h] for h in heads]), axis=0)
  return outputs


def train_step_fn(module, tx, schedule, settings, mesh, param_shardings=None):
  """`train_step(state, batch) -> (state, metrics, status)` before jit (`jit_train_step`; `vvt.train.program`
  builds the step of a run). `status` = {'loss', 'param_norm'}: scalars the loop checks for NaN / inf.

  settings: `TrainSettings` (or the run config they are read from). batch: 'inputs' uint8 or float
  (B, T, H, W, 3), 'label' (or 'label/<head>') int32 (B,), 'mask' float32 (B,). `mesh` places the inputs
  and the micro-batches of gradient accumulation (batch dimension over the axes of logical `batch` under
  `settings.logical_rules`, which the step is traced under); `param_shardings` (optional) those of the gradients.
  """
  settings = TrainSettings.of(settings)
  heads = settings.heads
  rules = settings.logical_rules
  metrics_cls = train_metrics_class(heads)
  batch_sharding = mesh_lib.batch_sharding(mesh, rules)
  grad_fn = jax.value_and_grad(make_loss_fn(module, heads), has_aux=True)

  def constrain_grads(grads):
    return grads if param_shardings is None else jax.lax.with_sharding_constraint(grads, param_shardings)

  if settings.accumulation_steps == 1:
    gradients = full_batch_gradients
  else:
    gradients = functools.partial(
        accumulated_gradients, accumulation_steps=settings.accumulation_steps, constrain_grads=constrain_grads,
        micro_sharding=NamedSharding(mesh, mesh_lib.batch_spec(mesh, leading=1, rules=rules)))

  @traced_under(mesh, rules)
  def train_step(state: TrainState, batch):
    rng_mix, rng_dropout = jax.random.split(jax.random.fold_in(state.rng, state.step))
    inputs, targets, labels, mask = prepare_batch(batch, rng_mix, settings, batch_sharding)
    denom = jnp.maximum(jnp.sum(mask), 1.0)
    loss, per_example_loss, correct, grads = gradients(grad_fn, state.params, inputs, targets, labels, mask,
                                                       denom, rng_dropout)
    grads = constrain_grads(grads)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = metrics_cls.single_from_model_output(**metric_outputs(
        heads, per_example_loss, correct, mask, schedule(state.step), optax.tree.norm(grads)))
    ema_params = state.ema_params
    if ema_params is not None:  # a state with an EMA: ema = decay * ema + (1 - decay) * params
      ema_params = ema_lib.update(ema_params, params, settings.ema_decay)
    new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state, ema_params=ema_params)
    return new_state, metrics, {'loss': loss, 'param_norm': optax.tree.norm(params)}

  return train_step


# ----------------------------------------------------------------------------- eval step


def eval_step_fn(module, settings):
  """`eval_step(params, batch) -> (scores, passthrough)` before jit (see jit_eval_step).

  settings: `EvalSettings` (or the run config they are read from). scores: {head: float32
  (B, num_classes)}, per-view logits (or softmax probabilities when `average == 'softmax'`);
  passthrough: the batch without 'inputs'.
  """
  settings = EvalSettings.of(settings)

  def eval_step(params, batch):
    inputs = normalization.normalize(batch['inputs'], settings.normalization)
    logits = losses.as_head_dict(module.apply({'params': params}, inputs, train=False))
    scores = {}
    for h in settings.heads:
      head_logits = logits[h].astype(jnp.float32)
      scores[h] = jax.nn.softmax(head_logits, axis=-1) if settings.average == 'softmax' else head_logits
    passthrough = {k: v for k, v in batch.items() if k != 'inputs'}
    return scores, passthrough

  return eval_step
