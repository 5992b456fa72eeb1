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


def test_the_replay_hands_a_module_to_a_worker_with_at_most_two_tests_left(tmp_path, capsys):
  modules = {'a.py': [4.0, 4.0], 'b.py': [3.0], 'c.py': [1.0]}
  # a to worker 0 and b to worker 1; worker 0 has 2 tests left, so it takes c too: 4 + 4 + 1, and 3
  assert suite_costs.replay(modules, ['a.py', 'b.py', 'c.py']) == [9.0, 3.0]
  # b, c first: worker 0 (one test left) takes a as well: 3 + 4 + 4, and 1
  assert suite_costs.replay(modules, ['b.py', 'c.py', 'a.py']) == [11.0, 1.0]
  log = tmp_path / 'suite.log'
  log.write_text('= CPU time: 12 s =\n   4.00s call     a.py::t1\n   4.00s call     a.py::t2\n'
                 '   3.00s call     b.py::t\n   1.00s call     c.py::t\n')
  assert suite_costs.main([str(log), '--replay']) == 0
  out = capsys.readouterr().out.splitlines()
  assert out == ['most tests first (xdist default): workers done at 9 s, 3 s; ideal 6 s',
                 'costliest first: workers done at 9 s, 3 s; ideal 6 s']
