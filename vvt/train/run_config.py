"""WORKDIR/config.json and the resume rules, now in `vvt.config.run_file` and `vvt.config.resume`: re-exported."""
from vvt.config.paths import flatten  # noqa: F401  pylint: disable=unused-import
from vvt.config.resume import (  # noqa: F401  pylint: disable=unused-import
    MAX_LISTED, SAFE_ON_RESUME, Change, check_resume, describe, differences, unsafe_changes)
from vvt.config.run_file import FILENAME, load_saved, path, write  # noqa: F401  pylint: disable=unused-import
