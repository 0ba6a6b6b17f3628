"""The episode list and dataset statistics of a dataset, from one streaming pass over it.

Episodes are numbered in the order `rlds-suite show --episode`, `stats` and `export` read them
(`datasets.episodes`: the splits joined in sorted order, read as TFDS reads them by default, which
interleaves the shards of datasets written shuffled); the pass notes where each one is stored
(split and index there, from TFDS's `tfds_id`), which is how episodes.py opens it again as TFDS's
`s[i:i+1]`. The pass keeps a few numbers per
episode (length, return, ending, small metadata) and `statistics.DatasetStatistics`; images are
not decoded (TFDS's SkipDecoding), and no episode is held after it is counted.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from typing import Any, Iterable, Iterator, Optional

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.browse import values
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.inspection import statistics
from rlds_suite.tfds import datasets

TERMINATED, TRUNCATED = 'terminated', 'truncated'
SORT_KEYS = ('id', 'length', 'return', 'ending')
METADATA_SORT = 'metadata.'  # sort=metadata.KEY sorts by that episode metadata field.


@dataclasses.dataclass(frozen=True)
class EpisodeSummary:
  """What the episode list shows of one episode."""
  id: int
  split: str
  length: int
  return_: Optional[float]
  ending: str
  metadata: dict[str, Any]

  def as_json(self) -> dict[str, Any]:
    return {'id': self.id, 'split': self.split, 'length': self.length, 'return': self.return_,
            'ending': self.ending, 'metadata': self.metadata}


def image_decoders(feature: Any) -> Optional[Any]:
  """TFDS decoders that leave every Image feature under `feature` encoded (None: no image)."""
  if isinstance(feature, tfds.features.Image):
    return tfds.decode.SkipDecoding()
  if isinstance(feature, tfds.features.Dataset):
    return image_decoders(feature.feature)
  if isinstance(feature, tfds.features.FeaturesDict):
    found = {key: image_decoders(value) for key, value in feature.items()}
    found = {key: value for key, value in found.items() if value is not None}
    return found or None
  return None


def split_ranges(builder: tfds.core.DatasetBuilder,
                 split: Optional[str] = None) -> list[tuple[str, int, int]]:
  """(split, episodes of the splits before it, number of episodes) of each split read, in sorted
  order (a split's ids are that range only where the shards are read in file order)."""
  names = [split] if split else sorted(builder.info.splits.keys())
  ranges, first = [], 0
  for name in names:
    if name not in builder.info.splits:
      raise errors.SchemaError(f'has no split {name!r} (splits: {", ".join(sorted(builder.info.splits))})',
                               path=str(builder.data_dir))
    count = builder.info.splits[name].num_examples
    ranges.append((name, first, count))
    first += count
  return ranges


def numbered_episodes(builder: tfds.core.DatasetBuilder, split: Optional[str] = None,
                      decoders: Any = None) -> Iterator[tuple[str, int, dict[str, Any]]]:
  """(split, index within it, numpy episode) of `split` (None: every split) in the order, and so
  with the ids, that `datasets.episodes` reads them (show, stats and export)."""
  joined = split or '+'.join(sorted(builder.info.splits.keys()))
  stored = {}  # Shard file name -> (split, index of its first episode in the split).
  for name, info in builder.info.splits.items():
    first = 0
    for path, length in zip(info.filepaths, info.shard_lengths):
      stored[os.path.basename(os.fspath(path))] = (name, first)
      first += length
  dataset = builder.as_dataset(split=joined, decoders=decoders,
                               read_config=tfds.ReadConfig(add_tfds_id=True))
  for episode in datasets.numpy_episodes(dataset):
    file_name, index = str(values.jsonable(episode.pop(_TFDS_ID))).rsplit('__', 1)
    name, first = stored[file_name]
    yield name, first + int(index), episode


_TFDS_ID = 'tfds_id'  # TFDS's '<shard file name>__<index in the file>' of each example read.


def ordered_episodes(builder: tfds.core.DatasetBuilder, split: str, decoders: Any = None):
  """Numpy episodes of `split` (a split name or TFDS slice) in file order."""
  dataset = builder.as_dataset(split=split, shuffle_files=False, decoders=decoders,
                               read_config=tfds.ReadConfig(interleave_cycle_length=1))
  return datasets.numpy_episodes(dataset)


def summarize(episode_id: int, split: str, episode: dict[str, Any]) -> EpisodeSummary:
  """The list's row of one numpy episode."""
  steps = episode[fields.STEPS]
  real = ~np.asarray(steps[fields.IS_LAST], bool)
  reward = np.asarray(steps[fields.REWARD], np.float64) if fields.REWARD in steps else None
  total = None if reward is None else float(reward.reshape(len(real), -1)[real].sum())
  ending = TERMINATED if np.asarray(steps[fields.IS_TERMINAL]).any() else TRUNCATED
  metadata = {key: values.jsonable(value) for key, value in episode.items() if key != fields.STEPS}
  return EpisodeSummary(episode_id, split, len(real), total, ending, metadata)


def _metadata_key(value: Any) -> tuple[int, Any]:
  if isinstance(value, bool) or value is None:
    return (3 if value is None else 0, float(value or 0))
  if isinstance(value, (int, float)):
    return (0, float(value))
  return (1, value) if isinstance(value, str) else (2, str(value))


def sortable(sort: str, metadata_keys: Iterable[str]) -> bool:
  """Whether `sort` names a column the list can be sorted by."""
  return sort in SORT_KEYS or (sort.startswith(METADATA_SORT) and
                               sort[len(METADATA_SORT):] in set(metadata_keys))


class DatasetIndex:
  """The episode list and statistics of a dataset, filled by `build` (one pass, possibly in a
  thread while the list is already served)."""

  def __init__(self, builder: tfds.core.DatasetBuilder, split: Optional[str] = None):
    self.builder = builder
    self.ranges = split_ranges(builder, split)
    self.total = sum(count for _, _, count in self.ranges)
    self.episodes: list[EpisodeSummary] = []
    self._stored: list[tuple[str, int]] = []  # (split, index within it) of each id indexed.
    self.stats = statistics.DatasetStatistics()
    self.error: Optional[str] = None
    self.metadata_keys = sorted(key for key in builder.info.features.keys() if key != fields.STEPS)
    self.done = threading.Event()
    self._lock = threading.Lock()

  def build(self) -> None:
    """Streams every episode once; an unreadable dataset leaves `error` set."""
    decoders = image_decoders(self.builder.info.features)
    try:
      split = self.ranges[0][0] if len(self.ranges) == 1 else None
      for name, index, episode in numbered_episodes(self.builder, split, decoders):
        with self._lock:
          summary = summarize(len(self.episodes), name, episode)
          self.stats.add_episode(episode[fields.STEPS])
          self.episodes.append(summary)
          self._stored.append((name, index))
    except Exception as e:  # pylint: disable=broad-except
      self.error = f'{type(e).__name__}: {e}'
    finally:
      self.done.set()

  def start(self) -> threading.Thread:
    thread = threading.Thread(target=self.build, name='browse-index', daemon=True)
    thread.start()
    return thread

  def locate(self, episode_id: int) -> tuple[str, int]:
    """(split, index within it) of an episode id; KeyError if there is none (or the pass has not
    reached it yet)."""
    with self._lock:
      if 0 <= episode_id < len(self._stored):
        return self._stored[episode_id]
    raise KeyError(episode_id)

  def query(self, offset: int = 0, limit: int = 50, sort: str = 'id', descending: bool = False,
            ending: Optional[str] = None, text: str = '', min_length: Optional[int] = None,
            max_length: Optional[int] = None) -> dict[str, Any]:
    """One page of the (filtered, sorted) list and how many rows match."""
    with self._lock:
      rows = list(self.episodes)
    text = text.lower()
    rows = [r for r in rows
            if (ending is None or r.ending == ending)
            and (min_length is None or r.length >= min_length)
            and (max_length is None or r.length <= max_length)
            and (not text or text in str(r.metadata).lower() or text == r.split)]
    if sort.startswith(METADATA_SORT):
      field = sort[len(METADATA_SORT):]
      # Numbers before text before lists, each in its own order; missing values last.
      key = lambda r: _metadata_key(r.metadata.get(field))
    else:
      key = {'id': lambda r: (0, r.id), 'length': lambda r: (0, r.length),
             'ending': lambda r: (0, r.ending),
             'return': lambda r: (r.return_ is None, r.return_ or 0.0)}[sort]
    rows.sort(key=key, reverse=descending)
    return {'total': self.total, 'indexed': len(self.episodes), 'complete': self.done.is_set(),
            'error': self.error, 'matching': len(rows),
            'episodes': [r.as_json() for r in rows[offset:offset + limit]]}

  def statistics_json(self) -> dict[str, Any]:
    """What `rlds-suite stats` prints, of the episodes indexed so far."""
    with self._lock:
      stats = self.stats
      lengths, returns = list(stats.lengths), list(stats.returns)
      moments = {name: {'mean': values.numbers(m.mean), 'std': values.numbers(m.std),
                        'min': values.numbers(m.minimum), 'max': values.numbers(m.maximum)}
                 for name, m in stats.moments.items()}
      table = statistics.summary_table(stats) if stats.episodes else ''
    return {'episodes': stats.episodes, 'steps': stats.steps, 'terminated': stats.terminated,
            'truncated': stats.truncated, 'lengths': lengths, 'returns': returns,
            'moments': moments, 'table': table, 'complete': self.done.is_set()}
