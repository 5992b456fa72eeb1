"""VideoMAE pretraining weights in: `vvt convert --source hf_videomae` of a `VideoMAEForPreTraining` folder keeps
its decoder, and the mae model of the converted params gives transformers' reconstructions and loss (float32,
within 1e-5) for the same pixels and the same boolean tube mask (`bool_masked_pos`)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers

from tests.convert.hf_encoders import ATOL
from tests.convert.hf_encoders import clip
from tests.convert.hf_encoders import max_diff
from tests.convert.hf_encoders import randomise
from tests.convert.hf_encoders import save
from tests.convert.hf_encoders import torch_video
from vvt.convert import video
import vvt.models
from vvt.tasks import mae_model
from vvt.tasks import masks

IMAGENET_MEAN, IMAGENET_STD = np.array([0.485, 0.456, 0.406]), np.array([0.229, 0.224, 0.225])


@pytest.mark.parametrize('use_mean_pooling', [False, True])
def test_pretraining_weights_give_transformers_reconstructions_and_loss(tmp_path, use_mean_pooling):
  config = transformers.VideoMAEConfig(
      image_size=32, patch_size=8, num_channels=3, num_frames=4, tubelet_size=2, hidden_size=32, num_hidden_layers=2,
      num_attention_heads=2, intermediate_size=64, decoder_hidden_size=16, decoder_num_hidden_layers=1,
      decoder_num_attention_heads=2, decoder_intermediate_size=64, norm_pix_loss=True,
      use_mean_pooling=use_mean_pooling)
  torch.manual_seed(0)
  folder = save(randomise(transformers.VideoMAEForPreTraining(config), seed=3), tmp_path / 'hf')
  converted = video.convert('hf_videomae', str(folder))
  assert {'decoder', 'embedding', 'encoder'} <= set(converted.params)
  assert not [k for k in converted.report.unused if 'decoder' in k or 'mask_token' in k], converted.report.unused
  x = clip(2, 4, 32, seed=1)
  kept, masked = masks.tube_mask(jax.random.key(5), 2, (2, 4, 4), 0.75)
  flags = torch.from_numpy(np.array(masks.boolean(masked, 32)))
  with torch.no_grad():
    out = transformers.VideoMAEForPreTraining.from_pretrained(str(folder)).eval()(
        torch_video(x), bool_masked_pos=flags)
  module = mae_model.mae_model(vvt.models.build(converted.model_config()),
                               mae_model.DecoderSpec(depth=1, width=16, num_heads=2, patch_dim=2 * 8 * 8 * 3))
  params = converted.params
  pred = jax.jit(lambda v: module.apply({'params': params}, v, kept=kept, masked=masked))(x)
  assert max_diff(pred, out.logits.numpy()) < ATOL
  pixels = x * IMAGENET_STD + IMAGENET_MEAN  # transformers' targets: the un-normalised pixels
  target = jnp.take_along_axis(mae_model.normalised(mae_model.patches(jnp.asarray(pixels), (2, 8, 8))),
                               masked[..., None], axis=1)
  loss = float(jnp.mean(jnp.square(pred - target)))
  assert abs(loss - float(out.loss)) < ATOL * max(1.0, abs(loss))
