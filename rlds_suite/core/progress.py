"""Progress of long work (builds, recordings, validate, stats, export, show) on a tqdm bar.

A bar counts episodes and their steps. Out of what total: the steps' where the source declares them
(the ETA then follows the data, whatever the episodes' lengths), else the episodes', else none (the
bar shows counts and rates only). Totals come from what a format declares cheaply before its data
is read (file counts, headers, metadata, terminal flags): a builder marks a split's example
generator with `expect`, and the build's bar reads them back with `expected`.
"""

from __future__ import annotations

import dataclasses
import weakref
from typing import Any, Iterable, Iterator, Mapping, Optional, TypeVar

T = TypeVar('T')


@dataclasses.dataclass(frozen=True)
class Totals:
  """Episodes and steps a piece of work will count, each None where it is not known beforehand."""
  episodes: Optional[int] = None
  steps: Optional[int] = None

  def __add__(self, other: 'Totals') -> 'Totals':
    """Totals of two parts: a count is known only where it is known for both."""
    add = lambda a, b: None if a is None or b is None else a + b
    return Totals(add(self.episodes, other.episodes), add(self.steps, other.steps))


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


class Bar:
  """A tqdm bar of episodes and steps on standard error (or `file`), shown only on a terminal
  (`disable=None`): out of the steps' total when known, else the episodes', else of none."""

  def __init__(self, totals: Totals, description: str, file: Any = None):
    from tqdm import auto  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    self.totals = totals
    self.by_steps = totals.steps is not None
    self.episodes = self.steps = 0
    self.tqdm = auto.tqdm(total=self.total, desc=description, file=file, disable=None,
                          unit=' steps' if self.by_steps else ' episodes', unit_scale=self.by_steps)

  @property
  def total(self) -> Optional[int]:
    """The bar's total: steps when `by_steps`, else episodes; None when unknown."""
    return self.totals.steps if self.by_steps else self.totals.episodes

  def add(self, episodes: int, steps: int) -> None:
    """Counts `episodes` more episodes holding `steps` more steps."""
    self.update_to(self.episodes + episodes, self.steps + steps)

  def update_to(self, episodes: int, steps: int) -> None:
    """Sets the counts to `episodes` and `steps` done so far."""
    self.episodes, self.steps = episodes, steps
    if self.by_steps:
      of = '' if self.totals.episodes is None else f'/{self.totals.episodes}'
      self.tqdm.set_postfix_str(f'{episodes}{of} episodes', refresh=False)
      self.tqdm.update(steps - self.tqdm.n)
    else:
      rate = steps / max(self.tqdm.format_dict.get('elapsed', 0), 1e-9)
      self.tqdm.set_postfix_str(f'{steps} steps, {rate:.0f} steps/s', refresh=False)
      self.tqdm.update(episodes - self.tqdm.n)

  def close(self) -> None:
    self.tqdm.close()

  def __enter__(self) -> 'Bar':
    return self

  def __exit__(self, *exc: Any) -> None:
    self.close()


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
