"""Jitted train and eval steps (jax.jit with NamedSharding; no pmap).

The state is sharded by `config.mesh`'s rules (`vvt.train.sharding`: replicated on a `data`-only
mesh, FSDP over `fsdp`, heads / MLP over `model`), the batch over the data-like axes; XLA inserts
the all-gathers of sharded params and the reduce-scatter / all-reduce of the gradients, which are
constrained to their parameters' shardings. Batches carry uint8 pixels; both steps
normalise them on the device (`vvt.data.normalization`). Per-step randomness is
`fold_in(state.rng, state.step)`, so a resumed run draws exactly the same
dropout / stochastic-depth / mixup masks as an uninterrupted one.
"""
import functools
from typing import Mapping

import jax
import jax.numpy as jnp
import optax
from clu import metrics as clu_metrics
from jax.sharding import NamedSharding

from vvt.data import normalization
from vvt.train import losses
from vvt.train import mesh as mesh_lib
from vvt.train import model_state
from vvt.train.state import TrainState


def heads_of(model_cfg) -> dict:
  """{head: num_classes}; a single-head model has the head ''."""
  nc = model_cfg.num_classes
  if isinstance(nc, Mapping) or hasattr(nc, 'items'):
    return {str(k): int(v) for k, v in nc.items()}
  return {'': int(nc)}


def metric_name(head: str, base: str = 'accuracy') -> str:
  return base if head == '' else f'{base}_{head}'


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


def traced_under(mesh):
  """Decorator: the step is traced with `mesh` as the abstract mesh, so that the model's sharding hints
  (`vvt.models.blocks.constrain_batch`, inside scanned layers) know the mesh axes."""
  def wrap(step):
    @functools.wraps(step)
    def traced(*args):
      with jax.sharding.use_abstract_mesh(mesh.abstract_mesh):
        return step(*args)
    return traced
  return wrap


def make_train_step(module, tx, schedule, config, mesh, shardings=None):
  """Returns jitted `train_step(state, batch) -> (state, metrics, status)`.

  `status` = {'loss', 'param_norm'}: scalars the loop checks for NaN / inf.
  The state is donated and kept on `shardings` (a TrainState of NamedSharding; default
  `model_state.state_shardings`, i.e. the `config.mesh` rules), the batch sharded over the
  data-like axes; metrics and status come back replicated.
  """
  if shardings is None:
    shardings = model_state.state_shardings(module, config, tx, mesh)
  rep = mesh_lib.replicated(mesh)
  return jax.jit(train_step_fn(module, tx, schedule, config, mesh, shardings.params),
                 in_shardings=(shardings, mesh_lib.batch_sharding(mesh)),
                 out_shardings=(shardings, rep, rep),
                 donate_argnums=(0,))


