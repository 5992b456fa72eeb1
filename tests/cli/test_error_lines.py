"""How `vvt COMMAND` reports an exception: one line that always says something, even for an exception raised
without a message."""
import pytest

from vvt.cli import common


def _raise(error):
  def body(argv):
    raise error
  return body


@pytest.mark.parametrize('error,expected,rc', [
    (KeyError(''), "vvt x: error: KeyError '' at tests/cli/test_error_lines.py:", 1),
    (RuntimeError(), 'vvt x: error: RuntimeError at tests/cli/test_error_lines.py:', 1),
    (ValueError('   '), "vvt x: error: ValueError '   ' at tests/cli/test_error_lines.py:", 1),
    (common.UsageError(), 'vvt x: error: UsageError at tests/cli/test_error_lines.py:', 2),
])
def test_an_exception_without_a_message_names_its_type_and_where_it_was_raised(error, expected, rc, capsys):
  assert common.run('vvt x', _raise(error), []) == rc
  err = capsys.readouterr().err
  assert err.count('\n') == 1 and err.startswith(expected), err
  assert 'test_error_lines.py:10 in body' in err


def test_a_message_is_printed_as_before(capsys):
  assert common.run('vvt x', _raise(KeyError('model.hidden_size')), []) == 1
  assert capsys.readouterr().err == 'vvt x: error: model.hidden_size\n'
  assert common.run('vvt x', _raise(RuntimeError('boom')), []) == 1
  assert capsys.readouterr().err == 'vvt x: error: RuntimeError: boom (--verbose shows the traceback)\n'
