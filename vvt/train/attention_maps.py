"""Compatibility alias: the module is vvt.inspection.attention_maps."""
from vvt.inspection.attention_maps import *  # noqa: F401,F403  pylint: disable=wildcard-import,unused-wildcard-import
