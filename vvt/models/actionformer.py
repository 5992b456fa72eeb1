"""ActionFormer (Zhang, Wu, Li, ECCV 2022; code: github happyharrycn/actionformer_release) on a feature sequence.

    head = ActionFormer(num_classes=C, ...)
    out = head.apply({'params': p}, x, steps, train=False)   # x (B, T, D) float, steps (B, T) bool (valid)
    out['logits'] (B, P, C), out['offsets'] (B, P, 2) >= 0 (distances to start and end, in the level's stride),
    out['valid'] (B, P) bool; P = sum over levels l of T / 2^l (`points`)

The design (paper Sec. 3.2-3.3, Fig. 2; `libs/modeling/backbones.py` ConvTransformerBackbone,
`libs/modeling/necks.py`, `libs/modeling/meta_archs.py` PtTransformerClsHead / PtTransformerRegHead):
  projection  `embed_layers` 1-D convolutions (kernel 3) with layer norm and ReLU (`embd_kernel_size`,
              `embd_with_ln`; `backbone_arch[0]` = 2)
  stem        `stem_layers` pre-LN transformer blocks of local self-attention, each step attending to the
              `window` steps around it (`n_mha_win_size`; `backbone_arch[1]` = 2)
  pyramid     `levels` - 1 more blocks, each after a 2x down-sampling (max-pool of the sequence and its mask;
              `scale_factor` 2, `backbone_arch[2]` = 5): `levels` feature maps of T, T/2, ... steps, each layer
              normed (the identity FPN with `fpn_with_ln`)
  heads       shared over the levels: classification, `head_layers` - 1 convolutions (kernel 3, layer norm, ReLU)
              then one to C logits whose bias starts at -log((1 - prior) / prior) (`cls_prior_prob` 0.01);
              regression, the same to 2 distances, times a learned scale per level, through a ReLU
Local attention here masks a full (T, T) score matrix to the band |i - j| <= window // 2 and the valid keys: the
same result as the sliding window, memory O(T^2) (fine for sequences of a few thousand steps).
"""
import flax.linen as nn
import jax.numpy as jnp
import numpy as np


def points(length: int, levels: int, ranges) -> np.ndarray:
  """(P, 4) float32 of every pyramid location: (its step in input steps, regression range low, high, stride);
  level l has length / 2^l locations at steps 0, 2^l, 2 * 2^l, ... (`libs/modeling/loc_generators.py`)."""
  rows = []
  for level in range(levels):
    stride = 2 ** level
    t = np.arange(0, length, stride, dtype=np.float32)
    rows.append(np.stack([t, np.full_like(t, ranges[level][0]), np.full_like(t, ranges[level][1]),
                          np.full_like(t, stride)], 1))
  return np.concatenate(rows)


def _masked_conv(x, steps, features: int, name: str, **kwargs):
  return nn.Conv(features, (3,), padding='SAME', name=name, **kwargs)(x) * steps[..., None]


class LocalBlock(nn.Module):
  """A pre-LN transformer block of local self-attention: (B, T, D), steps (B, T) bool -> (B, T, D)."""
  num_heads: int
  window: int
  mlp_ratio: float = 4.0

  @nn.compact
  def __call__(self, x, steps):
    t = x.shape[1]
    i = jnp.arange(t)
    band = jnp.abs(i[:, None] - i[None, :]) <= self.window // 2
    mask = band[None, None] & (steps[:, None, None, :] > 0)
    y = nn.MultiHeadDotProductAttention(num_heads=self.num_heads, name='attention')(
        nn.LayerNorm(name='norm1')(x), mask=mask)
    x = (x + y) * steps[..., None]
    y = nn.LayerNorm(name='norm2')(x)
    y = nn.Dense(int(x.shape[-1] * self.mlp_ratio), name='mlp1')(y)
    y = nn.Dense(x.shape[-1], name='mlp2')(nn.gelu(y))
    return (x + y) * steps[..., None]


class ActionFormer(nn.Module):
  """See the module docstring."""
  num_classes: int
  embed_dim: int = 512
  num_heads: int = 4
  window: int = 19
  embed_layers: int = 2
  stem_layers: int = 2
  levels: int = 6
  head_layers: int = 3
  prior_prob: float = 0.01

  def _pyramid(self, x, steps):
    for n in range(self.embed_layers):
      x = nn.relu(nn.LayerNorm(name=f'embed_norm{n}')(_masked_conv(x, steps, self.embed_dim, f'embed{n}')))
    for n in range(self.stem_layers):
      x = LocalBlock(self.num_heads, self.window, name=f'stem{n}')(x, steps)
    maps = [(x, steps)]
    for n in range(1, self.levels):
      x = nn.max_pool(x, (2,), strides=(2,), padding='SAME')
      steps = steps[:, ::2]
      x = LocalBlock(self.num_heads, self.window, name=f'branch{n}')(x * steps[..., None], steps)
      maps.append((x, steps))
    return [(nn.LayerNorm(name=f'fpn_norm{n}')(m) * s[..., None], s) for n, (m, s) in enumerate(maps)]

  @nn.compact
  def __call__(self, x, steps, train: bool = False):
    del train
    steps = steps.astype(jnp.float32)
    maps = self._pyramid(x.astype(jnp.float32), steps)
    cls_convs = [nn.Conv(self.embed_dim, (3,), padding='SAME', name=f'cls{n}') for n in range(self.head_layers - 1)]
    reg_convs = [nn.Conv(self.embed_dim, (3,), padding='SAME', name=f'reg{n}') for n in range(self.head_layers - 1)]
    cls_norms = [nn.LayerNorm(name=f'cls_norm{n}') for n in range(self.head_layers - 1)]
    reg_norms = [nn.LayerNorm(name=f'reg_norm{n}') for n in range(self.head_layers - 1)]
    bias = float(-np.log((1 - self.prior_prob) / self.prior_prob))
    cls_out = nn.Conv(self.num_classes, (3,), padding='SAME', name='cls_out',
                      bias_init=nn.initializers.constant(bias))
    reg_out = nn.Conv(2, (3,), padding='SAME', name='reg_out')
    logits, offsets, valid = [], [], []
    for level, (m, s) in enumerate(maps):
      c, r = m, m
      for conv, norm in zip(cls_convs, cls_norms, strict=True):
        c = nn.relu(norm(conv(c) * s[..., None]))
      for conv, norm in zip(reg_convs, reg_norms, strict=True):
        r = nn.relu(norm(conv(r) * s[..., None]))
      scale = self.param(f'scale{level}', nn.initializers.ones, ())
      logits.append(cls_out(c))
      offsets.append(nn.relu(scale * reg_out(r)))
      valid.append(s > 0)
    return {'logits': jnp.concatenate(logits, 1), 'offsets': jnp.concatenate(offsets, 1),
            'valid': jnp.concatenate(valid, 1)}
