"""experiments/pretrain_probe.py's settings: fewer labels (the first training shards), the footage's direction
labels, per-frame tubelets and the mask ratio."""
import pytest

from experiments import pretrain_probe
from vvt import data


def test_fewer_labels_train_the_probe_on_the_first_shards_only():
  c = pretrain_probe.get_config('probe,pretrained=pre,shards=2')
  first = [f'data/synthetic/train-{i:05d}-of-00008.tfrecord' for i in range(2)]
  assert c.dataset.train_files.split(',') == first
  assert c.dataset.eval_files == pretrain_probe.get_config('probe,pretrained=pre').dataset.eval_files
  footage = pretrain_probe.get_config('probe,pretrained=pre,data=footage_direction,shards=1')
  assert footage.dataset.train_files == 'data/footage_direction/train.tfrecord-00000-of-00002'
  assert footage.dataset.eval_files == 'data/footage_direction/test.tfrecord@1'


def test_all_shards_by_default():
  assert pretrain_probe.get_config('pretrain').dataset.train_files == 'data/synthetic/train-*-of-*.tfrecord'
  assert pretrain_probe.get_config('pretrain,data=footage').dataset.train_files == 'data/footage/train.tfrecord@2'


def test_the_synthetic_shard_count_is_the_writers():
  import inspect
  default = inspect.signature(data.write_synthetic).parameters['train_shards'].default
  assert pretrain_probe.TRAIN_SHARDS['synthetic'] == default


@pytest.mark.parametrize('arg', ['shards=9', 'data=footage,shards=3', 'shards=-1'])
def test_more_shards_than_the_data_has_are_refused(arg):
  with pytest.raises(ValueError, match='training shards'):
    pretrain_probe.get_config(f'probe,pretrained=pre,{arg}')


def test_tubelets_and_mask_ratio_reach_both_stages():
  pre = pretrain_probe.get_config('pretrain,tubelet=1,mask_ratio=0.5')
  probe = pretrain_probe.get_config('probe,pretrained=pre,tubelet=1')
  assert tuple(pre.model.tubelet) == tuple(probe.model.tubelet) == (1, 8, 8)
  assert pre.task.mae.mask_ratio == 0.5
  assert tuple(pretrain_probe.get_config('pretrain').model.tubelet) == (2, 8, 8)


def test_depth_width_layer_and_masking_reach_the_stages_that_read_them():
  pre = pretrain_probe.get_config('pretrain,depth=6,width=96,masking=random')
  probe = pretrain_probe.get_config('probe,pretrained=pre,depth=6,width=96,layer=2')
  for c in (pre, probe):  # both stages (and so both arms) build the same backbone
    assert (c.model.num_layers, c.model.hidden_size, c.model.mlp_dim, c.model.num_heads) == (6, 96, 192, 4)
  assert pre.task.mae.masking == 'random' and tuple(probe.task.probe.layers) == (2,)
  assert tuple(pretrain_probe.get_config('probe,pretrained=pre,depth=6,layer=5').task.probe.layers) == ()
  assert pretrain_probe.get_config('pretrain').task.mae.masking == 'tube'
  assert pretrain_probe.get_config('probe,pretrained=pre,stride=1').dataset.stride == 1
  assert pretrain_probe.get_config('pretrain').dataset.stride == 2


@pytest.mark.parametrize('arg, message', [('depth=0', 'depth=0, width=64'), ('width=30', 'width=30'),
                                          ('layer=2', 'layer=2: the backbone has blocks 0..1'),
                                          ('masking=frames', "masking 'frames' is not one of tube, random"),
                                          ('stride=0', 'stride=0: frames are read at a stride >= 1')])
def test_a_backbone_or_masking_that_cannot_be_is_refused(arg, message):
  with pytest.raises(ValueError, match=message):
    pretrain_probe.get_config(f'pretrain,{arg}')
