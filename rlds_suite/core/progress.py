"""Progress of long work (builds, recordings, validate, stats, export, show): episodes counted by a
tqdm bar, out of their total where it is known, steps beside them."""

from __future__ import annotations

from typing import Any, Iterable, Iterator, Mapping, Optional, TypeVar

T = TypeVar('T')


def count_episode(bar: Any, steps: int) -> None:
  """Counts one episode on `bar` (a tqdm bar of episodes) and shows `steps` so far and steps/s."""
  rate = steps / max(bar.format_dict['elapsed'], 1e-9)
  bar.set_postfix_str(f'{steps} steps, {rate:.0f} steps/s', refresh=False)
  bar.update(1)


def episodes(found: Iterable[T], total: Optional[int], description: str) -> Iterator[T]:
  """Passes `found` (episodes) through, counting them out of `total` (None: unknown) with their
  steps on a tqdm bar on standard error, shown only when that is a terminal."""
  from tqdm import auto  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  steps = 0
  with auto.tqdm(total=total, desc=description, unit=' episodes', disable=None) as bar:
    for episode in found:
      steps += num_steps(episode)
      count_episode(bar, steps)
      yield episode


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
