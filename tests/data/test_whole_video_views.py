"""Whole-video evaluation (`dataset.num_test_clips='all'`): each video tiled with as many non-overlapping clips
as its length needs, batched like other views, every view once, averaged per video."""
import csv
import io
import os
import pathlib

from data_helpers import real_rows
from data_helpers import small_config
from data_helpers import solid_video
import numpy as np
import pytest

from tests import specs
from vvt.config import loader
from vvt.config.errors import ConfigError
from vvt.data import pipeline
from vvt.data.writing import dmvr_records
from vvt.tasks import eval_report
from vvt.tasks import multiview
from vvt.train import evaluate

LENGTHS = (3, 8, 9, 17, 1, 30)  # frames; a clip spans num_frames * stride = 2 * 2 = 4 of them
SPAN = 4
CONFIGS = pathlib.Path(__file__).parents[2] / 'configs'


@pytest.fixture(scope='module')
def uneven(tmp_path_factory):
  """Videos of the LENGTHS, in two files; video k has label k % 5."""
  d = tmp_path_factory.mktemp('uneven')
  files = []
  for f, ks in enumerate(((0, 1, 2), (3, 4, 5))):
    path = str(d / f'eval.tfrecord-{f:05d}-of-00002')
    dmvr_records.write_records(path, [dmvr_records.encode_sequence_example(
        solid_video(20 * (k % 5) + 10, LENGTHS[k]), k % 5, video_id=f'v{k}') for k in ks])
    files.append(path)
  return ','.join(files)


def _views(files, batch, hosts, crops):
  cfg = small_config(eval_files=files, num_frames=2, stride=2, num_test_clips='all', num_spatial_crops=crops)
  per_host, counts = [], []
  for p in range(hosts):
    it = pipeline.make_eval_iterator(cfg, 'test', global_batch_size=batch, process_index=p, process_count=hosts)
    per_host.append(list(it))
    assert len(per_host[-1]) == len(it)
    counts += it.view_counts.tolist()
  return per_host, counts


@pytest.mark.parametrize('batch,hosts,crops', [(4, 1, 1), (6, 2, 3)])
def test_each_video_gets_the_clips_that_cover_it_every_view_once(uneven, batch, hosts, crops):
  per_host, counts = _views(uneven, batch, hosts, crops)
  clips = [-(-n // SPAN) for n in LENGTHS]
  assert counts == [c * crops for c in clips]
  assert len({len(b) for b in per_host}) == 1  # every host yields as many batches
  agg = multiview.MultiViewAggregator({'': 5}, len(LENGTHS))
  seen = []
  for batches in per_host:
    for b in batches:
      real = real_rows(b, (batch // hosts, 2, 16, 16, 3))
      seen += list(zip(b['video_index'][real].tolist(), b['view_index'][real].tolist(), strict=True))
      clip = b['view_index'] // crops  # score of the true class = the view's clip: its average is (clips - 1) / 2
      scores = np.eye(5)[np.maximum(b['label'], 0)] * clip[:, None]
      agg.add({'': scores}, b['video_index'], b['mask'], {'': b['label']})
  assert sorted(seen) == [(k, v) for k, c in enumerate(clips) for v in range(c * crops)]
  res = agg.result()
  assert res['num_videos'] == len(LENGTHS) and res['num_views'] == sum(clips) * crops
  assert (res['views_per_video_min'], res['views_per_video_max']) == (crops, 8 * crops)
  np.testing.assert_array_equal(agg.counts, np.array(clips) * crops)
  labels = np.arange(len(LENGTHS)) % 5
  np.testing.assert_allclose(agg.video_scores()[''][np.arange(len(LENGTHS)), labels], (np.array(clips) - 1) / 2)


def test_tiles_start_a_span_apart_through_the_video(uneven):
  per_host, _ = _views(uneven, 64, 1, 1)
  b = per_host[0][0]
  rows = (b['video_index'] == 3) & (b['mask'] == 1)  # 17 frames of grey 70 + t: tiles at t = 0, 4, 8, 12, 16
  first = b['inputs'][rows][:, :, 0, 0, 0].astype(int) - 70
  np.testing.assert_allclose(first, [[0, 2], [4, 6], [8, 10], [12, 14], [16, 1]], atol=2)  # the last wraps


def test_the_report_and_protocol_name_the_views(uneven):
  text = eval_report.videos_csv(['a', 'b'], np.array([0, 1]), {'': (np.array([0, 1]), np.eye(2), ['x', 'y'])},
                                views=np.array([3, 12]))
  rows = list(csv.DictReader(io.StringIO(text)))
  assert [r['views'] for r in rows] == ['3', '12']
  config = loader.load(str(CONFIGS / 'howto100m/timesformer_b.py'), [], files=(), init=False)
  assert evaluate.protocol(specs.run_spec(config).data) == 'allx3'


def test_all_needs_stride_sampling_and_other_values_are_one_line():
  ssv2 = str(CONFIGS / 'ssv2/timesformer_b.py')
  with pytest.raises(ConfigError, match=r"^dataset.num_test_clips='all' .* needs dataset.sampling='stride'"):
    loader.load(ssv2, [('dataset.num_test_clips', 'all')], files=(), init=False)
  with pytest.raises(ConfigError, match=r"^dataset.num_test_clips must be a positive integer or 'all', got 'every'$"):
    loader.load(ssv2, [('dataset.num_test_clips', 'every')], files=(), init=False)
  assert os.path.exists(ssv2)


def test_predict_views_tile_the_video_too():
  from vvt.data.transforms import views
  cfg = small_config(num_frames=2, stride=2, num_test_clips='all', num_spatial_crops=3)
  np.testing.assert_array_equal(views.frame_indices(17, cfg), [[0, 2], [4, 6], [8, 10], [12, 14], [16, 1]])
  assert views.views_per_video(cfg) is None
  assert views.views_per_video(small_config(num_test_clips=2, num_spatial_crops=3)) == 6
  frames = np.zeros((10, 20, 20, 3), np.uint8)
  assert views.views_from_clips(frames, cfg).shape == (15, 2, 16, 16, 3)  # 5 clips x 3 crops
