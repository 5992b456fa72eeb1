"""`ConfigError`: the error of a bad run config, one line per problem, each naming its field.

`ConfigError('one problem')` is one line; `ConfigError(*lines)` carries every problem a check found (`problems`,
in the order found), so a command prints them all at once (`vvt CMD: error: LINE` each) instead of one per run.
"""


class ConfigError(ValueError):
  """Config fields (named in the problems) have bad values or names."""

  def __init__(self, *problems: str):
    self.problems = tuple(str(p) for p in problems) or ('bad config',)
    super().__init__(*self.problems)

  def __str__(self) -> str:
    return '\n'.join(self.problems)


def problems_of(error: BaseException) -> list[str]:
  """The problem lines of an error: its `problems` (a ConfigError, vvt.models' ModelConfigError), else its
  message's lines."""
  found = getattr(error, 'problems', None)
  return list(found) if found else [line for line in str(error).splitlines() if line.strip()] or [str(error)]
