"""Numpy values as JSON: finite numbers, text, short lists; what does not fit is described."""

from __future__ import annotations

from typing import Any

import numpy as np

MAX_LIST = 16  # Longer metadata values are described by shape and dtype, not listed.


def jsonable(value: Any) -> Any:
  """A numpy scalar or small array as JSON (NaN/inf as None, bytes as text); larger arrays as
  '<dtype[shape]>'."""
  array = np.asarray(value)
  if array.dtype.kind in 'SO' and array.ndim == 0:
    item = array.item()
    return item.decode('utf-8', 'replace') if isinstance(item, bytes) else str(item)
  if array.size > MAX_LIST or array.dtype.kind not in 'biufSO':
    return f'<{array.dtype}{list(array.shape)}>'
  if array.dtype.kind in 'SO':
    return [jsonable(v) for v in array.reshape(-1)]
  return numbers(array)


def numbers(array: np.ndarray) -> Any:
  """A numeric array as (nested) lists of Python numbers; NaN and infinities as None."""
  array = np.asarray(array)
  if array.dtype.kind == 'b':
    return array.astype(int).tolist()
  if array.dtype.kind != 'f':
    return array.tolist()
  listed = np.where(np.isfinite(array), array, 0).tolist()
  if np.all(np.isfinite(array)):
    return listed
  mask = np.isfinite(array).tolist()
  return _mask(listed, mask)


def _mask(values: Any, mask: Any) -> Any:
  if isinstance(values, list):
    return [_mask(v, m) for v, m in zip(values, mask)]
  return values if mask else None
