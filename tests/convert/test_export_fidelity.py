"""`vvt export --format hf` of what a run holds, read back by transformers: a converted V-JEPA 2 (an empty predictor,
no missing keys, vvt's parameters plus its 3 D + 3), a multi-label run (`problem_type`), a probe run (the backbone
with the best linear probe as its classifier, or one line saying why not)."""
import json
import logging

import jax
import ml_collections
import numpy as np
import pytest

from tests.conftest import REPO
from tests.convert import hf_encoders as H
from tests.convert.test_hf_export import BASE
from tests.convert.test_hf_export import TINY
from tests.convert.test_hf_export import VIDEO
from tests.convert.test_hf_export import _hf_logits
from tests.convert.test_hf_export import _load
from tests.convert.test_hf_export import _random_params
from vvt.cli import main as vvt_main
from vvt.convert import weight_files
import vvt.models
from vvt.train import checkpoints

torch = pytest.importorskip('torch')
transformers = pytest.importorskip('transformers')

NAMES = ('archery', 'bowling', 'cooking', 'dancing', 'eating')


def test_a_converted_vjepa2_exports_without_a_random_predictor(tmp_path, capsys, caplog):
  """The source has a predictor (2 layers of 16); vvt keeps none: the export's is empty, so from_pretrained finds
  every tensor it builds and the model has vvt's parameters plus the empty predictor's 3 D + 3."""
  cfg = transformers.VJEPA2Config(hidden_size=48, num_hidden_layers=2, num_attention_heads=4, patch_size=16,
                                  crop_size=32, frames_per_clip=4, tubelet_size=2, num_pooler_layers=1, num_labels=5,
                                  pred_hidden_size=16, pred_num_hidden_layers=2, pred_num_attention_heads=2)
  source = H.save(H.randomise(transformers.VJEPA2ForVideoClassification(cfg), 3), tmp_path / 'hf')
  assert vvt_main(['convert', '--source', 'hf_vjepa2', '--checkpoint', str(source), '--config',
                   str(REPO / 'configs/kinetics400/timesformer_b.py'), '--output', str(tmp_path / 'vvt')]) == 0
  assert vvt_main(['export', '--workdir', str(tmp_path / 'vvt'), '--format', 'hf',
                   '--output', str(tmp_path / 'back')]) == 0
  capsys.readouterr()
  with caplog.at_level(logging.INFO):
    model, info = transformers.VJEPA2ForVideoClassification.from_pretrained(str(tmp_path / 'back'),
                                                                            output_loading_info=True)
  out = capsys.readouterr()
  assert not any(info.values()), info
  assert 'MISSING' not in out.out + out.err + caplog.text
  params, _ = checkpoints.load_params(str(tmp_path / 'vvt'))
  ours = sum(int(np.size(v)) for v in weight_files.flatten(params).values())
  predictor = sum(p.numel() for n, p in model.named_parameters() if '.predictor.' in n)
  assert predictor == 3 * 48 + 3
  assert sum(p.numel() for p in model.parameters()) == ours + predictor
  x = H.clip(1, 4, 32, seed=4)
  with torch.no_grad():
    theirs = model.eval()(H.torch_video(x)).logits.numpy()
  reference = torch.no_grad()(lambda: transformers.VJEPA2ForVideoClassification.from_pretrained(
      str(source)).eval()(H.torch_video(x)).logits.numpy())()
  assert H.max_diff(theirs, reference) < H.ATOL  # the classifier is the source's


def _run(folder, params, model_cfg, task: dict):
  """A run's checkpoint (step 3) with the run config fields the export reads."""
  config = dict(model=json.loads(ml_collections.ConfigDict(model_cfg).to_json_best_effort()), task=task,
                class_names=list(NAMES), eval=dict(split='test'))
  checkpoints.save_params(str(folder), params, step=3, config=config)
  return folder


def _model():
  cfg = vvt.models.get_config(**{**TINY, **BASE})
  return cfg, _random_params(cfg)


def test_a_multilabel_run_exports_its_problem_type(tmp_path):
  cfg, params = _model()
  run = _run(tmp_path / 'run', params, cfg, dict(name='multilabel'))
  assert vvt_main(['export', '--workdir', str(run), '--format', 'hf', '--output', str(tmp_path / 'hf')]) == 0
  model = _load(tmp_path / 'hf')
  assert model.config.problem_type == 'multi_label_classification'
  labels = torch.tensor([[1.0, 0, 1, 0, 0], [0, 1, 0, 0, 1]])
  with torch.no_grad():
    out = model(torch.from_numpy(VIDEO).permute(0, 1, 4, 2, 3), labels=labels)
  bce = torch.nn.functional.binary_cross_entropy_with_logits(out.logits, labels)
  assert float(out.loss) == pytest.approx(float(bce), rel=1e-6)  # independent classes: sigmoid, not softmax


def _probe_run(tmp_path, params, cfg, head='linear'):
  """A probe run (base multilabel) whose evaluation found probe_1 best: its params are the backbone's and each
  probe's linear head on the pooled features."""
  rng = np.random.default_rng(5)
  probes = {f'probe_{i}': {'output_projection': {
      'kernel': rng.standard_normal((TINY['hidden_size'], TINY['num_classes'])).astype(np.float32),
      'bias': rng.standard_normal(TINY['num_classes']).astype(np.float32)}} for i in range(2)}
  run = _run(tmp_path / 'probe_run', {**params, 'probes': probes}, cfg,
             dict(name='probe', probe=dict(base='multilabel', head=head)))
  (run / 'checkpoints' / 'eval_3_test.json').write_text(json.dumps({'step': 3, 'best_probe': 'probe_1'}))
  return run, probes


def test_a_probe_run_exports_the_backbone_with_its_best_linear_probe(tmp_path):
  cfg, params = _model()
  run, probes = _probe_run(tmp_path, params, cfg)
  assert vvt_main(['export', '--workdir', str(run), '--format', 'hf', '--output', str(tmp_path / 'hf')]) == 0
  model = _load(tmp_path / 'hf')
  assert model.config.problem_type == 'multi_label_classification'
  probed = {**params, 'head': probes['probe_1']}
  ours = np.asarray(jax.jit(vvt.models.build(cfg).apply)({'params': probed}, VIDEO))
  assert H.max_diff(ours, _hf_logits(model, VIDEO)) < H.ATOL
  other = np.asarray(jax.jit(vvt.models.build(cfg).apply)({'params': {**params, 'head': probes['probe_0']}}, VIDEO))
  assert H.max_diff(other, ours) > 0.1  # the best probe's head, not another's


def test_an_attentive_probe_is_refused_in_one_line(tmp_path, capsys):
  cfg, params = _model()
  run, _ = _probe_run(tmp_path, params, cfg, head='attentive')
  out = tmp_path / 'hf'
  assert vvt_main(['export', '--workdir', str(run), '--format', 'hf', '--output', str(out)]) == 2
  assert capsys.readouterr().err.strip() == (
      "vvt export: error: cannot export to Hugging Face: task.probe.head='attentive': each probe has its own "
      'attentive pooler over the tokens, which TimesformerForVideoClassification has no place for (a linear probe '
      'on the pooled features exports)')
  assert not out.exists()
