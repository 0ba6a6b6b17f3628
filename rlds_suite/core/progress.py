"""Progress of long work (builds, recordings, validate, stats, export, show) on a tqdm bar.

A bar counts episodes and their steps. Out of what total: the steps' where the source declares them
(the ETA then follows the data, whatever the episodes' lengths), else the episodes', else the source
files' (formats that hold an unknown number of episodes a file), else none (the bar shows counts
and rates only). Totals come from what a format declares cheaply before its data is read (file
counts, headers, metadata, terminal flags): a builder marks a split's example generator with
`expect`, and the build's bar reads them back with `expected`; a generator going through files
passes them through `files`, which counts each one read on the bar.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Any, Iterable, Iterator, Mapping, Optional, TypeVar

T = TypeVar('T')


@dataclasses.dataclass(frozen=True)
class Totals:
  """Episodes, steps and source files a piece of work will count, each None where it is not known
  beforehand."""
  episodes: Optional[int] = None
  steps: Optional[int] = None
  files: Optional[int] = None

  def __add__(self, other: 'Totals') -> 'Totals':
    """Totals of two parts: a count is known only where it is known for both."""
    add = lambda a, b: None if a is None or b is None else a + b
    return Totals(add(self.episodes, other.episodes), add(self.steps, other.steps),
                  add(self.files, other.files))


UNKNOWN = Totals()

# Example generators (which take no attributes) -> the totals their builder declared.
_EXPECTED: 'weakref.WeakKeyDictionary[Any, Totals]' = weakref.WeakKeyDictionary()


def expect(examples: Iterator[T], totals: Totals) -> Iterator[T]:
  """Marks a split's example generator with `totals` for the build's progress bar; returns it."""
  _EXPECTED[examples] = totals
  return examples


def expected(examples: Any) -> Totals:
  """The totals `expect` marked `examples` with (UNKNOWN when none)."""
  try:
    return _EXPECTED.get(examples, UNKNOWN)
  except TypeError:  # Not weakly referenceable (a list): never marked.
    return UNKNOWN


# Bars open in each thread's work, innermost last: where `files` counts the files read.
_THREAD = threading.local()


def _open() -> list['Bar']:
  if not hasattr(_THREAD, 'bars'):
    _THREAD.bars = []
  return _THREAD.bars


class Bar:
  """A tqdm bar of episodes and steps on standard error (or `file`), shown only on a terminal
  (`disable=None`): out of the steps' total when known, else the episodes', else the files', else
  of none (`unit` says which it counts)."""

  def __init__(self, totals: Totals, description: str, file: Any = None):
    from tqdm import auto  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    self.totals, self.description = totals, description
    self.unit = ('steps' if totals.steps is not None else 'episodes'
                 if totals.episodes is not None or totals.files is None else 'files')
    self.episodes = self.steps = self.files = 0
    self.tqdm = auto.tqdm(total=self.total, desc=description, file=file, disable=None,
                          unit=f' {self.unit}', unit_scale=self.unit == 'steps')
    _open().append(self)

  @property
  def by_steps(self) -> bool:
    return self.unit == 'steps'

  @property
  def total(self) -> Optional[int]:
    """The bar's total, of its `unit`; None when unknown."""
    return getattr(self.totals, self.unit)

  def add(self, episodes: int, steps: int, files: int = 0) -> None:
    """Counts `episodes` more episodes holding `steps` more steps, and `files` more files read."""
    self.update_to(self.episodes + episodes, self.steps + steps, self.files + files)

  def update_to(self, episodes: int, steps: int, files: Optional[int] = None) -> None:
    """Sets the counts to `episodes`, `steps` (and `files`) done so far."""
    self.episodes, self.steps = episodes, steps
    self.files = self.files if files is None else files
    rate = steps / max(self.tqdm.format_dict.get('elapsed', 0), 1e-9)
    if self.unit == 'steps':
      of = '' if self.totals.episodes is None else f'/{self.totals.episodes}'
      self.tqdm.set_postfix_str(f'{episodes}{of} episodes', refresh=False)
    elif self.unit == 'episodes':
      self.tqdm.set_postfix_str(f'{steps} steps, {rate:.0f} steps/s', refresh=False)
    else:
      self.tqdm.set_postfix_str(f'{episodes} episodes, {steps} steps, {rate:.0f} steps/s',
                                refresh=False)
    self.tqdm.update(getattr(self, self.unit) - self.tqdm.n)

  def close(self) -> None:
    if self in _open():
      _open().remove(self)
    self.tqdm.close()

  def __enter__(self) -> 'Bar':
    return self

  def __exit__(self, *exc: Any) -> None:
    self.close()


def files(paths: Iterable[T]) -> Iterator[T]:
  """Passes source files through, counting each one on the innermost open bar once the work on it
  is done (when the next one is asked for, or the last one finished)."""
  for path in paths:
    yield path
    file_done()


def file_done() -> None:
  """Counts one file done on this thread's innermost open bar (none open: nothing)."""
  if _open():
    _open()[-1].add(0, 0, files=1)


def count_episode(bar: Any, steps: int) -> None:
  """Counts one episode on `bar` (a tqdm bar of episodes) and shows `steps` so far and steps/s."""
  rate = steps / max(bar.format_dict['elapsed'], 1e-9)
  bar.set_postfix_str(f'{steps} steps, {rate:.0f} steps/s', refresh=False)
  bar.update(1)


def episodes(found: Iterable[T], total: Optional[int] | Totals, description: str) -> Iterator[T]:
  """Passes `found` (episodes, or (key, episode) pairs) through, counting them and their steps
  out of `total` (episodes, or Totals; None: unknown) on a Bar."""
  totals = total if isinstance(total, Totals) else Totals(episodes=total)
  with Bar(totals, description) as bar:
    for item in found:
      bar.add(1, num_steps(item[1] if isinstance(item, tuple) else item))
      yield item


def num_steps(episode: Any) -> int:
  """Steps of an episode given as {'steps': {field: rows}} (0 when it cannot tell)."""
  steps = getattr(episode, 'steps', None)
  if steps is None and isinstance(episode, Mapping):
    steps = episode.get('steps')
  if isinstance(steps, Mapping):
    for leaf in steps.values():
      if hasattr(leaf, '__len__') and not isinstance(leaf, Mapping):
        return len(leaf)
  return len(steps) if isinstance(steps, list) else 0


def split_total(splits: Mapping[str, Any], split: Optional[str] = None) -> Optional[int]:
  """Episodes in `split` ('train', 'train+test'; None: every split) of a dataset's splits (TFDS
  SplitInfos, with num_examples), or None when a part is not a plain split name."""
  names = list(splits) if split is None else split.split('+')
  if not all(name in splits for name in names):
    return None
  return sum(int(splits[name].num_examples) for name in names)
