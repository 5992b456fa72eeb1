"""The run config: its schema, validation, the config loader, the resume rules, and `config.mesh` without JAX.

Modules (none imports JAX, Flax or TensorFlow, so a command reports a bad config before loading them):
  schema      the run-level fields and defaults, the shared fields, `make_config`
  errors      `ConfigError`: the error of a bad run config, one line per problem, each naming its field
  dataset     the `dataset` section's fields and defaults (its choices: vvt.data.choices)
  paths       dotted field paths ('optimizer.name'): the one spelling of a field everywhere
  validation  every field a command reads checked before any work, every problem at once (one line each)
  loader      `--config FILE.py[:ARG] | config.json | run dir`, then `overrides` (`--config.a.b=VALUE`)
  runlocal    any config as a few-minute CPU run on the synthetic data
  labels      unset num_classes / class_names from the training data's manifest (checked against it in training)
  run_file    WORKDIR/config.json written and read back
  resume      what may change when a run resumes
  sharding    mesh axes, sharding rules and partition specs (vvt.train.sharding makes the NamedShardings)
Config files (configs/) build on `schema`, `dataset` and `paths`.
"""
