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

The steps read a run's specs (`vvt.config.run_spec.RunSpec`) through `TrainSettings` / `EvalSettings` (the fields
they use), among them the run's task (`vvt.tasks`, built from `run.task`: what a batch carries, the model's
outputs, the loss, the train metrics, the eval scores); `vvt.train.program` builds and jits them for every command.
"""
import dataclasses
import functools
from typing import Callable

from clu import metrics as clu_metrics
import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding
import optax

from vvt.data import normalize
from vvt.models import axes as logical_axes
from vvt.tasks import registry as task_registry
from vvt.tasks.base import Task
from vvt.train import ema as ema_lib
from vvt.train import mesh as mesh_lib
from vvt.train.state import TrainState

# ----------------------------------------------------------------------------- settings


@dataclasses.dataclass(frozen=True)
class EvalSettings:
  """What the eval step reads of a run's specs."""
  task: Task                # the run's task (run.task, vvt.tasks): outputs and scores
  normalization: str        # dataset.normalization of the uint8 pixels
  logical_rules: tuple = logical_axes.DEFAULT_RULES  # mesh.logical_rules, complete (a MeshSpec's)

  @classmethod
  def of(cls, run, task: Task | None = None) -> 'EvalSettings':
    """The settings of a RunSpec (`task`: its task, where built already)."""
    if isinstance(run, cls):
      return run
    return cls(task=task_registry.task_of(run) if task is None else task, normalization=run.data.normalization,
               logical_rules=run.mesh.logical_rules)


@dataclasses.dataclass(frozen=True)
class TrainSettings:
  """What the train step reads of a run's specs."""
  task: Task                # the run's task (run.task, vvt.tasks): targets, outputs, loss, metrics
  normalization: str        # dataset.normalization of the uint8 pixels
  accumulation_steps: int   # optimizer.accumulation_steps: micro-batches per update
  logical_rules: tuple = logical_axes.DEFAULT_RULES  # mesh.logical_rules, complete (a MeshSpec's)
  ema_decay: float = 0.0    # optimizer.ema_decay: the EMA of a state that has one (vvt.train.ema; 0: none)

  @classmethod
  def of(cls, run, task: Task | None = None) -> 'TrainSettings':
    """The settings of a RunSpec (`task`: its task, where built already)."""
    if isinstance(run, cls):
      return run
    return cls(task=task_registry.task_of(run) if task is None else task, normalization=run.data.normalization,
               accumulation_steps=run.optimizer.accumulation_steps, logical_rules=run.mesh.logical_rules,
               ema_decay=run.optimizer.ema_decay)


def train_metrics_class(task: Task):
  """The clu metrics of the train step: loss, learning rate, gradient norm and the task's `metric_names`."""
  fields = {
      'loss': clu_metrics.Average.from_output('loss'),
      'learning_rate': clu_metrics.LastValue.from_output('learning_rate'),
      'grad_norm': clu_metrics.LastValue.from_output('grad_norm'),
  }
  for name in task.metric_names:
    fields[name] = clu_metrics.Average.from_output(name)
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
  """(inputs, targets, labels, mask) of a batch: normalised pixels (B, T, H, W, 3) as the task prepares them
  (classification: mixup / cutmix) with its targets and labels (`Task.prepare`), and the float mask (B,)."""
  mask = batch['mask'].astype(jnp.float32)
  inputs = normalize(batch['inputs'], settings.normalization)
  inputs, targets, labels = settings.task.prepare(batch, inputs, rng)
  return jax.lax.with_sharding_constraint(inputs, batch_sharding), targets, labels, mask


def make_loss_fn(module, task: Task):
  """`loss(params, inputs, targets, mask, denom, rng) -> (loss, (per_example_loss (B,), outputs))`: the task's
  per-example loss of the module's outputs, masked, over `denom` (the global batch's valid rows)."""
  def loss_fn(params, inputs, targets, mask, denom, rng):
    outputs = task.outputs(module, params, inputs, train=True, rng=rng)
    per_example_loss = task.loss(outputs, targets)
    return jnp.sum(per_example_loss * mask) / denom, (per_example_loss, outputs)
  return loss_fn


def full_batch_gradients(grad_fn, task, params, inputs, targets, labels, mask, denom, rng):
  """(loss, per-example loss (B,), the task's train metrics {name: (B,)}, grads) of the whole batch at once."""
  (loss, (per_example_loss, outputs)), grads = grad_fn(params, inputs, targets, mask, denom, rng)
  return loss, per_example_loss, task.train_metrics(outputs, labels), grads


