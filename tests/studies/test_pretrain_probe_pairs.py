"""scripts/pretrain_probe_pairs.py: the pretrained / random pairs of probe sweeps, seed by seed, and their picture."""
from scripts import pretrain_probe_pairs

HEADER = 'trial,status,step,backbone,seed,video_top1\n'


def _sweep(folder, rows):
  folder.mkdir()
  lines = [f'"backbone={b},seed={s}",{status},500,{b},{s},{v}\n' for b, s, status, v in rows]
  (folder / 'results.csv').write_text(HEADER + ''.join(lines))
  return str(folder)


def test_pairs_by_seed_and_one_panel_per_sweep(tmp_path, capsys):
  a = _sweep(tmp_path / 'synthetic', [('mae', 1, 'finished', 0.9), ('random', 0, 'finished', 0.8),
                                      ('mae', 0, 'finished', 0.7), ('random', 1, 'finished', 0.95),
                                      ('mae', 2, 'failed', ''), ('random', 2, 'finished', 0.5)])
  b = _sweep(tmp_path / 'footage', [('jepa', 0, 'finished', 0.5), ('random', 0, 'finished', 0.25)])
  assert pretrain_probe_pairs.pairs(f'{a}/results.csv') == [(0, 0.7, 0.8), (1, 0.9, 0.95)]
  out = tmp_path / 'pairs.png'
  assert pretrain_probe_pairs.main([a, b, '--out', str(out)]) == 0
  assert capsys.readouterr().out.splitlines() == ['synthetic: 0: 0.700 / 0.800; 1: 0.900 / 0.950',
                                                  'footage: 0: 0.500 / 0.250']
  assert out.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_a_sweep_without_a_finished_pair_is_refused_before_writing(tmp_path, capsys):
  a = _sweep(tmp_path / 'half', [('mae', 0, 'finished', 0.9), ('random', 1, 'finished', 0.8)])
  out = tmp_path / 'pairs.png'
  assert pretrain_probe_pairs.main([a, '--out', str(out)]) == 2
  assert 'no seed with both backbones finished in half' in capsys.readouterr().err
  assert pretrain_probe_pairs.main([str(tmp_path / 'nothing'), '--out', str(out)]) == 2
  assert 'nothing/results.csv: no such file' in capsys.readouterr().err
  assert not out.exists()
