"""docs/weights.md's "From a Hugging Face folder: fine-tune, probe, features, export", run as written: the block
under its `<!-- newcomer-path -->` marker, with its placeholders made here (a random-init tiny V-JEPA 2 folder saved
with save_pretrained, 64x64 mp4 clips listed in CSVs with their classes.txt, a clip to predict) and each `vvt train`
shortened by the overrides the section documents (`num_train_steps`, `dataset.stride` for short clips) and small
batches. Every command succeeds; the features cover the split; the exported folder loads in transformers and gives
vvt's logits for a clip."""
import json
import re
import shlex

import jax
import numpy as np
import pytest

from tests.cli.test_video_folder import CLASSES
from tests.cli.test_video_folder import _write_clips as write_clips
from tests.conftest import REPO
from tests.convert import hf_encoders as H
from tests.convert.test_hf_encoders_cli import vjepa2_classifier
from vvt.cli import main as vvt_main
from vvt.config import loader
from vvt.inspection import features
import vvt.models
from vvt.train import checkpoints

transformers = pytest.importorskip('transformers')
torch = pytest.importorskip('torch')

PAGE = REPO / 'docs' / 'weights.md'
MARKER = '<!-- newcomer-path -->'
TINY = ['--config.num_train_steps=2', '--config.dataset.stride=2', '--config.batch_size=4',
        '--config.eval.batch_size=6']
LOGIT_ATOL = 1e-4  # float32 logits of the same weights in two frameworks (H.ATOL under highest precision)


def documented_commands() -> list[list[str]]:
  """The `vvt` commands of the bash block under the marker, continuation lines joined."""
  text = PAGE.read_text()
  block = re.search(re.escape(MARKER) + r'\n```bash\n(.*?)```', text, re.S).group(1)
  return [shlex.split(c) for c in block.replace('\\\n', ' ').splitlines() if c.strip()]


@pytest.fixture(scope='module')
def place(tmp_path_factory):
  """The placeholders: path/to/vjepa2_folder (4 classes, 8 frames of 32x32), videos/{train,test}.csv of 2 classes
  (as tests/cli/test_video_folder.py writes them) and videos/clip.mp4."""
  root = tmp_path_factory.mktemp('newcomer')
  H.save(vjepa2_classifier(), root / 'vjepa2')
  videos = root / 'videos'
  write_clips(str(videos), 'train', [0, 1] * 4, seed=0)
  write_clips(str(videos), 'test', [0, 1, 1, 0], seed=1)
  write_clips(str(videos), 'one', [1], seed=2)
  (videos / 'clips' / 'one_0.mp4').rename(videos / 'clip.mp4')
  (videos / 'classes.txt').write_text('\n'.join(CLASSES) + '\n')
  return root


def _args(command: list[str], root) -> list[str]:
  out = []
  for a in command[1:]:
    a = a.replace('path/to/vjepa2_folder', str(root / 'vjepa2'))
    out.append(re.sub(r'(^|=)(videos|runs)/', lambda m: m[1] + str(root / m[2]) + '/', a))
  return out + (TINY if command[1] == 'train' else [])


def _logits_agree(run, hf) -> tuple[float, float]:
  """(the largest |logit difference|, the largest |logit|) of the exported folder in transformers and the run's
  params in vvt on a clip."""
  model, info = transformers.VJEPA2ForVideoClassification.from_pretrained(str(hf), output_loading_info=True)
  # every tensor is in the folder: the predictor, which the classifier never runs, is written empty
  # (vvt.convert.hf_export)
  assert not any(info.values()), info
  config = loader.load(str(run / 'config.json'), [], files=(), init=False)
  assert model.config.id2label == dict(enumerate(config.class_names))
  x = H.clip(2, config.num_frames, config.image_size, seed=3)
  with torch.no_grad():
    theirs = model.eval()(pixel_values_videos=H.torch_video(x)).logits.numpy()
  params, _, _ = checkpoints.load_eval_params(str(run))
  ours = np.asarray(jax.jit(vvt.models.build(config.model).apply)({'params': params}, x))
  return H.max_diff(ours, theirs), float(np.abs(ours).max())


def test_the_documented_newcomer_path(place, capsys):
  commands = documented_commands()
  assert [c[:2] for c in commands] == [['vvt', 'train'], ['vvt', 'eval'], ['vvt', 'predict'], ['vvt', 'train'],
                                       ['vvt', 'features'], ['vvt', 'export']]
  ft, probe = place / 'runs' / 'ft', place / 'runs' / 'probe'

  # 1. fine-tune from the folder on the CSVs' classes
  assert vvt_main(_args(commands[0], place)) == 0, capsys.readouterr().err
  out = capsys.readouterr().out
  assert "[init] new classifier for the data's 2 classes (the checkpoint has 4 classes)" in out
  assert '[train] warning: schedule.decay_epochs=(11.0, 14.0): 11.0, 14.0 not before the end of the run' in out
  assert '[done] step 2' in out
  saved = json.loads((ft / 'config.json').read_text())
  assert (saved['model']['classifier'], saved['model']['positional_embedding']) == ('attentive', 'rope')
  assert saved['class_names'] == list(CLASSES) and saved['dataset']['name'] == 'video_folder'

  # 2. evaluate and predict with no overrides
  assert vvt_main(_args(commands[1], place)) == 0
  assert 'video_top1' in capsys.readouterr().out
  assert vvt_main(_args(commands[2], place)) == 0
  assert any(name in capsys.readouterr().out for name in CLASSES)

  # 4. features of the training split (the probe, 3., runs last: below)
  assert vvt_main(_args(commands[4], place)) == 0
  capsys.readouterr()
  embeddings, ids, labels = features.read(str(ft / 'features'))
  assert embeddings.shape == (8, saved['model']['hidden_size']) and np.isfinite(embeddings).all()
  assert len(set(ids)) == 8 and sorted(labels['label'].tolist()) == [0] * 4 + [1] * 4

  # 5. export: transformers loads the folder and gives vvt's logits
  assert vvt_main(_args(commands[5], place)) == 0
  assert 'VJEPA2ForVideoClassification' in capsys.readouterr().out
  diff, scale = _logits_agree(ft, ft / 'hf')
  with capsys.disabled():
    print(f'max |logit difference| vvt vs transformers: {diff:.2g} (max |logit| {scale:.2g})')
  assert diff < LOGIT_ATOL and diff < 1e-3 * scale  # the new head is small after 2 steps: relative to it too

  # 3. a probe on the folder's frozen encoder (`--init` sets task.probe.backbone)
  assert vvt_main(_args(commands[3], place)) == 0, capsys.readouterr().err
  assert '[done] step 2' in capsys.readouterr().out
  probe_config = json.loads((probe / 'config.json').read_text())
  assert probe_config['task']['name'] == 'probe' and probe_config['task']['probe']['backbone']