def accumulated_gradients(grad_fn, task, params, inputs, targets, labels, mask, denom, rng, *, accumulation_steps,
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
    (loss, (per_example_loss, outputs)), grads = grad_fn(params, micro_inputs, micro_targets, micro_mask, denom,
                                                         jax.random.fold_in(rng, index))
    grads_sum = constrain_grads(jax.tree.map(jnp.add, grads_sum, grads))
    return (grads_sum, index + 1), (loss, per_example_loss, task.train_metrics(outputs, micro_labels))

  zeros = constrain_grads(jax.tree.map(jnp.zeros_like, params))
  micro_batches = jax.tree.map(split, (inputs, targets, mask, labels))
  (grads, _), (micro_losses, per_example_loss, task_metrics) = jax.lax.scan(
      micro_step, (zeros, jnp.zeros((), jnp.int32)), micro_batches)
  return (jnp.sum(micro_losses), unsplit(per_example_loss), {k: unsplit(v) for k, v in task_metrics.items()},
          grads)


def metric_outputs(per_example_loss, task_metrics, mask, learning_rate, grad_norm) -> dict:
  """The per-example model outputs the train metrics (`train_metrics_class`) average."""
  ones = jnp.ones_like(mask)
  outputs = {'loss': per_example_loss, 'mask': mask, 'learning_rate': learning_rate * ones,
             'grad_norm': grad_norm * ones}
  outputs.update(task_metrics)
  return outputs


def train_step_fn(module, tx, schedule, settings, mesh, param_shardings=None):
  """`train_step(state, batch) -> (state, metrics, status)` before jit (`jit_train_step`; `vvt.train.program`
  builds the step of a run). `status` = {'loss', 'param_norm'}: scalars the loop checks for NaN / inf.

  settings: `TrainSettings` (or the RunSpec they are read from). batch: 'inputs' uint8 or float
  (B, T, H, W, 3), 'mask' float32 (B,) and the task's targets (`Task.label_specs`; classification: 'label' (or
  'label/<head>') int32 (B,)). `mesh` places the inputs
  and the micro-batches of gradient accumulation (batch dimension over the axes of logical `batch` under
  `settings.logical_rules`, which the step is traced under); `param_shardings` (optional) those of the gradients.
  """
  settings = TrainSettings.of(settings)
  task = settings.task
  rules = settings.logical_rules
  metrics_cls = train_metrics_class(task)
  batch_sharding = mesh_lib.batch_sharding(mesh, rules)
  grad_fn = jax.value_and_grad(make_loss_fn(module, task), has_aux=True)

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
    loss, per_example_loss, task_metrics, grads = gradients(grad_fn, task, state.params, inputs, targets, labels,
                                                            mask, denom, rng_dropout)
    grads = constrain_grads(grads)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    metrics = metrics_cls.single_from_model_output(**metric_outputs(
        per_example_loss, task_metrics, mask, schedule(state.step), optax.tree.norm(grads)))
    ema_params = state.ema_params
    if ema_params is not None:  # a state with an EMA: ema = decay * ema + (1 - decay) * params
      ema_params = ema_lib.update(ema_params, params, settings.ema_decay)
    new_state = state.replace(step=state.step + 1, params=params, opt_state=opt_state, ema_params=ema_params)
    return new_state, metrics, {'loss': loss, 'param_norm': optax.tree.norm(params)}

  return train_step


# ----------------------------------------------------------------------------- eval step


def eval_step_fn(module, settings):
  """`eval_step(params, batch) -> (scores, passthrough)` before jit (see jit_eval_step).

  settings: `EvalSettings` (or the RunSpec they are read from). scores: the task's per-view scores
  (`Task.scores`; classification: {head: float32 (B, num_classes)}, logits or softmax probabilities under
  `eval.average='softmax'`); passthrough: the batch without 'inputs'.
  """
  settings = EvalSettings.of(settings)
  task = settings.task

  def eval_step(params, batch):
    inputs = normalize(batch['inputs'], settings.normalization)
    scores = task.scores(task.outputs(module, params, task.eval_inputs(batch, inputs), train=False))
    passthrough = {k: v for k, v in batch.items() if k != 'inputs'}
    return scores, passthrough

  return eval_step
