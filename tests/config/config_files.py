"""Shared by the config tests: the repository's config files they read, and `load` as the commands call it less
the checks of data files and of `init_from`."""
from tests.conftest import REPO
from vvt.config import loader

SYNTHETIC = str(REPO / 'configs/synthetic.py')
VIVIT_B = str(REPO / 'configs/kinetics400/vivit_b_fe.py')


def load(spec, *overrides, **kw):
  """`loader.load(spec, overrides)` with overrides written 'a.b=VALUE'; no files checked, no init (unless `kw`)."""
  kw.setdefault('files', ())
  kw.setdefault('init', False)
  return loader.load(spec, [tuple(o.split('=', 1)) for o in overrides], **kw)
