"""ViViT Table 2 (Arnab et al. 2021, ICCV version): the model variants, ViViT-B with 16x2 tubelets: Model 1
(spatio-temporal attention), Model 2 (factorised encoder, L_t = 4), Model 3 (factorised self-attention), Model 4
(factorised dot-product) and Model 2's average-pooling baseline (L_t = 0), on Kinetics-400 (top-1: 80.0 / 78.8 /
77.4 / 76.3 / 75.8) and Epic Kitchens (action accuracy: 43.1 / 43.7 / 39.1 / 39.5 / 38.8).

  vvt sweep --config experiments/vivit_models.py:k400 --workdir runs/vivit_models_k400
  vvt sweep --config experiments/vivit_models.py:epic --workdir runs/vivit_models_epic
  vvt sweep --config experiments/vivit_models.py:mini --workdir runs/vivit_models_mini

Base: configs/kinetics400/vivit_b_fe.py (32 frames, ImageNet-21k, central-frame tubelets), or
configs/epic_kitchens/vivit_l_fe.py at ViViT-B/16x2 (verb + noun heads, all of Table 3's regularisers). The
paper starts its Epic models from the Kinetics models of the same table: export each K400 trial with
`vvt export --workdir runs/vivit_models_k400/model=NAME --output kinetics400/vivit_b_NAME.safetensors`. Models 3
and 4 have no class token and use `classifier='gap'`. `mini`: the same five on the synthetic data, 3 seeds.
"""
from configs.epic_kitchens import vivit_l_fe as epic
from configs.kinetics400 import vivit_b_fe
from experiments import common
from vvt.studies import sweep

SETTINGS = ('k400', 'epic')
MODELS = {
    'model1': {'model.attention': 'spatiotemporal'},
    'model2': {'model.attention': 'factorised_encoder'},
    'model3': {'model.attention': 'factorised_self_attention', 'model.classifier': 'gap'},
    'model4': {'model.attention': 'factorised_dot_product', 'model.classifier': 'gap'},
    'avgpool': {'model.attention': 'factorised_encoder', 'model.temporal_layers': 0},
}


def get_config(arg=None):
  a = common.parse(arg, SETTINGS)
  if common.is_mini(a):
    return common.miniature('factorised_encoder', a)
  if a['setting'] == 'k400':
    return vivit_b_fe.get_config()
  c = epic.get_config('views=ablation')  # Table 2: the paper's 4 views
  c.model.variant = 'B/16x2'
  return c


def get_sweep(arg=None):
  a = common.parse(arg, SETTINGS)
  models = dict(MODELS)
  if a['setting'] == 'epic':  # each from its Kinetics-400 model (Table 2's K400 column)
    models = {n: {**f, 'init_from.path': f'kinetics400/vivit_b_{n}.safetensors'} for n, f in models.items()}
  return common.with_seeds(sweep.variants('model', models), a)
