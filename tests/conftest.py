"""Shared test set-up: CPU only, full-precision matmuls, repo paths."""
import os
import pathlib

os.environ.setdefault('JAX_PLATFORMS', 'cpu')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import jax  # noqa: E402

jax.config.update('jax_default_matmul_precision', 'highest')

REPO = pathlib.Path(__file__).resolve().parents[1]
SHARED = REPO.parent / 'shared'
FIXTURES = SHARED / 'fixtures'
