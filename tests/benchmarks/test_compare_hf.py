"""benchmarks/compare_hf.py runs end to end (tiny sizes; no timing is asserted): both sides build the same
architecture (parameter counts equal), every field of the report is there, and the vvt side runs on a host
with JAX but neither TensorFlow nor ml_collections nor clu (a GPU image) through the ConfigDict stand-in."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / 'benchmarks' / 'compare_hf.py'
TINY = ['--layers', '1', '--image-size', '32', '--iters', '2', '--warmup', '0', '--rounds', '1',
        '--ceiling-size', '128', '--threads', '1']


def _run(*args, timeout=600):
  return subprocess.run([sys.executable, str(SCRIPT), *args], cwd=REPO, capture_output=True, text=True,
                        timeout=timeout)


def test_side_by_side_rows_report_both_sides_of_the_same_model(tmp_path):
  pytest.importorskip('torch')
  pytest.importorskip('transformers')
  out = tmp_path / 'rows.json'
  proc = _run(*TINY, '--rows', 'timesformer_divided/train|vivit_model1/forward', '--json', str(out))
  assert proc.returncode == 0, proc.stderr[-3000:]
  result = json.loads(out.read_text())
  assert [(r['row'], r['mode']) for r in result['rows']] == [('timesformer_divided', 'train'),
                                                            ('vivit_model1', 'forward')]
  assert result['ceiling']['flops_per_s'] > 0 and len(result['ceiling']['measured']) == 3  # start, each row's round
  for row in result['rows']:
    vvt, hf = row['vvt'], row['hf']
    assert row['params_equal'] and vvt['params'] == hf['params'] > 0, row
    assert len(vvt['times']) == len(hf['times']) == 2
    assert row['ratio_hf_over_vvt'] == pytest.approx(hf['median_s'] / vvt['median_s'])
    assert vvt['flops'] > 0 and vvt['first_step_s'] > 0 and hf['peak_mib'] > 0
  # the table names every row, both sides and the share of the ceiling
  assert 'timesformer_divided' in proc.stdout and 'vivit_model1' in proc.stdout and '%' in proc.stdout


def test_rows_that_match_nothing_exit_2_and_list_the_rows():
  proc = _run(*TINY, '--rows', 'no_such_row')
  assert proc.returncode == 2 and 'no row matches' in proc.stderr and 'vivit_model1' in proc.stderr


def test_vvt_side_runs_without_tensorflow_ml_collections_or_clu():
  """The child the parent starts for the vvt side, with those packages blocked in a fresh interpreter."""
  spec = dict(fields=dict(family='timesformer', attention='divided'), hf_model=None, hf_attention=None,
              mode='train', device='cpu', batch=1, layers=1, image_size=32, dtype='float32', precision='default',
              compile=False, iters=1, warmup=0, threads=1, count_flops=True)
  code = ("import runpy, sys\n"
          "for name in ('tensorflow', 'tensorboard', 'ml_collections', 'clu'):\n"
          "  sys.modules[name] = None\n"
          f"sys.argv = [{str(SCRIPT)!r}, '--child', 'vvt', '--spec', {json.dumps(spec)!r}]\n"
          "try:\n"
          "  runpy.run_path(sys.argv[0], run_name='__main__')\n"
          "except SystemExit as e:\n"
          "  assert not e.code, e.code\n"
          "loaded = {m.split('.')[0] for m, v in sys.modules.items() if v is not None}\n"
          "assert not loaded & {'tensorflow', 'tensorboard', 'clu'}, loaded\n"
          "assert getattr(sys.modules['ml_collections'], '__file__', None) is None  # the stand-in\n")
  proc = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True, timeout=600,
                        env={**os.environ, 'PYTHONPATH': str(REPO)})
  assert proc.returncode == 0, proc.stderr[-3000:]
  line = [l for l in proc.stdout.splitlines() if l.startswith('RESULT ')][-1]
  result = json.loads(line[len('RESULT '):])
  assert len(result['times']) == 1 and result['params'] > 0 and result['flops'] > 0
