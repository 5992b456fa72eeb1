"""The coordinator's port (`vvt.train.coordinator`): process 0 refuses a port in use on its host in one line naming it
and the option that sets it, a jax coordinator's port included (gRPC's SO_REUSEPORT lets a second coordinator start
there silently); a free port is one that passes the check. Two slices on adjacent ports:
tests/studies/test_slices.py."""
import socket

import pytest

from vvt.config.errors import ConfigError
from vvt.config.run_spec import DistributedSpec
from vvt.train import coordinator
from vvt.train import mesh as mesh_lib


def _spec(port, process_id=0, address='127.0.0.1'):
  return DistributedSpec(initialize=True, coordinator_address=f'{address}:{port}', num_processes=2,
                         process_id=process_id, heartbeat_timeout_seconds=100)


@pytest.fixture
def held():
  """A port that a process of this host listens on (127.0.0.1 only)."""
  with socket.socket() as sock:
    sock.bind(('127.0.0.1', 0))
    sock.listen()
    yield sock.getsockname()[1]


def _refused(call, port):
  with pytest.raises(ConfigError) as e:
    call()
  (line,) = e.value.problems
  assert f'distributed.coordinator_address=127.0.0.1:{port}: process 0 cannot start the coordinator on port {port}' \
         in line and 'Address already in use' in line, line
  assert line.endswith('give a free port with --config.distributed.coordinator_address=HOST:PORT'), line


def test_process_0_refuses_a_port_in_use_naming_it_and_the_option(held):
  _refused(lambda: coordinator.check_port(_spec(held)), held)


def test_vvt_train_checks_the_port_before_jax_distributed_starts(held):
  _refused(lambda: mesh_lib.maybe_initialize_distributed(_spec(held)), held)


def test_a_jax_coordinator_on_the_port_is_found_though_a_second_one_would_start_beside_it():
  from jax._src.lib import _jax
  port = coordinator.free_port()
  service = _jax.get_distributed_runtime_service(f'[::]:{port}', 1)
  try:
    _refused(lambda: coordinator.check_port(_spec(port)), port)
  finally:
    service.shutdown()
  coordinator.check_port(_spec(port))  # free again once that coordinator is gone


def test_only_process_0_given_an_address_is_checked(held):
  coordinator.check_port(_spec(held, process_id=1))   # connects to the coordinator: the port is meant to be in use
  coordinator.check_port(_spec(held, process_id=-1))  # its id (and coordinator) from the environment
  coordinator.check_port(DistributedSpec(True, '', -1, 0, 100))


def test_a_free_port_passes_the_check_and_a_port_that_is_not_a_number_is_named():
  port = coordinator.free_port()
  assert 0 < port < 65536 and coordinator.port_problem(port) == ''
  coordinator.check_port(_spec(port))
  with pytest.raises(ConfigError, match=r'distributed.coordinator_address=127.0.0.1:http: not HOST:PORT'):
    coordinator.check_port(_spec('http'))
