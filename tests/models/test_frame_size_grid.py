"""`vvt.models.frame_size` (an int S or a pair (H, W), resolved to (H, W)) and models on 48 x 40 frames: the patch
grid (6, 5) with every kind of position table, and the model's input check naming (H, W)."""
import jax
import numpy as np
import pytest

import vvt.models
from vvt.models import frame_size
from vvt.models import spec as model_spec


def test_sizes_read_written_and_named():
  assert frame_size.parse(32) == (32, 32) and frame_size.parse([48, 40]) == (48, 40)
  assert frame_size.config_value((32, 32)) == 32 and frame_size.config_value([48, 40]) == (48, 40)
  assert frame_size.label(224) == '224' and frame_size.label((48, 40)) == '48x40'
  assert [frame_size.from_text(t) for t in ('64', '48,40', '48x40', '(48, 40)', '40,40')] == [
      64, (48, 40), (48, 40), (48, 40), 40]
  for bad in (0, True, 2.0, (48,), (48, 40, 3), (48, 0), '48'):
    with pytest.raises(ValueError, match=r'^model.image_size must be a positive int \(square frames\) or a pair'):
      frame_size.parse(bad, 'model.image_size')
  with pytest.raises(ValueError, match=r"^--image-size must be .* got '48,'"):
    frame_size.from_text('48,')
  assert frame_size.indivisible((48, 41), (8, 8)) == ['image_size=(48, 41): W=41 is not divisible by the patch width 8']
  assert frame_size.indivisible(50, (16, 16)) == ['image_size=50 is not divisible by the tubelet (16, 16)']


@pytest.mark.parametrize('attention,embedding', [('spatiotemporal', 'joint'), ('divided', 'separable'),
                                                 ('spatiotemporal', 'sinusoidal'), ('spatiotemporal', 'rope')])
def test_a_48x40_model_has_a_6x5_grid(attention, embedding):
  cfg = vvt.models.resolve(vvt.models.get_config(
      'vivit' if attention == 'spatiotemporal' else 'timesformer', attention=attention, variant='Ti/8',
      num_frames=2, image_size=(48, 40), num_classes=3, hidden_size=24, num_layers=1, num_heads=2, mlp_dim=32,
      tubelet=(1, 8, 8), positional_embedding=embedding, classifier='gap' if embedding == 'rope' else 'token'))
  spec = model_spec.spec_of(cfg)
  assert (spec.image_size, spec.grid) == ((48, 40), (2, 6, 5))
  module = vvt.models.build(cfg)
  x = np.random.default_rng(0).standard_normal((1, 2, 48, 40, 3)).astype(np.float32)
  params = module.init(jax.random.key(0), x)['params']
  assert module.apply({'params': params}, x).shape == (1, 3)
  if embedding in ('joint', 'separable'):
    table = params['encoder']['posembed']['pos_embedding']
    assert table.shape[1] == {'joint': 1 + 2 * 6 * 5, 'separable': 1 + 6 * 5}[embedding]  # class token + grid
  with pytest.raises(AssertionError, match=r'\(B, 2, 48, 40, 3\) for model.num_frames=2, model.image_size=\(48, 40\)'):
    module.apply({'params': params}, x.transpose(0, 1, 3, 2, 4))
