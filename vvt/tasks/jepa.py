"""Latent prediction pretraining, V-JEPA (Bardes et al. 2024) / V-JEPA 2 (Assran et al. 2025): `task.name='jepa'`.

    video -> target encoder (EMA of the context encoder, all tokens, no gradient) -> LayerNorm (no affine) -> h
    for each mask set i (`task.jepa.mask_sets`, vvt/tasks/multiblock_masks.py):
      context encoder on the context tokens only (vvt/models/masking.py) -> predictor (mask token i, 3D RoPE at
      the tokens' positions, vvt/models/predictor.py) -> z_i, the predicted features of the target tokens
    loss = mean over sets of mean(|z_i - h[targets_i]| ^ p) / p   (p = task.jepa.loss_exp, 1: L1)

Facts and where they come from (facebookresearch/jepa `app/vjepa/train.py`, `forward_target` / `loss_fn`): the
target is `F.layer_norm(h, (h.size(-1),))` of the target encoder's output (its own final LayerNorm included), a
LayerNorm without scale or bias over the feature dimension; the loss is `mean(|z - h| ** loss_exp) / loss_exp`
per mask set, averaged over the sets, with loss_exp 1.0 (L1) in the released configs; the encoder and predictor
run once per mask set, the target encoder once. The momentum follows `ema[0] + i * (ema[1] - ema[0]) / (ipe *
num_epochs * ipe_scale)` at update i (0.998 -> 1.0, ipe_scale 1.25) and the target is updated after every
optimiser step: target <- m target + (1 - m) online. The reference's `reg_coeff` variance term is 0 in its configs
and left out here.

Params: the backbone's own (the context encoder: its names, so the run is a backbone for `task.probe.backbone` and
`vvt train --init`), `predictor`, and `target_encoder` (the backbone's params again: the EMA). The optimiser
(`optimizer`) trains the backbone and predictor with the run's optimiser and gives `target_encoder` no gradient
update: its update is the EMA step, computed inside the optimiser from the updated online params, so the train step
is unchanged and the momentum's step count lives in the optimiser state (checkpointed: a resumed run continues the
ramp exactly). A fresh run starts its target as a copy of the online encoder (the module's init); a run whose
params came from elsewhere (`--init`) starts its target as a copy of the loaded encoder (`from_init`; the predictor
loaded too where the checkpoint has one of the task's shapes), and it is the online encoder again at its first update
(momentum 0 at step 0).

Train metrics: `pred_std` and `target_std`, the standard deviation over the target tokens of the predicted and
target features (averaged over channels and mask sets): a collapse shows as both falling towards 0.
Evaluation: the same loss with masks from a fixed key (`task.jepa.eval_mask_seed`), averaged over the views
(`loss`, the main metric; lower is better).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from vvt.tasks import jepa_options
from vvt.tasks import mae
from vvt.tasks import multiblock_masks
from vvt.tasks.base import Task

TARGET = 'target_encoder'
PREDICTOR = jepa_options.PREDICTOR


def normalise(h):
  """LayerNorm over the last axis without scale or bias (eps 1e-5, torch's default)."""
  mean = jnp.mean(h, axis=-1, keepdims=True)
  var = jnp.mean(jnp.square(h - mean), axis=-1, keepdims=True)
  return (h - mean) * jax.lax.rsqrt(var + 1e-5)


def jepa_model(backbone: nn.Module, predictor_spec) -> nn.Module:
  """The backbone's module with a predictor and (at init) the target encoder's params, a copy of its own:
  `module(video, context=, target=, index=)` -> the predicted features (B, K_t, D) of the target tokens; with
  `outputs` (and `kept`) the backbone's named outputs; plain, the backbone's logits."""
  from vvt.models import predictor as predictor_lib
  base = type(backbone)

  class JepaModel(base):
    predictor_spec: Any = None

    def __call__(self, video, train: bool = False, outputs=None, kept=None, context=None, target=None,
                 index: int = 0):
      if outputs is not None:
        return base.__call__(self, video, train=train, outputs=outputs, kept=kept)
      return self._jepa(video, train, context, target, index)

    @nn.compact
    def _jepa(self, video, train, context, target, index):
      predictor = predictor_lib.Predictor(self.predictor_spec, name=PREDICTOR)
      if context is None:  # a plain call (init, summaries): the logits; at init the predictor and target too
        logits = base.__call__(self, video, train=train)
        if self.is_initializing():
          online = {k: v for k, v in self.variables['params'].items() if k not in (PREDICTOR, TARGET)}
          self.param(TARGET, lambda _: jax.tree.map(jnp.copy, online))
          block_set = multiblock_masks.BlockSet(1, (0.5, 0.5))
          context, target = multiblock_masks.sample(jax.random.PRNGKey(0), video.shape[0], block_set,
                                                    self.spec.grid)
          self._predict(predictor, video, False, context, target, 0)
        return logits
      return self._predict(predictor, video, train, context, target, index)

    def _predict(self, predictor, video, train, context, target, index):
      enc = base.__call__(self, video, train=train, outputs=('encoded',), kept=context)['encoded']
      enc = enc.reshape(video.shape[0], -1, enc.shape[-1])
      return predictor(enc, context, target, grid=self.spec.grid, index=index)

  fields = {f.name: getattr(backbone, f.name) for f in dataclasses.fields(backbone)
            if f.init and f.name not in ('parent', 'name')}
  return JepaModel(**fields, predictor_spec=predictor_spec)


def momentum_at(step, start: float, end: float, ramp_steps: float):
  """The target's EMA momentum at optimiser update `step`: start + step (end - start) / ramp_steps, capped at
  end."""
  m = start + step.astype(jnp.float32) * (end - start) / ramp_steps
  return jnp.minimum(m, end) if end >= start else jnp.maximum(m, end)


def ema_target(inner: optax.GradientTransformation, momentum) -> optax.GradientTransformation:
  """`inner` (the online params' optimiser; `target_encoder` frozen in it), then the target's update
  (1 - m) (online' - target), online' the online params after `inner`'s update, m = momentum(count) (0 at count
  0: the target starts at the online encoder)."""
  def init(params):
    return (inner.init(params), jnp.zeros((), jnp.int32))

  def update(grads, state, params=None):
    inner_state, count = state
    updates, inner_state = inner.update(grads, inner_state, params)
    online = {k: v for k, v in optax.apply_updates(params, updates).items() if k not in (PREDICTOR, TARGET)}
    m = jnp.where(count == 0, 0.0, momentum(count))
    target = jax.tree.map(lambda t, o: ((1 - m) * (o.astype(jnp.float32) - t.astype(jnp.float32))).astype(t.dtype),
                          params[TARGET], online)
    return {**updates, TARGET: target}, (inner_state, count + 1)

  return optax.GradientTransformation(init, update)


class LossAggregator(mae.ReconstructionAggregator):
  """An evaluation's loss (`vvt.tasks.base.Aggregator`): per video the mean over its views, `loss` the mean over the
  videos (skipped ones left out), with the views' bookkeeping (the mae task's aggregator, without pictures)."""

  def __init__(self, num_videos: int):
    super().__init__(num_videos, pictures=0)

  def result(self) -> dict:
    res = super().result()
    return {'loss': res.pop('reconstruction_loss'), **res}


@dataclasses.dataclass(frozen=True)
class Jepa(Task):
  """See the module docstring."""
  predictor: Any                 # vvt.models.predictor.PredictorSpec
  mask_sets: tuple               # (BlockSet, ...)
  momentum: tuple = (0.998, 1.0)
  ramp_steps: float = 1.0        # num_train_steps x momentum_scale
  loss_exp: float = 1.0
  eval_mask_seed: int = 0
  name = 'jepa'
  own_params = (PREDICTOR, TARGET)
  carried_params = (PREDICTOR,)  # a VJEPA2Model's predictor continues its pretraining (`--init`)

  @property
  def heads(self) -> dict:
    return {'loss': 1}

  def label_specs(self, batch_size: int) -> dict:
    return {}

  def build_model(self, model_config, backend=None):
    import vvt.models
    return jepa_model(vvt.models.build(model_config, backend=backend), self.predictor)

  def prepare(self, batch, inputs, rng):
    return inputs, {}, {}

  def outputs(self, module, params, inputs, *, train: bool, rng=None) -> dict:
    """{'pred_i', 'target_i'}: (B, K_t, D) predicted and target features of mask set i."""
    key = rng if train and rng is not None else multiblock_masks.eval_key(self.eval_mask_seed)
    r_mask, r_drop = jax.random.split(key)
    b = inputs.shape[0]
    h = module.apply({'params': jax.lax.stop_gradient(params[TARGET])}, inputs, outputs=('encoded',))['encoded']
    h = normalise(h.reshape(b, -1, h.shape[-1]).astype(jnp.float32))
    out = {}
    for i, block_set in enumerate(self.mask_sets):
      context, target = multiblock_masks.sample(jax.random.fold_in(r_mask, i), b, block_set, module.spec.grid)
      rngs = {'dropout': jax.random.fold_in(r_drop, i)} if train else {}
      z = module.apply({'params': params}, inputs, train=train, context=context, target=target, index=i, rngs=rngs)
      out[f'pred_{i}'] = z.astype(jnp.float32)
      out[f'target_{i}'] = jnp.take_along_axis(h, target[..., None], axis=1)
    return out

  def loss(self, outputs, targets):
    """(B,): per clip, the mean over mask sets of mean(|z - h| ^ p) / p over its target tokens and channels."""
    p = self.loss_exp
    each = [jnp.mean(jnp.abs(outputs[f'pred_{i}'] - outputs[f'target_{i}']) ** p, axis=(1, 2)) / p
            for i in range(len(self.mask_sets))]
    return sum(each) / len(each)

  @property
  def metric_names(self) -> tuple:
    return ('pred_std', 'target_std')

  def train_metrics(self, outputs, labels) -> dict:
    def std(kind):
      return sum(jnp.std(outputs[f'{kind}_{i}'], axis=1).mean(axis=-1) for i in range(len(self.mask_sets))) \
          / len(self.mask_sets)
    return {'pred_std': std('pred'), 'target_std': std('target')}

  def scores(self, outputs) -> dict:
    return {'loss': self.loss(outputs, {})[:, None]}

  def eval_labels(self, batch) -> dict:
    return {}

  def aggregator(self, num_videos: int) -> LossAggregator:
    return LossAggregator(num_videos)

  @property
  def main_metric(self) -> str:
    return 'loss'

  @property
  def label_heads(self) -> dict:
    return {}

  def from_init(self, params: dict) -> dict:
    """The target encoder a copy of the loaded encoder (every param but the predictor and the target)."""
    online = {k: v for k, v in params.items() if k not in (PREDICTOR, TARGET)}
    return {**params, TARGET: jax.tree.map(lambda v: v.copy(), online)}

  def carried_advice(self, name: str, checkpoint_shape: tuple, model_shape: tuple) -> str:
    """A predictor of another count of mask tokens (a released V-JEPA 2 predictor has 10): the mask sets to set."""
    if name != f'{PREDICTOR}/mask_tokens' or not checkpoint_shape:
      return ''
    n = checkpoint_shape[0]
    return (f'its predictor has {n} mask tokens, one per mask set, the task {model_shape[0]}: set task.jepa.mask_sets '
            f'to {n} (num_blocks, spatial scale) entries to load it')

  def optimizer(self, make, optimizer, schedule) -> optax.GradientTransformation:
    """The run's optimiser (`make`) on the backbone and predictor, the target encoder frozen in it and moved by
    `ema_target` instead."""
    labels = lambda params: {k: jax.tree.map(lambda _, k=k: 'target' if k == TARGET else 'online', v)
                             for k, v in params.items()}
    inner = optax.multi_transform({'online': make(optimizer, schedule), 'target': optax.set_to_zero()}, labels)
    start, end = self.momentum
    return ema_target(inner, lambda step: momentum_at(step, start, end, self.ramp_steps))


def from_config(config) -> Jepa:
  """The jepa task of a run config (`task.jepa`, `num_train_steps`: the momentum's ramp, which a training run must
  set (`jepa_options.start_problems`); the model's LayerNorm eps and GELU). ValueError: the problems of its options
  (`jepa_options.check`), one line each."""
  from vvt.models import predictor as predictor_lib
  problems = jepa_options.check(config)
  if problems:
    raise ValueError('\n'.join(problems))
  j = config.task.jepa
  width = int(j.pred_width)
  spec = predictor_lib.PredictorSpec(
      hidden_size=width, depth=int(j.pred_depth), num_heads=int(j.pred_heads),
      mlp_dim=int(width * float(j.pred_mlp_ratio)), num_mask_tokens=max(len(j.mask_sets), 1),
      layer_norm_eps=float(config.model.layer_norm_eps), gelu_approximate=bool(config.model.gelu_approximate))
  ratio = tuple(float(a) for a in j.aspect_ratio)
  sets = tuple(multiblock_masks.BlockSet(int(n), (float(s), float(s)), ratio) for n, s in j.mask_sets)
  return Jepa(predictor=spec, mask_sets=sets, momentum=tuple(float(m) for m in j.momentum),
              ramp_steps=max(float(config.num_train_steps), 1.0) * float(j.momentum_scale), loss_exp=float(j.loss_exp),
              eval_mask_seed=int(j.eval_mask_seed))
