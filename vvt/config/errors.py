"""`ConfigError`: the one error of a bad run config, whose one-line message names the field."""


class ConfigError(ValueError):
  """A config field (named in the message) has a bad value or name."""
