"""A Hugging Face checkpoint's `config.json` `id2label` becomes the converted checkpoint's class names (in id
order, in the checkpoint meta and config.json) and `vvt predict` prints them. The HF folder is written here
with NumPy and safetensors (ViViT names, no torch or transformers needed)."""
import json

import numpy as np
import pytest
from safetensors.numpy import save_file

from tests.conftest import FIXTURES
from tests.conftest import REPO
from vvt.cli import convert as convert_cli
from vvt.cli import main as vvt_main
from vvt.train import checkpoints

FRAMES, SIZE, TUBELET, D, HEADS, MLP, LAYERS = 4, 16, (2, 8, 8), 16, 2, 32, 1
# Keys in neither id nor name order, as json.dump of a dict may write them.
ID2LABEL = {'3': 'zumba', '0': 'abseiling', '4': 'archery', '1': 'yoga', '2': 'bowling'}
NAMES = ['abseiling', 'yoga', 'bowling', 'zumba', 'archery']  # id order


@pytest.fixture(scope='module')
def config(tmp_path_factory):
  """A run config whose data exist (`vvt predict` checks them): a 5-class synthetic set of a few clips (its
  classes.txt: 'down', 'up', ...; the config's class_names: the first 4 of those)."""
  from vvt.data.writing import synthetic
  data = tmp_path_factory.mktemp('synthetic5')
  synthetic.write_synthetic(str(data), num_classes=5, train_clips=5, test_clips=5, num_frames=8, frame_size=24,
                            train_shards=1, test_shards=1)
  return f'{REPO / "configs/synthetic.py"}:spatiotemporal,data_dir={data}'


