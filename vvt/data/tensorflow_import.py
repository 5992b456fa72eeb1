"""TensorFlow imported without Keras: what the data pipeline needs (tf.data, tf.io, tf.image) and no more.

`import tensorflow` also imports Keras 3 (`keras.src.optimizers`, for the SavedModel registry; about half the
import's time), unless `TF_USE_LEGACY_KERAS` is set and `tf_keras` is not installed: then TensorFlow's attempt
to import `tf_keras` fails and it goes on (tensorflow/__init__.py, "Do an eager load for Keras' code"). Nothing in
vvt uses Keras or a SavedModel. `keras_left_unloaded` sets the variable around TensorFlow's first import only
(not when the user set it, or installed `tf_keras`) and restores the environment after it, so `tf.keras`
still loads Keras 3 when asked for; it then drops the `None` that TensorFlow put in its packages' `__path__`
for the absent `tf_keras`.
"""
import contextlib
import importlib.util
import os
import sys

_VARIABLE = 'TF_USE_LEGACY_KERAS'


def _drop_absent_paths() -> None:
  """Removes the `None` entries (the absent `tf_keras`) from the `__path__` of TensorFlow's packages."""
  for name, module in list(sys.modules.items()):
    path = getattr(module, '__path__', None)
    if name.startswith('tensorflow') and isinstance(path, list) and None in path:
      path[:] = [p for p in path if p is not None]


@contextlib.contextmanager
def keras_left_unloaded():
  """Inside: a first `import tensorflow` loads no Keras. Does nothing once TensorFlow is imported."""
  skip = 'tensorflow' in sys.modules or _VARIABLE in os.environ or importlib.util.find_spec('tf_keras') is not None
  if not skip:
    os.environ[_VARIABLE] = '1'
  try:
    yield
  finally:
    if not skip:
      del os.environ[_VARIABLE]
      if 'tensorflow' in sys.modules:
        _drop_absent_paths()
