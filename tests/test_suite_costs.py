"""scripts/suite_costs.py: the suite's CPU seconds per test module, from a --cpu-durations report."""
import sys

from tests.conftest import REPO

sys.path.insert(0, str(REPO / 'scripts'))
import suite_costs  # noqa: E402


def test_costs_are_summed_per_module_from_the_cpu_report_only(tmp_path, capsys):
  log = ['....', '===== CPU time: 9.0 s in all; all =====',
         '    4.00s call     tests/x/test_a.py::test_one[p]',
         '    3.00s setup    tests/x/test_b.py::test_two',
         '    1.50s teardown tests/x/test_a.py::test_three',
         '    0.50s call     tests/x/test_b.py::TestC::test_four',
         '===== slowest 30 durations =====',
         '   99.00s call     tests/x/test_b.py::test_two']
  assert suite_costs.module_costs(log) == {'tests/x/test_a.py': 5.5, 'tests/x/test_b.py': 3.5}
  assert list(suite_costs.module_costs(log)) == ['tests/x/test_a.py', 'tests/x/test_b.py']  # costliest first
  (tmp_path / 'suite.log').write_text('\n'.join(log[:1]))
  assert suite_costs.main([str(tmp_path / 'suite.log')]) == 2  # no CPU report: said, not an empty table
  assert 'no --cpu-durations rows' in capsys.readouterr().err
