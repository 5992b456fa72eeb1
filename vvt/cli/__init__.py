"""The `vvt` console command: one entry point, one sub-command per task, one config syntax.

Every command that takes a config reads it through `vvt.config.loader` (`--config FILE[:ARG]` or a run's
config.json, then `--config.a.b=VALUE`), reports a bad config or argument as one line naming the field or
file (exit 2; other errors exit 1), keeps library logs quiet unless `--verbose` (which also shows
tracebacks), and imports its heavy libraries lazily, so `vvt summary` does not pay for TensorFlow.
Layering: vvt.models <- vvt.data <- vvt.convert <- vvt.config <- vvt.train <- {vvt.inspection, vvt.studies} <- vvt.cli.
"""
import importlib
import os
import sys

from vvt.cli import native_stderr

# sub-command -> (module, function taking argv without the sub-command, help)
COMMANDS = {
    'train': ('vvt.cli.train', 'train_main', 'train from a config file (resumes a workdir)'),
    'eval': ('vvt.cli.train', 'eval_main', 'multi-view evaluation of a checkpoint'),
    'predict': ('vvt.cli.predict', 'main', 'classify video files / frame folders with a checkpoint'),
    'features': ('vvt.cli.features', 'main', 'per-video embeddings of a split, written in shards (.npz, safetensors)'),
    'attention': ('vvt.cli.attention', 'main', 'attention maps of a checkpoint on one video (PNG grid, GIF)'),
    'summary': ('vvt.cli.summary', 'main', 'params, GFLOPs and tokens of a config\'s model'),
    'memory': ('vvt.cli.memory', 'main', 'per-device memory and FLOPs of a step on a TPU topology'),
    'data': ('vvt.cli.data', 'main', 'write datasets: convert videos, synthetic motion data'),
    'convert': ('vvt.cli.convert', 'main', 'convert official / Hugging Face checkpoints to vvt'),
    'export': ('vvt.cli.convert', 'export_main', 'vvt checkpoint -> safetensors (and back) or a Hugging Face folder'),
    'demo': ('vvt.cli.demo', 'main', 'synthetic data -> small model -> multi-view evaluation'),
    'sweep': ('vvt.cli.sweep', 'main', 'run a study\'s trials (experiments/FILE.py), then its results'),
    'results': ('vvt.cli.results', 'main', 'results table and plot of a sweep directory'),
    'localize': ('vvt.cli.localize', 'main', 'temporal action localisation on feature sequences (ActionFormer, mAP)'),
}


def _usage():
  lines = ['usage: vvt COMMAND [--config FILE[:ARG]] [--config.FIELD=VALUE ...] [ARGS...] [--verbose] '
           '[--no-progress]', '', 'commands:']
  for name, (_, _, text) in COMMANDS.items():
    lines.append(f'  {name:<9} {text}')
  lines.append('\n`vvt COMMAND --help` for its arguments.')
  return '\n'.join(lines)


def main(argv=None):
  argv = list(sys.argv[1:] if argv is None else argv)
  if not argv or argv[0] in ('-h', '--help', 'help'):
    print(_usage())
    return 0
  name, rest = argv[0], argv[1:]
  if name not in COMMANDS:
    print(f'vvt: error: unknown command {name!r} (one of {", ".join(COMMANDS)})', file=sys.stderr)
    return 2
  module, func, _ = COMMANDS[name]
  if name != 'train':
    result = getattr(importlib.import_module(module), func)(rest)
    return 0 if result is None else int(result)
  from vvt.train import signals
  previous = signals.record_early()  # Ctrl-C while the libraries load: recorded, one line (vvt.train.signals)
  try:
    result = getattr(importlib.import_module(module), func)(rest)
  finally:
    signals.stop_recording(previous)
  return 0 if result is None else int(result)


def console():
  """The `vvt` program (console script, `python -m vvt`): `main` with the native libraries' start-up lines kept
  off stderr unless --verbose (see `native_stderr`)."""
  argv = sys.argv[1:]
  if '--verbose' not in argv:
    native_stderr.install(' '.join(['vvt', *argv[:1]]) if argv and not argv[0].startswith('-') else 'vvt')
  code = main(argv)
  if code:
    _exit_now_if_held(code)
  return code


def _exit_now_if_held(code: int) -> None:
  """After a failed command, ends the process at once where the interpreter's exit would wait: library threads
  still blocked (orbax's save threads wait up to 300 s for a step directory that a failed write never created),
  or a multi-process run whose exit barrier waits for a lost process. The error line is already printed."""
  import threading
  held = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon and t.is_alive()]
  distributed = sys.modules.get('jax._src.distributed')
  multi = bool(getattr(getattr(distributed, 'global_state', None), 'client', None))
  if held or multi:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == '__main__':
  sys.exit(console())
