"""`python -m vvt.cli COMMAND ...` = `vvt COMMAND ...`."""
import sys

from vvt.cli import console

sys.exit(console())
