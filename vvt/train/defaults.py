"""The run-config schema, now in `vvt.config.schema` (and `vvt.config.run_file.from_dict`): re-exported here."""
from vvt.config.errors import ConfigError  # noqa: F401  pylint: disable=unused-import
from vvt.config.paths import plain  # noqa: F401  pylint: disable=unused-import
from vvt.config.run_file import from_dict  # noqa: F401  pylint: disable=unused-import
from vvt.config.schema import (  # noqa: F401  pylint: disable=unused-import
    SHARED_FIELDS, SYNTHETIC, SYNTHETIC_DIR, get_base_config, link_shared, make_config)
