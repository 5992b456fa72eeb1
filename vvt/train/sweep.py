"""Compatibility alias: the module is vvt.studies.sweep."""
from vvt.studies.sweep import *  # noqa: F401,F403  pylint: disable=wildcard-import,unused-wildcard-import
