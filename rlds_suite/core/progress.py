"""Progress of long work (builds, recordings): episodes counted by a tqdm bar, steps beside them."""

from __future__ import annotations

from typing import Any


def count_episode(bar: Any, steps: int) -> None:
  """Counts one episode on `bar` (a tqdm bar of episodes) and shows `steps` so far and steps/s."""
  rate = steps / max(bar.format_dict['elapsed'], 1e-9)
  bar.set_postfix_str(f'{steps} steps, {rate:.0f} steps/s', refresh=False)
  bar.update(1)
