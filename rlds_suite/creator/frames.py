"""What the person sees: the frame of a timestep, and its compressed bytes for the browser."""

from __future__ import annotations

import io
from typing import Any, Optional

import dm_env
import numpy as np

from rlds_suite import envs
from rlds_suite.core import nested

JPEG = 'image/jpeg'
PNG = 'image/png'


def display_path(env: dm_env.Environment) -> Optional[str]:
  """The image the page shows: the rendered frame if the environment renders one, else its first
  image observation ('observation', 'observation/rgb'); None for state-only environments."""
  fields = envs.image_fields(env)
  if envs.FRAME in fields:
    return envs.FRAME
  return next((f for f in fields if f.split('/')[0] == 'observation'), None)


def frame_of(env: dm_env.Environment, timestep: dm_env.TimeStep,
             path: Optional[str]) -> Optional[np.ndarray]:
  if path is None:
    return None
  if path == envs.FRAME:
    return env.render_frame()
  value = timestep.observation
  for key in path.split('/')[1:]:
    value = value[key]
  return np.asarray(value)


def encode(frame: np.ndarray, mime: str = JPEG, quality: int = 90) -> bytes:
  """A [H, W, 3] or [H, W(, 1)] uint8 frame -> JPEG (default) or PNG bytes."""
  from PIL import Image  # pylint: disable=g-import-not-at-top
  array = np.asarray(frame)
  if array.ndim == 3 and array.shape[-1] == 1:
    array = array[..., 0]
  image = Image.fromarray(np.ascontiguousarray(array, dtype=np.uint8))
  out = io.BytesIO()
  if mime == PNG:
    image.save(out, format='PNG', compress_level=1)
  else:
    image.save(out, format='JPEG', quality=quality)
  return out.getvalue()


def describe(observation: Any) -> str:
  """A short text of a state observation, shown when there is no image."""
  nested_value = isinstance(observation, (dict, tuple, list))
  leaves = nested.leaves(observation) if nested_value else [observation]
  return ' '.join(np.array2string(np.asarray(v), precision=3, max_line_width=200) for v in leaves)
