"""Compatibility alias: the module is vvt.inspection.attention_plots."""
from vvt.inspection.attention_plots import *  # noqa: F401,F403  pylint: disable=wildcard-import,unused-wildcard-import
