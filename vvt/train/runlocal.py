"""`runlocal`, now in `vvt.config.runlocal`: re-exported here."""
from vvt.config.runlocal import apply  # noqa: F401  pylint: disable=unused-import
