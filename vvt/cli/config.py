"""The config loader, now in `vvt.config.loader` (and `vvt.config.overrides`): re-exported here."""
from vvt.config.errors import ConfigError  # noqa: F401  pylint: disable=unused-import
from vvt.config.loader import (  # noqa: F401  pylint: disable=unused-import
    ensure_synthetic, is_run_config, load, load_file)
from vvt.config.overrides import (  # noqa: F401  pylint: disable=unused-import
    apply_overrides, coerce, parse_value, set_field, split_argv)
