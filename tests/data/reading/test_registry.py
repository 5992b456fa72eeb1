"""The sources by dataset.name: one table, read by the pipeline and the config validation, importable without
TensorFlow."""
import subprocess
import sys

from data_helpers import small_config
import pytest

from vvt.config import validation
from vvt.data import choices
from vvt.data.reading import registry
from vvt.data.reading import source


def test_every_name_is_a_source_class_that_keeps_the_protocol():
  assert tuple(registry.SOURCES) == ('dmvr', 'tfds', 'video_folder')
  for name in registry.SOURCES:
    cls = registry.source_class(name)
    for member in ('records', 'record', 'locate', 'parse'):
      assert callable(getattr(cls, member)), (name, member)
    assert isinstance(cls.frames, source.FrameReader), name


def test_the_choices_and_the_config_validation_read_the_registry():
  assert choices.SOURCES == tuple(registry.SOURCES)
  assert validation.CHOICES['dataset.name'] is choices.SOURCES
  assert not registry.reads_files('tfds') and registry.reads_files('video_folder') and registry.reads_files('dmvr')


def test_an_unknown_name_is_one_line_naming_the_choices():
  with pytest.raises(ValueError, match=r"dataset.name must be one of \('dmvr', 'tfds', 'video_folder'\), got 'hdf5'"):
    registry.make_source(small_config(name='hdf5'), 'train')


def test_the_registry_and_the_choices_import_without_tensorflow():
  code = ('import sys\nimport vvt.data.choices, vvt.data.reading.registry, vvt.data.reading.patterns\n'
          'import vvt.data.reading.names, vvt.data.reading.video_lists, vvt.data.reading.source\n'
          'print(sorted(m for m in ("tensorflow", "jax") if m in sys.modules))')
  proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0 and proc.stdout.strip() == '[]', proc.stdout + proc.stderr
