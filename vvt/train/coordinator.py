"""The port of jax.distributed's coordinator: checked before process 0 starts the coordinator on it, or picked free.

jax's coordination service (gRPC) listens on [::]:PORT of process 0's host with SO_REUSEPORT, so a second
coordinator on a port already in use starts without an error and the two share the incoming connections: the
processes of both jobs then fail in the C++ runtime, with a message that blames a lost coordinator. A plain bind
(SO_REUSEADDR, no SO_REUSEPORT) fails on such a port, so it tells a port in use before jax starts.

  check_port(run.distributed)      # process 0 given its coordinator's HOST:PORT: ConfigError naming the port
  free_port()                      # a port no process of this host listens on (the OS picks it)
"""
import socket

from vvt.config.errors import ConfigError

OPTION = '--config.distributed.coordinator_address=HOST:PORT'


def _bound(port: int) -> socket.socket:
  """A TCP socket bound to `port` on every address of this host (IPv6 and IPv4; IPv4 alone where IPv6 is off)."""
  try:
    sock, host = socket.socket(socket.AF_INET6, socket.SOCK_STREAM), '::'
  except OSError:
    sock, host = socket.socket(socket.AF_INET, socket.SOCK_STREAM), ''
  try:
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a port left in TIME_WAIT by a previous run is free
    sock.bind((host, port))
  except OSError:
    sock.close()
    raise
  return sock


def port_problem(port: int) -> str:
  """'' when a coordinator may listen on `port` of this host, else why not ('Address already in use')."""
  try:
    _bound(port).close()
  except OSError as e:
    return e.strerror or str(e)
  return ''


def free_port() -> int:
  """A port that no process of this host listens on, picked by the OS (it may be taken again before it is used:
  the window is the start of one process)."""
  with _bound(0) as sock:
    return sock.getsockname()[1]


def check_port(distributed) -> None:
  """Process 0 (`distributed.process_id` 0) given its coordinator's address (`distributed`: a run's
  DistributedSpec, vvt.config.run_spec): ConfigError naming the port and the option that sets it when the
  coordinator cannot listen there. Processes whose id comes from the environment are not checked (their
  coordinator's host is not known before jax.distributed starts)."""
  address = distributed.coordinator_address
  if distributed.process_id != 0 or not address:
    return
  field = f'distributed.coordinator_address={address}'
  port = address.rpartition(':')[2]
  if not port.isdigit() or not 0 < int(port) < 65536:
    raise ConfigError(f'{field}: not HOST:PORT (a port of 1..65535); set {OPTION}')
  problem = port_problem(int(port))
  if problem:
    raise ConfigError(f'{field}: process 0 cannot start the coordinator on port {port} of this host ({problem}, '
                      f'e.g. by another job\'s coordinator): give a free port with {OPTION}')
