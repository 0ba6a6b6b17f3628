"""Keeps a long-running reader's memory flat: glibc gives each thread that allocates (TensorFlow
starts dozens) a malloc arena of its own, which keeps what the thread freed; with episodes of
megabytes read in turn by different threads, RSS then creeps up by the arenas' leftovers. Two
arenas (what MALLOC_ARENA_MAX=2 sets) keep it flat."""

from __future__ import annotations

import ctypes

M_ARENA_MAX = -8  # glibc's mallopt parameter number.


def limit_malloc_arenas(arenas: int = 2) -> bool:
  """Limits glibc's malloc arenas; call before TensorFlow starts its threads. False where there is
  no glibc (nothing changes)."""
  try:
    return bool(ctypes.CDLL('libc.so.6').mallopt(M_ARENA_MAX, arenas))
  except (OSError, AttributeError):
    return False
