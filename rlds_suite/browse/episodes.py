"""One episode at a time: opened by id through TFDS's split slicing, kept in a small LRU, and
turned into what the page plays (image fields) and plots (vector fields, flags, step metadata)."""

from __future__ import annotations

import collections
import threading
from typing import Any

import numpy as np

from rlds_suite.browse import index as index_lib
from rlds_suite.browse import values
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite.creator import frames
from rlds_suite.inspection import rendering

CACHED_EPISODES = 3
MAX_PLOTTED_SIZE = 64  # Numeric step fields up to this many values a step are plotted.


class EpisodeCache:
  """Numpy episodes by id, the `size` most recently used kept in memory."""

  def __init__(self, index: index_lib.DatasetIndex, size: int = CACHED_EPISODES):
    self.index = index
    self.size = size
    self._episodes: collections.OrderedDict[int, dict[str, Any]] = collections.OrderedDict()
    self._lock = threading.Lock()

  def get(self, episode_id: int) -> dict[str, Any]:
    """The numpy episode `episode_id`; KeyError if the dataset has none."""
    with self._lock:
      if episode_id in self._episodes:
        self._episodes.move_to_end(episode_id)
        return self._episodes[episode_id]
      split, i = self.index.locate(episode_id)
      episode = next(index_lib.ordered_episodes(self.index.builder, f'{split}[{i}:{i + 1}]'))
      self._episodes[episode_id] = episode
      while len(self._episodes) > self.size:
        self._episodes.popitem(last=False)
      return episode


def image_fields(steps: dict[str, Any]) -> list[str]:
  """The observation's image leaves by path within it ('observation' when it is one array)."""
  return rendering.image_paths(nested.row(steps[fields.OBSERVATION], 0))


def _observation_leaves(steps: dict[str, Any]) -> dict[str, np.ndarray]:
  """The observation's leaves by the paths `image_fields` names them with."""
  return {path or fields.OBSERVATION: np.asarray(leaf)
          for path, leaf in nested.flatten_with_paths(steps[fields.OBSERVATION])}


def frame(episode: dict[str, Any], field: int, step: int, mime: str = frames.JPEG) -> bytes:
  """Image field number `field` of step `step`, encoded; IndexError if either is out of range."""
  steps = episode[fields.STEPS]
  paths = image_fields(steps)
  if not 0 <= field < len(paths) or not 0 <= step < len(steps[fields.IS_FIRST]):
    raise IndexError((field, step))
  return frames.encode(rendering.rgb_panel(_observation_leaves(steps)[paths[field]][step]), mime)


def view(summary: index_lib.EpisodeSummary, episode: dict[str, Any]) -> dict[str, Any]:
  """The page's episode: image fields, plotted series (one list of rows a field), flags and step
  metadata, one value a step."""
  steps = episode[fields.STEPS]
  length = len(steps[fields.IS_FIRST])
  images = image_fields(steps)
  series, other = [], {}
  for group in (fields.OBSERVATION, fields.ACTION, fields.REWARD, fields.DISCOUNT):
    if group not in steps:
      continue
    for path, leaf in nested.flatten_with_paths(steps[group]):
      name = '/'.join(p for p in (group, path) if p)
      leaf = np.asarray(leaf)
      if group == fields.OBSERVATION and (path or fields.OBSERVATION) in images:
        continue
      if leaf.dtype.kind in 'biuf' and leaf[0].size <= MAX_PLOTTED_SIZE:
        series.append({'name': name, 'values': values.numbers(leaf.reshape(length, -1)),
                       'discrete': leaf.dtype.kind in 'biu'})
      else:
        other[name] = [values.jsonable(v) for v in leaf]
  for key, value in steps.items():
    if key in fields.CORE_STEP_FIELDS:
      continue
    for path, leaf in nested.flatten_with_paths(value):
      other['/'.join(p for p in (key, path) if p)] = [values.jsonable(v) for v in np.asarray(leaf)]
  return {**summary.as_json(),
          'images': [{'field': i, 'name': name if name == fields.OBSERVATION else
                      f'{fields.OBSERVATION}/{name}'} for i, name in enumerate(images)],
          'series': series,
          'flags': {name: values.numbers(np.asarray(steps[name], bool))
                    for name in fields.BOUNDARY_FIELDS},
          'step_metadata': other}
