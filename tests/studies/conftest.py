"""The studies tests' fixture: a real one-node SLURM (started once per test process, stopped by its pids; the tiny
dataset is tests/conftest.py's). Without SLURM installed the SLURM tests fail, saying how to install it: never
skipped."""
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