def train_step_fn(module, tx, schedule, config, mesh, param_shardings=None):
  """`train_step(state, batch) -> (state, metrics, status)` before jit (see make_train_step).

  batch: 'inputs' uint8 or float (B, T, H, W, 3), 'label' (or 'label/<head>') int32 (B,),
  'mask' float32 (B,). `mesh` places the inputs and the micro-batches of gradient accumulation
  (batch dimension over the data-like axes); `param_shardings` (optional) those of the gradients.
  """
  heads = heads_of(config.model)
  accum = int(config.optimizer.accumulation_steps)
  ls = float(config.loss.label_smoothing)
  mix_kw = dict(mixup_alpha=float(config.loss.mixup_alpha),
                cutmix_alpha=float(config.loss.cutmix_alpha),
                switch_prob=float(config.loss.mix_switch_prob))
  metrics_cls = train_metrics_class(heads)
  norm = config.dataset.normalization
  micro_sharding = NamedSharding(mesh, mesh_lib.batch_spec(mesh, leading=1))
  batch_sharding = mesh_lib.batch_sharding(mesh)

  def constrain_grads(grads):
    if param_shardings is None:
      return grads
    return jax.lax.with_sharding_constraint(grads, param_shardings)

  def loss_fn(params, inputs, targets, mask, denom, rng):
    logits = losses.as_head_dict(module.apply(
        {'params': params}, inputs, train=True, rngs={'dropout': rng}))
    logits = {h: logits[h] for h in heads}
    per_example = losses.multi_head_loss(logits, targets)
    loss = jnp.sum(per_example * mask) / denom
    return loss, (per_example, logits)

  grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

  def correct_of(logits, labels):
    return {h: (jnp.argmax(logits[h], -1) == labels[h]).astype(jnp.float32)
            for h in heads}

  @traced_under(mesh)
  def train_step(state: TrainState, batch):
    rng = jax.random.fold_in(state.rng, state.step)
    r_mix, r_drop = jax.random.split(rng)
    mask = batch['mask'].astype(jnp.float32)
    labels = {h: batch[losses.label_key(h)] for h in heads}
    targets = {h: losses.one_hot_targets(labels[h], n, ls) for h, n in heads.items()}
    inputs = normalization.normalize(batch['inputs'], norm)
    inputs, targets, _ = losses.mix_batch(r_mix, inputs, targets, **mix_kw)
    inputs = jax.lax.with_sharding_constraint(inputs, batch_sharding)
    denom = jnp.maximum(jnp.sum(mask), 1.0)
    if accum == 1:
      (loss, (per_example, logits)), grads = grad_fn(
          state.params, inputs, targets, mask, denom, r_drop)
      correct = correct_of(logits, labels)
    else:
      # Micro-batch j takes rows j, j+k, ... so every micro-batch stays sharded
      # over `data` and the gradients are summed (global denominator): the
      # result equals the full-batch gradient.
      def split(x):
        b = x.shape[0]
        x = x.reshape((b // accum, accum) + x.shape[1:]).swapaxes(0, 1)
        return jax.lax.with_sharding_constraint(x, micro_sharding)

      micro = jax.tree.map(split, (inputs, targets, mask, labels))

      def body(carry, xs):
        g_acc, i = carry
        x, t, m, lab = xs
        (l, (pe, lg)), g = grad_fn(state.params, x, t, m, denom,
                                   jax.random.fold_in(r_drop, i))
        g_acc = constrain_grads(jax.tree.map(jnp.add, g_acc, g))
        return (g_acc, i + 1), (l, pe, correct_of(lg, lab))

      zeros = constrain_grads(jax.tree.map(jnp.zeros_like, state.params))
      (grads, _), (ls_, pe, corr) = jax.lax.scan(
          body, (zeros, jnp.zeros((), jnp.int32)), micro)
      loss = jnp.sum(ls_)
      unsplit = lambda x: x.swapaxes(0, 1).reshape((-1,) + x.shape[2:])
      per_example = unsplit(pe)
      correct = {h: unsplit(c) for h, c in corr.items()}
    grads = constrain_grads(grads)
    updates, opt_state = tx.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    lr = schedule(state.step)
    ones = jnp.ones_like(mask)
    outputs = {
        'loss': per_example, 'mask': mask,
        'learning_rate': lr * ones,
        'grad_norm': optax.tree.norm(grads) * ones,
    }
    for h in heads:
      outputs[metric_name(h)] = correct[h]
    if len(heads) > 1:
      outputs['accuracy_action'] = jnp.prod(
          jnp.stack([correct[h] for h in heads]), axis=0)
    metrics = metrics_cls.single_from_model_output(**outputs)
    new_state = state.replace(step=state.step + 1, params=params,
                              opt_state=opt_state)
    status = {'loss': loss, 'param_norm': optax.tree.norm(params)}
    return new_state, metrics, status

  return train_step


def make_eval_step(module, config, mesh, param_shardings=None):
  """Returns jitted `eval_step(params, batch) -> (scores, passthrough)`.

  Params on `param_shardings` (default `model_state.param_shardings`: the `config.mesh` rules).
  Scores are per-view logits (or softmax probabilities when
  `eval.average == 'softmax'`) for each head; they and the batch's
  video_index / mask / labels come back replicated, so every host can
  aggregate the whole global batch.
  """
  if param_shardings is None:
    param_shardings = model_state.param_shardings(module, config, mesh)
  rep = mesh_lib.replicated(mesh)
  return jax.jit(traced_under(mesh)(eval_step_fn(module, config)),
                 in_shardings=(param_shardings, mesh_lib.batch_sharding(mesh)),
                 out_shardings=(rep, rep))


def eval_step_fn(module, config):
  """`eval_step(params, batch) -> (scores, passthrough)` before jit (see make_eval_step).

  scores: {head: float32 (B, num_classes)}; passthrough: the batch without 'inputs'.
  """
  heads = heads_of(config.model)
  average = config.eval.average
  norm = config.dataset.normalization

  def eval_step(params, batch):
    inputs = normalization.normalize(batch['inputs'], norm)
    logits = losses.as_head_dict(module.apply({'params': params}, inputs,
                                              train=False))
    scores = {}
    for h in heads:
      lg = logits[h].astype(jnp.float32)
      scores[h] = jax.nn.softmax(lg, axis=-1) if average == 'softmax' else lg
    passthrough = {k: v for k, v in batch.items() if k != 'inputs'}
    return scores, passthrough

  return eval_step
