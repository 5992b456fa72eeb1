"""PyTorch layouts <-> vvt's flax layouts, both ways, bit for bit inverse.

Layouts: torch Linear weight (out, in), y = x W^T + b  ->  flax Dense kernel (in, out) = W^T.
A fused torch qkv Linear(D, 3D) holds rows [q | k | v]; head h owns features [h*d_h, (h+1)*d_h) of each,
so the flax query kernel (D, H, d_h) is W[0:D].T.reshape(D, H, d_h) (same for k, v), and the output
projection Linear(D, D) becomes out kernel (H, d_h, D) = W.T.reshape(H, d_h, D).
The `torch_*` helpers read these layouts into a `conversion.Writer`; `TorchState` writes vvt params back in them
(Hugging Face export), refusing with `NotExpressible` what the target cannot hold. `gelu_approximate_of` /
`hf_activation`: Hugging Face's `hidden_act` names both ways.
"""
from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from vvt.convert import conversion
from vvt.convert import weight_files
from vvt.convert.weight_files import WeightFileError


def torch_layer_norm(w: conversion.Writer, name: str, key: str):
  """torch LayerNorm weight/bias -> flax scale/bias."""
  w.copy(f'{name}/scale', f'{key}.weight')
  w.copy(f'{name}/bias', f'{key}.bias')


def torch_dense(w: conversion.Writer, name: str, key: str, bias: bool = True):
  """torch Linear (out, in) -> flax Dense kernel (in, out)."""
  w.put(f'{name}/kernel', w.src.matrix(f'{key}.weight').T, f'{key}.weight', 'transpose (out,in)->(in,out)')
  if bias:
    w.copy(f'{name}/bias', f'{key}.bias')


def torch_qkv(w: conversion.Writer, name: str, key: str, num_heads: int):
  """Fused torch qkv Linear(D, 3D) with rows [q | k | v] -> flax query/key/value (D, H, d_h) + (H, d_h)."""
  weight = w.src.matrix(f'{key}.weight')
  three_d, d = weight.shape
  if three_d != 3 * d:
    raise WeightFileError(f'{w.src.origin}: {key}.weight has shape {weight.shape}; a fused qkv needs (3*D, D)')
  if d % num_heads:
    raise WeightFileError(f'{w.src.origin}: {key}: hidden size {d} is not divisible by num_heads={num_heads}')
  hd = d // num_heads
  bias = w.src.get(f'{key}.bias')
  for i, part in enumerate(('query', 'key', 'value')):
    w.put(f'{name}/{part}/kernel', weight[i * d:(i + 1) * d].T.reshape(d, num_heads, hd), f'{key}.weight',
          f'rows [{i}D:{i + 1}D] ({part}) transposed, split into {num_heads} heads')
    if bias is not None:
      w.put(f'{name}/{part}/bias', bias[i * d:(i + 1) * d].reshape(num_heads, hd), f'{key}.bias',
            f'[{i}D:{i + 1}D] ({part}) split into heads')
  return bias is not None


