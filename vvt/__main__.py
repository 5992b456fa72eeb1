"""`python -m vvt COMMAND ...` = `vvt COMMAND ...`."""
import sys

from vvt.cli import main

sys.exit(main())
