"""The `vvt` console command: one entry point, one sub-command per concept.

Each sub-command lives beside the code it drives and is imported lazily, so
`vvt summary` does not pay for TensorFlow and `vvt data` does not pay for Flax.
"""
import importlib
import sys

# sub-command -> (module, function taking argv without the sub-command, help)
COMMANDS = {
    'summary': ('vvt.models.summary', 'cli_main',
                'params, GFLOPs and tokens of a model config'),
    'data': ('vvt.data.cli', 'main',
             'write datasets: convert videos, synthetic motion data'),
    'train': ('vvt.train.cli', 'train_main', 'train from a config file'),
    'eval': ('vvt.train.cli', 'eval_main',
             'multi-view evaluation of a checkpoint'),
    'convert': ('vvt.convert.cli', 'main',
                'convert official / Hugging Face checkpoints to vvt'),
    'export': ('vvt.convert.cli', 'export_main',
               'export a vvt checkpoint to safetensors'),
}


def _usage():
  lines = ['usage: vvt COMMAND [ARGS...]', '', 'commands:']
  for name, (_, _, text) in COMMANDS.items():
    lines.append(f'  {name:<9} {text}')
  return '\n'.join(lines)


def main(argv=None):
  argv = list(sys.argv[1:] if argv is None else argv)
  if not argv or argv[0] in ('-h', '--help', 'help'):
    print(_usage())
    return 0
  name, rest = argv[0], argv[1:]
  if name not in COMMANDS:
    print(f'vvt: unknown command {name!r}\n\n{_usage()}', file=sys.stderr)
    return 2
  module, func, _ = COMMANDS[name]
  result = getattr(importlib.import_module(module), func)(rest)
  return 0 if result is None else int(result)


if __name__ == '__main__':
  sys.exit(main())