def hf_vivit_state(num_classes, seed=0):
  """(name -> float32 array) of a tiny VivitForVideoClassification (transformers < 5 names). The classifier
  ignores the video (zero weights) and its bias ranks class i at place num_classes - 1 - i, so the predicted
  order says which name belongs to which class id."""
  rng = np.random.default_rng(seed)
  rows = (FRAMES // TUBELET[0]) * (SIZE // TUBELET[1]) * (SIZE // TUBELET[2])
  s = {'vivit.embeddings.cls_token': rng.standard_normal((1, 1, D)),
       'vivit.embeddings.position_embeddings': rng.standard_normal((1, 1 + rows, D)),
       'vivit.embeddings.patch_embeddings.projection.weight': 0.1 * rng.standard_normal((D, 3, *TUBELET)),
       'vivit.embeddings.patch_embeddings.projection.bias': np.zeros(D)}
  def linear(name, out, inp):
    s[f'{name}.weight'] = rng.standard_normal((out, inp)) / np.sqrt(inp)
    s[f'{name}.bias'] = np.zeros(out)
  def norm(name):
    s[f'{name}.weight'], s[f'{name}.bias'] = np.ones(D), np.zeros(D)
  for i in range(LAYERS):
    e = f'vivit.encoder.layer.{i}'
    norm(f'{e}.layernorm_before')
    for part in ('query', 'key', 'value'):
      linear(f'{e}.attention.attention.{part}', D, D)
    linear(f'{e}.attention.output.dense', D, D)
    norm(f'{e}.layernorm_after')
    linear(f'{e}.intermediate.dense', MLP, D)
    linear(f'{e}.output.dense', D, MLP)
  norm('vivit.layernorm')
  s['classifier.weight'] = np.zeros((num_classes, D))
  s['classifier.bias'] = np.arange(num_classes, dtype=np.float64)[::-1].copy()
  return {k: np.asarray(v, np.float32) for k, v in s.items()}


def write_hf_folder(path, id2label, num_classes):
  """A Hugging Face model folder: model.safetensors + a config.json with `id2label`."""
  path.mkdir()
  save_file(hf_vivit_state(num_classes), str(path / 'model.safetensors'))
  config = dict(model_type='vivit', architectures=['VivitForVideoClassification'], num_frames=FRAMES,
                image_size=SIZE, tubelet_size=list(TUBELET), num_channels=3, hidden_size=D,
                num_hidden_layers=LAYERS, num_attention_heads=HEADS, intermediate_size=MLP,
                hidden_act='gelu_fast', layer_norm_eps=1e-6, qkv_bias=True, id2label=id2label,
                label2id={v: int(k) for k, v in id2label.items()})
  (path / 'config.json').write_text(json.dumps(config))
  return path


def test_hf_class_names_are_in_id_order():
  assert convert_cli.hf_class_names({'id2label': ID2LABEL}) == NAMES
  assert convert_cli.hf_class_names({'id2label': {0: 'a', 1: 'b'}}) == ['a', 'b']  # int keys (a dict in memory)
  for bad in ({'id2label': {'0': 'a', '2': 'c'}}, {'id2label': {'x': 'a'}}, {'id2label': None}, {}, None):
    assert convert_cli.hf_class_names(bad) is None, bad


def test_id2label_becomes_the_checkpoint_class_names_and_predict_prints_them(tmp_path, capsys, config):
  hf = write_hf_folder(tmp_path / 'hf_vivit', ID2LABEL, len(NAMES))
  out = tmp_path / 'converted'
  assert vvt_main(['convert', '--source', 'hf_vivit', '--checkpoint', str(hf), '--config', config,
                   '--output', str(out)]) == 0
  assert '5 classes (abseiling, yoga, bowling, ...)' in capsys.readouterr().out
  meta = checkpoints.read_meta(str(out), 0)['config']
  assert meta['class_names'] == NAMES and meta['num_classes'] == 5
  assert json.loads((out / 'config.json').read_text())['class_names'] == NAMES

  import cv2
  frames = tmp_path / 'frames'
  frames.mkdir()
  for i, f in enumerate(np.random.default_rng(0).integers(0, 255, (6, 24, 24, 3), np.uint8)):
    cv2.imwrite(str(frames / f'{i:04d}.png'), f)
  assert vvt_main(['predict', '--checkpoint', str(out), '--json', '--top_k', '5', str(frames)]) == 0
  top = json.loads(capsys.readouterr().out)['predictions'][0]['top']
  assert [(t['class'], t['name']) for t in top] == list(enumerate(NAMES))  # bias ranks class 0 first
  assert vvt_main(['predict', '--checkpoint', str(out), '--top_k', '2', str(frames)]) == 0
  assert capsys.readouterr().out.strip().endswith(': abseiling 0.636, yoga 0.234')  # softmax of 4, 3, ...


def test_id2label_of_another_number_of_classes_is_dropped(tmp_path, config):
  """Names that do not fit the converted head are not recorded (nor do the config's 4 synthetic names fit its
  5 classes: none are, and the dataset's classes.txt names them when predicting)."""
  hf = write_hf_folder(tmp_path / 'hf_vivit', {'0': 'a', '1': 'b'}, len(NAMES))
  out = tmp_path / 'converted'
  assert vvt_main(['convert', '--source', 'hf_vivit', '--checkpoint', str(hf), '--config', config,
                   '--output', str(out)]) == 0
  assert checkpoints.read_meta(str(out), 0)['config']['class_names'] is None


def test_hf_timesformer_id2label(tmp_path):
  """The same for hf_timesformer (the shared HF TimeSformer fixture, its config's id2label replaced)."""
  npz = FIXTURES / 'hf_timesformer_divided.npz'
  if not npz.exists():
    pytest.skip(f'fixture {npz} is missing')
  hf_config = json.loads((FIXTURES / 'hf_timesformer_divided.json').read_text())['config']['hf_config']
  names = [f'class {9 - i}' for i in range(10)]
  hf_config['id2label'] = {str(i): names[i] for i in (3, 1, 0, 2, 9, 8, 7, 6, 5, 4)}
  (tmp_path / 'config.json').write_text(json.dumps(hf_config))
  out = tmp_path / 'converted'
  assert vvt_main(['convert', '--source', 'hf_timesformer', '--checkpoint', str(npz), '--hf-config',
                   str(tmp_path / 'config.json'), '--config', str(REPO / 'configs/kinetics400/timesformer_b.py'),
                   '--output', str(out)]) == 0
  assert checkpoints.read_meta(str(out), 0)['config']['class_names'] == names


def test_placeholder_labels_are_no_names():
  """transformers writes id2label {i: 'LABEL_i'} when a model has no label names: those are not class names
  (the dataset's own then name the classes)."""
  assert convert_cli.hf_class_names({'id2label': {str(i): f'LABEL_{i}' for i in range(10)}}) is None
  assert convert_cli.hf_class_names({'id2label': {'0': 'LABEL_0', '1': 'cat'}}) == ['LABEL_0', 'cat']
