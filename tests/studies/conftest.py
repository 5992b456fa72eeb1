"""The studies tests' fixtures: a real one-node SLURM (started once per test process, stopped by its pids) and a
tiny synthetic dataset. Without SLURM installed the SLURM tests fail, saying how to install it: never skipped."""
import sys

import pytest

sys.path.insert(0, __file__.rsplit('/', 1)[0])
import slurm_cluster  # noqa: E402


@pytest.fixture(scope='session')
def slurm(tmp_path_factory):
  missing = slurm_cluster.missing_binaries()
  if missing:
    pytest.fail(f'the SLURM tests need SLURM and munge ({", ".join(missing)} not found): run '
                f'`{slurm_cluster.INSTALL}` as root (.ci/run does)', pytrace=False)
  cluster = slurm_cluster.SlurmCluster(str(tmp_path_factory.mktemp('slurm')))
  try:
    cluster.start()
  except slurm_cluster.SlurmError as e:
    cluster.stop()
    pytest.fail(str(e), pytrace=False)
  yield cluster
  cluster.stop()


@pytest.fixture(scope='session')
def tiny_data(tmp_path_factory):
  from vvt.data import synthetic  # pylint: disable=g-import-not-at-top
  out = tmp_path_factory.mktemp('tiny_synthetic')
  synthetic.write_synthetic(str(out), num_classes=4, train_clips=24, test_clips=8, num_frames=16,
                            frame_size=64, seed=1, train_shards=2, test_shards=1)
  return str(out)
