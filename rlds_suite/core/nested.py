"""Row operations on nested numpy structures (an array, or dicts/tuples of arrays sharing a leading axis)."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Sequence

import numpy as np
import tree

Nested = Any


def map_arrays(fn: Callable[..., Any], *structures: Nested) -> Nested:
  return tree.map_structure(fn, *structures)


def leaves(structure: Nested) -> list:
  return tree.flatten(structure)


def leading_length(structure: Nested) -> int:
  """Common length of the leading axis of every leaf; ValueError when leaves disagree."""
  if type(structure) is np.ndarray:  # Fast path, same result: one leaf.
    return len(structure)
  lengths = {len(leaf) for leaf in tree.flatten(structure)}
  if len(lengths) != 1:
    raise ValueError(f'leaves have different leading lengths {sorted(lengths)}')
  return lengths.pop()


def _map(fn: Callable[..., Any], structure: Nested, *others: Nested) -> Nested:
  """tree.map_structure, skipping its traversal for the common single-array and empty-dict cases
  (it treats both the same way: an array is one leaf, an empty dict maps to a new empty dict)."""
  if type(structure) is np.ndarray and all(type(o) is np.ndarray for o in others):
    return fn(structure, *others)
  if type(structure) is dict and not structure and all(type(o) is dict and not o for o in others):
    return {}
  return tree.map_structure(fn, structure, *others)


def as_arrays(structure: Nested) -> Nested:
  return _map(np.asarray, structure)


def take_rows(structure: Nested, rows: slice | np.ndarray) -> Nested:
  return _map(lambda a: a[rows], structure)


def row(structure: Nested, index: int) -> Nested:
  return _map(lambda a: a[index], structure)


def as_one_row(columns: Nested, value: Nested) -> Nested:
  """`value`, one row shaped like `columns`' rows, as columns of one row of the same dtypes."""
  return _map(_one_row, columns, value)


def _one_row(column: np.ndarray, value: Any) -> np.ndarray:
  if column.dtype == object:  # One opaque value per row (strings, variable-length arrays).
    cell = np.empty(1, dtype=object)
    cell[0] = value
    return cell
  return np.asarray(value, dtype=column.dtype)[None]


def interleave_rows(columns: Nested, rows: np.ndarray | slice, others: Nested | None,
                    other_rows: np.ndarray | slice, num_rows: int) -> Nested:
  """New columns of `num_rows` rows: `columns`' rows at `rows` and `others`' rows (columns of the
  same structure) at `other_rows`, which together place each of the `num_rows` rows once; with no
  `others`, those rows are zero-filled. Slices place contiguous rows by block copies (one episode:
  its actions, then its final row). A leaf whose two parts are object columns or differ in row
  shape becomes an object column, one value per row."""

  def indices(placed: np.ndarray | slice) -> Any:
    return range(num_rows)[placed] if isinstance(placed, slice) else placed

  def place(column: np.ndarray, *other: np.ndarray) -> np.ndarray:
    extra = other[0] if other else None
    if column.dtype != object and (extra is None or (extra.dtype != object and
                                                     extra.shape[1:] == column.shape[1:])):
      out = np.empty((num_rows,) + column.shape[1:], dtype=column.dtype)  # Every row is set below.
      out[rows] = column
      out[other_rows] = np.zeros((), dtype=column.dtype) if extra is None else extra
      return out
    out = np.empty(num_rows, dtype=object)  # One value per row: ragged rows, or rows kept as given.
    for index, value in zip(indices(rows), column):
      out[index] = value
    for position, index in enumerate(indices(other_rows)):
      out[index] = np.zeros((), dtype=object) if extra is None else extra[position]
    return out

  return _map(place, columns) if others is None else _map(place, columns, others)


def concat_rows(structures: Sequence[Nested]) -> Nested:
  return tree.map_structure(lambda *parts: np.concatenate(parts, axis=0), *structures)


def stack_rows(rows: Sequence[Nested]) -> Nested:
  """List of per-step structures -> one structure of stacked arrays."""
  return tree.map_structure(lambda *parts: np.stack(parts, axis=0), *rows)


def stack_rows_allowing_ragged(rows: Sequence[Any], keep_rows: Callable[[str], bool] = lambda path: False,
                               path: str = '') -> Any:
  """Rows (dicts nest) -> stacked arrays; a leaf whose rows differ in shape or hold strings, or
  whose '/'-joined path `keep_rows` names, becomes an object array with one value per row
  (uncopied). Anything but a Mapping is a leaf (lists too)."""
  if isinstance(rows[0], Mapping):
    return {key: stack_rows_allowing_ragged([row[key] for row in rows], keep_rows,
                                            f'{path}/{key}' if path else key) for key in rows[0]}
  if not keep_rows(path):
    try:
      stacked = np.asarray(rows)
    except ValueError:  # Rows differ in shape.
      stacked = None
    if (stacked is not None and stacked.dtype.kind not in 'USO' and
        stacked.ndim == np.ndim(rows[0]) + 1):
      return stacked
  column = np.empty(len(rows), dtype=object)
  for index, row in enumerate(rows):
    column[index] = row if isinstance(row, (str, bytes)) else np.asarray(row)
  return column


def spec_of(structure: Nested) -> Nested:
  """(row shape, dtype) of each leaf: what a step of this structure looks like."""
  return tree.map_structure(lambda a: (tuple(a.shape[1:]), np.dtype(a.dtype)), structure)


def flatten_with_paths(structure: Nested) -> list[tuple[str, Any]]:
  return [('/'.join(str(p) for p in path), leaf)
          for path, leaf in tree.flatten_with_path(structure)]


def flatten_paths(structure: Mapping[str, Any], prefix: str = '') -> dict[str, Any]:
  """{'a': {'b': x}, 'c': y} -> {'a/b': x, 'c': y}; only Mappings nest. Inverse of unflatten_paths."""
  flat = {}
  for key, value in structure.items():
    path = f'{prefix}{key}'
    if isinstance(value, Mapping):
      flat.update(flatten_paths(value, f'{path}/'))
    else:
      flat[path] = value
  return flat


def unflatten_paths(flat: Mapping[str, Any], separator: str = '/') -> dict[str, Any]:
  """{'a/b': x, 'c': y} -> {'a': {'b': x}, 'c': y} (paths split at `separator`)."""
  root: dict[str, Any] = {}
  for path, value in flat.items():
    *parents, leaf = path.split(separator)
    node = root
    for part in parents:
      node = node.setdefault(part, {})
    node[leaf] = value
  return root
