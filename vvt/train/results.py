"""Compatibility alias: the module is vvt.studies.results."""
from vvt.studies.results import *  # noqa: F401,F403  pylint: disable=wildcard-import,unused-wildcard-import
