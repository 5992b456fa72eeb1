"""Validation of a run config, now in `vvt.config.validation`: re-exported here."""
from vvt.config.errors import ConfigError  # noqa: F401  pylint: disable=unused-import
from vvt.config.validation import (  # noqa: F401  pylint: disable=unused-import
    CHOICES, RANGES, missing_files, validate)
from vvt.config.validation import schema_config as schema  # noqa: F401  pylint: disable=unused-import