def torch_separate_qkv(w: conversion.Writer, name: str, keys: tuple[str, str, str], num_heads: int):
  """Separate torch q/k/v Linear(D, D) -> flax query/key/value (D, H, d_h) + (H, d_h)."""
  has_bias = True
  for part, key in zip(('query', 'key', 'value'), keys, strict=True):
    weight = w.src.matrix(f'{key}.weight')
    d_out, d = weight.shape
    if d_out % num_heads:
      raise WeightFileError(f'{w.src.origin}: {key}: {d_out} features are not divisible by num_heads={num_heads}')
    w.put(f'{name}/{part}/kernel', weight.T.reshape(d, num_heads, d_out // num_heads), f'{key}.weight',
          'transposed, split into heads')
    bias = w.src.get(f'{key}.bias')
    if bias is not None:
      w.put(f'{name}/{part}/bias', bias.reshape(num_heads, d_out // num_heads), f'{key}.bias', 'split into heads')
    else:
      has_bias = False
  return has_bias


def torch_attention_out(w: conversion.Writer, name: str, key: str, num_heads: int):
  """torch output projection Linear(D, D) -> flax out kernel (H, d_h, D) + bias (D,)."""
  weight = w.src.matrix(f'{key}.weight')
  d, d_in = weight.shape
  if d_in % num_heads:
    raise WeightFileError(f'{w.src.origin}: {key}: {d_in} features are not divisible by num_heads={num_heads}')
  w.put(f'{name}/kernel', weight.T.reshape(num_heads, d_in // num_heads, d), f'{key}.weight',
        'transposed, split into heads')
  w.copy(f'{name}/bias', f'{key}.bias')


def torch_vit_block(w: conversion.Writer, name: str, key: str, num_heads: int, *, norm: str, attention: str) -> bool:
  """A timm-layout pre-LN block `key.{norm1, attn.qkv, attn.proj, norm2, mlp.fc1, mlp.fc2}` into the vvt block
  `name` (its attention LayerNorm and MSA named `norm` and `attention`). Returns whether the qkv has a bias."""
  torch_layer_norm(w, f'{name}/{norm}', f'{key}.norm1')
  has_bias = torch_qkv(w, f'{name}/{attention}', f'{key}.attn.qkv', num_heads)
  torch_attention_out(w, f'{name}/{attention}/out', f'{key}.attn.proj', num_heads)
  torch_layer_norm(w, f'{name}/mlp_norm', f'{key}.norm2')
  torch_dense(w, f'{name}/mlp/Dense_0', f'{key}.mlp.fc1')
  torch_dense(w, f'{name}/mlp/Dense_1', f'{key}.mlp.fc2')
  return has_bias


# Sub-names of a transformers pre-LN block with separate q/k/v Linears: the names save_pretrained wrote before the
# attention refactor (BERT style), and those it writes now.
HF_OLD = dict(norm1='layernorm_before', q='attention.attention.query', k='attention.attention.key',
              v='attention.attention.value', o='attention.output.dense', norm2='layernorm_after',
              fc1='intermediate.dense', fc2='output.dense')
HF_NEW = dict(HF_OLD, q='attention.q_proj', k='attention.k_proj', v='attention.v_proj', o='attention.o_proj',
              fc1='mlp.fc1', fc2='mlp.fc2')


def torch_separate_block(w: conversion.Writer, name: str, key: str, num_heads: int, names: Mapping[str, str], *,
                         norm: str = 'joint_norm', attention: str = 'joint_attention') -> bool:
  """A pre-LN block with separate q/k/v Linears, torch `key.{names[norm1, q, k, v, o, norm2, fc1, fc2]}`, into the
  vvt block `name` (its attention LayerNorm and MSA named `norm` and `attention`). Returns whether q/k/v have
  biases."""
  torch_layer_norm(w, f'{name}/{norm}', f'{key}.{names["norm1"]}')
  has_bias = torch_separate_qkv(w, f'{name}/{attention}', tuple(f'{key}.{names[x]}' for x in 'qkv'), num_heads)
  torch_attention_out(w, f'{name}/{attention}/out', f'{key}.{names["o"]}', num_heads)
  torch_layer_norm(w, f'{name}/mlp_norm', f'{key}.{names["norm2"]}')
  torch_dense(w, f'{name}/mlp/Dense_0', f'{key}.{names["fc1"]}')
  torch_dense(w, f'{name}/mlp/Dense_1', f'{key}.{names["fc2"]}')
  return has_bias


def torch_patch_embedding(w: conversion.Writer, name: str, key: str):
  """torch Conv2d (D, C, p, p) -> vvt tubelet kernel (1, p, p, C, D); Conv3d (D, C, t, h, w) -> (t, h, w, C, D)."""
  weight = w.src.take(f'{key}.weight')
  if weight.ndim == 4:
    w.put(f'{name}/kernel', weight.transpose(2, 3, 1, 0)[None], f'{key}.weight',
          'Conv2d (D,C,h,w) -> (1,h,w,C,D)')
  elif weight.ndim == 5:
    w.put(f'{name}/kernel', weight.transpose(2, 3, 4, 1, 0), f'{key}.weight', 'Conv3d (D,C,t,h,w) -> (t,h,w,C,D)')
  else:
    raise WeightFileError(f'{w.src.origin}: {key}.weight has shape {weight.shape}; expected a Conv2d or Conv3d '
                          'kernel')
  w.copy(f'{name}/bias', f'{key}.bias')
  return weight


def torch_conv3d_tokeniser(w: conversion.Writer, name: str, key: str, model: str) -> np.ndarray:
  """`torch_patch_embedding` of `model`'s Conv3d tokeniser: its kernel (D, C, t, h, w); WeightFileError naming the
  file where it is not 5-D."""
  kernel = torch_patch_embedding(w, name, key)
  if kernel.ndim != 5:
    raise WeightFileError(f'{w.src.origin}: {key}.weight has shape {kernel.shape}; {model} tokenises with a Conv3d '
                          '(D, C, t, h, w)')
  return kernel


def check_kernel(kernel: np.ndarray, checks, layout: str = '') -> None:
  """ValueError naming hf_config.FIELD where a `checks` entry (FIELD, the config's value, the kernel's) disagrees;
  `layout`: the kernel's axes in the config's words."""
  for field, want, got in checks:
    if want != got:
      raise ValueError(f'hf_config.{field}={want} but the patch embedding kernel has shape {kernel.shape}'
                       + (f' ({layout})' if layout else ''))


def gelu_approximate_of(hidden_act: str) -> bool:
  """Hugging Face `hidden_act` -> vvt gelu_approximate (exact erf GELU or the tanh formula)."""
  if hidden_act in ('gelu', 'gelu_python'):  # gelu_python: the erf formula written out (VideoPrism)
    return False
  if hidden_act in ('gelu_fast', 'gelu_new', 'gelu_pytorch_tanh'):
    return True
  raise ValueError(f"hidden_act={hidden_act!r} is not a GELU vvt supports (use 'gelu' for exact, "
                   "'gelu_fast'/'gelu_new'/'gelu_pytorch_tanh' for the tanh approximation)")


class NotExpressible(ValueError):
  """A vvt model, or a value of one of its fields, that the target format cannot express: one line naming the
  field (or scheme) and its value."""


class TorchState:
  """Builds a PyTorch-layout state dict {name: float32 array} from vvt params: the inverse of the torch_* helpers
  above (so a file read by them and written back by these is bit-identical). Every vvt parameter is taken once;
  `result()` refuses params left over (a part of the vvt model the target has no place for)."""

  def __init__(self, params, target: str):
    self.flat = {k: np.asarray(v, np.float32) for k, v in weight_files.flatten(params).items()}
    self.target = target
    self.used: set[str] = set()
    self.state: dict[str, np.ndarray] = {}

  def take(self, name: str) -> np.ndarray:
    if name not in self.flat:
      raise KeyError(f'vvt parameter {name} is missing (the params do not fit the model config)')
    self.used.add(name)
    return self.flat[name]

  def drop(self, name: str) -> None:
    """A vvt parameter the target does without (the caller says why that changes nothing)."""
    self.take(name)

  def put(self, key: str, value: np.ndarray) -> None:
    if key in self.state:
      raise ValueError(f'internal error: {key} written twice')
    self.state[key] = np.ascontiguousarray(value, np.float32)

  def copy(self, key: str, name: str) -> None:
    self.put(key, self.take(name))

  def layer_norm(self, key: str, name: str) -> None:
    """flax LayerNorm scale/bias -> torch weight/bias."""
    self.copy(f'{key}.weight', f'{name}/scale')
    self.copy(f'{key}.bias', f'{name}/bias')

  def dense(self, key: str, name: str) -> None:
    """flax Dense kernel (in, out) -> torch Linear weight (out, in), and the bias."""
    self.put(f'{key}.weight', self.take(f'{name}/kernel').T)
    self.copy(f'{key}.bias', f'{name}/bias')

  def projection(self, name: str, part: str, bias: bool | None) -> tuple[np.ndarray, np.ndarray | None]:
    """flax query/key/value (D, H, d_h) [+ (H, d_h)] -> torch (H*d_h, D) weight and (H*d_h,) bias. bias: True
    takes the bias, False gives zeros where vvt has none (a key bias that is zero changes nothing), None: none."""
    kernel = self.take(f'{name}/{part}/kernel')
    d = kernel.shape[0]
    weight = kernel.reshape(d, -1).T
    if bias is None:
      return weight, None
    return weight, (self.take(f'{name}/{part}/bias').reshape(-1) if bias else np.zeros(weight.shape[0], np.float32))

  def fused_qkv(self, key: str, name: str, biases: tuple) -> None:
    """flax query/key/value -> one torch qkv Linear(D, 3D), rows [q | k | v]."""
    parts = [self.projection(name, part, b) for part, b in zip(('query', 'key', 'value'), biases, strict=True)]
    self.put(f'{key}.weight', np.concatenate([w for w, _ in parts]))
    if parts[0][1] is not None:
      self.put(f'{key}.bias', np.concatenate([b for _, b in parts]))

  def attention_out(self, key: str, name: str) -> None:
    """flax out kernel (H, d_h, D) + bias -> torch Linear(D, D)."""
    kernel = self.take(f'{name}/kernel')
    self.put(f'{key}.weight', kernel.reshape(-1, kernel.shape[-1]).T)
    self.copy(f'{key}.bias', f'{name}/bias')

  def separate_block(self, key: str, name: str, names: Mapping[str, str], biases: tuple) -> None:
    """The inverse of `torch_separate_block` (vvt names joint_norm, joint_attention): biases, one per q/k/v, as
    `projection` takes them."""
    self.layer_norm(f'{key}.{names["norm1"]}', f'{name}/joint_norm')
    for part, bias in zip(('query', 'key', 'value'), biases, strict=True):
      weight, b = self.projection(f'{name}/joint_attention', part, bias)
      self.put(f'{key}.{names[part[0]]}.weight', weight)
      if b is not None:
        self.put(f'{key}.{names[part[0]]}.bias', b)
    self.attention_out(f'{key}.{names["o"]}', f'{name}/joint_attention/out')
    self.layer_norm(f'{key}.{names["norm2"]}', f'{name}/mlp_norm')
    self.dense(f'{key}.{names["fc1"]}', f'{name}/mlp/Dense_0')
    self.dense(f'{key}.{names["fc2"]}', f'{name}/mlp/Dense_1')

  def patch_embedding(self, key: str, name: str, conv2d: bool = False) -> None:
    """vvt tubelet kernel (t, h, w, C, D) -> torch Conv3d (D, C, t, h, w); conv2d (t = 1): Conv2d (D, C, h, w)."""
    kernel = self.take(f'{name}/kernel')
    self.put(f'{key}.weight', kernel[0].transpose(3, 2, 0, 1) if conv2d else kernel.transpose(4, 3, 0, 1, 2))
    self.copy(f'{key}.bias', f'{name}/bias')

  def result(self) -> dict[str, np.ndarray]:
    left = sorted(set(self.flat) - self.used)
    if left:
      more = f' and {len(left) - 3} more' if len(left) > 3 else ''
      raise NotExpressible(f'{self.target} has no place for the vvt parameters {", ".join(left[:3])}{more}')
    return self.state


def hf_activation(gelu_approximate: bool, tanh_name: str = 'gelu_new') -> str:
  """vvt gelu_approximate -> Hugging Face hidden_act: 'gelu' (exact erf) or a name of the tanh formula."""
  return tanh_name if gelu_approximate else 'gelu'


def require(model_cfg, field: str, allowed, target: str, why: str = '') -> None:
  """NotExpressible naming `model.field` and its value unless the value is one of `allowed` (a value or a tuple)."""
  allowed = allowed if isinstance(allowed, tuple) else (allowed,)
  value = model_cfg[field]
  if value not in allowed:
    need = ' or '.join(repr(a) for a in allowed)
    raise NotExpressible(f'model.{field}={value!r}: {target} needs {need}' + (f' ({why})' if why else ''))


def hf_image_size(model_cfg, target: str, pair_ok: bool):
  """The model's frame size as a transformers config writes it: an int (square), or [H, W] where the class takes a
  pair (`pair_ok`); NotExpressible naming model.image_size otherwise."""
  from vvt.models import frame_size
  h, w = frame_size.parse(model_cfg['image_size'])
  if h == w:
    return int(h)
  if not pair_ok:
    raise NotExpressible(f'model.image_size={(h, w)}: {target} needs square frames (an int image_size)')
  return [int(h), int(w)]
