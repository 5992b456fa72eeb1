"""Zero-shot prompts: class names through templates, and the prompt ensemble of their text embeddings.

    texts = prompts(('archery', 'bowling'), ('a video of {}.', 'a person doing {}.'))   # C x T texts, class-major
    classes = ensemble(embeddings (C * T, E), num_templates=T)                        # (C, E), unit norm

A template holds one `{}` where the class name goes (underscores of a name read as spaces). Several templates
make a CLIP-style prompt ensemble (Radford et al. 2021, section 3.1.4): each prompt's text embedding normalised,
the mean over a class's templates, normalised again.
"""
from typing import Sequence

import numpy as np

SLOT = '{}'
DEFAULT_TEMPLATES = ('a video of {}.',)


def template_problems(field: str, templates) -> list:
  """The problems of a templates field: a non-empty tuple of strings, each with exactly one `{}`."""
  if isinstance(templates, str) or not isinstance(templates, (tuple, list)):
    return [f'{field} must be a tuple of strings with one "{SLOT}" each, got {templates!r}']
  if not templates:
    return [f'{field} is empty: zero-shot classification needs at least one template such as "a video of {SLOT}."']
  return [f'{field}[{i}] must hold "{SLOT}" exactly once (where the class name goes), got {t!r}'
          for i, t in enumerate(templates) if not isinstance(t, str) or t.count(SLOT) != 1]


def class_text(name: str) -> str:
  """A class name as a prompt reads it: underscores as spaces, spaces collapsed."""
  return ' '.join(str(name).replace('_', ' ').split())


def prompts(class_names: Sequence[str], templates: Sequence[str]) -> list:
  """The C x T prompts of `class_names` and `templates`, class-major (class c's are rows c*T .. c*T + T - 1)."""
  return [t.replace(SLOT, class_text(name)) for name in class_names for t in templates]


def normalize(x: np.ndarray, axis: int = -1) -> np.ndarray:
  """`x` divided by its L2 norm along `axis` (a zero vector stays zero)."""
  x = np.asarray(x, np.float64)
  return x / np.maximum(np.linalg.norm(x, axis=axis, keepdims=True), 1e-12)


def ensemble(embeddings: np.ndarray, num_templates: int) -> np.ndarray:
  """(C, E) float32: per class, the mean of its `num_templates` normalised prompt embeddings (rows of
  `embeddings` (C * T, E), class-major), normalised."""
  embeddings = np.asarray(embeddings)
  if embeddings.ndim != 2 or embeddings.shape[0] % num_templates:
    raise ValueError(f'{embeddings.shape} prompt embeddings are not classes x {num_templates} templates')
  per_class = normalize(embeddings).reshape(-1, num_templates, embeddings.shape[-1]).mean(1)
  return normalize(per_class).astype(np.float32)
