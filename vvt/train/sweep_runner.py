"""Compatibility alias: the module is vvt.studies.runner."""
from vvt.studies.runner import *  # noqa: F401,F403  pylint: disable=wildcard-import,unused-wildcard-import
