"""A built dataset's episodes read in numpy, one at a time, without TensorFlow.

For datasets whose features `writing.plan_of` covers (every dataset our writers produce) and whose
examples are stored in order (`disable_shuffling`, as both our writers declare): the shards are
read with `tfrecord_files` (CRC-checked), each tf.train.Example is parsed from its wire format and
its features decoded as TFDS decodes them (packed floats and varints, raw and ZLIB bytes, PNG,
text). The episodes equal `datasets.read_episodes`' (tests/test_build_without_tensorflow.py), at
constant memory and without TensorFlow's ~0.8 GiB, so `rlds-suite build`'s validation pass stays
small.

The same decoder parses other datasets' examples by a declared spec (`parse_example`, as
`tf.io.parse_single_example` does with FixedLenFeature and FixedLenSequenceFeature): RL Unplugged's
source shards (`tfrecord_episodes`).
"""

from __future__ import annotations

import dataclasses
import io
import os
import struct
import zlib
from typing import Any, Iterator, Mapping, Optional, Sequence

from isal import isal_zlib
import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.readers import bounded_inflate
from rlds_suite.tfds import episode_wire
from rlds_suite.tfds import tfrecord_files
from rlds_suite.tfds import writing

_BYTES_LIST, _FLOAT_LIST, _INT64_LIST = 1, 2, 3  # Feature's fields.
_PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
_PNG_CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # Colour type -> channels (palette: not here).
_PILLOW_MODES = {1: 'L', 2: 'LA', 3: 'RGB', 4: 'RGBA'}  # Channels -> Pillow's 8-bit mode.
_LIST_NAMES = {_BYTES_LIST: 'bytes_list', _FLOAT_LIST: 'float_list', _INT64_LIST: 'int64_list'}


def can_read(info: tfds.core.DatasetInfo, split: Optional[str] = None) -> bool:
  """Whether `read_episodes` reads this dataset (else TFDS's tf.data reader must)."""
  file_format = info.file_format
  return (info.disable_shuffling and writing.plan_of(info.features) is not None and
          (file_format is None or file_format.value == 'tfrecord') and
          (split is None or split in info.splits))


def read_episodes(info: tfds.core.DatasetInfo,
                  split: Optional[str] = None) -> Iterator[dict[str, Any]]:
  """Every split's (or `split`'s) episodes in TFDS's order, as `datasets.numpy_episodes` gives
  them: {'steps': {field: rows}, **metadata}."""
  plan = writing.plan_of(info.features)
  if plan is None:
    raise errors.SchemaError('features not readable without TensorFlow', path=info.full_name)
  for name in ([split] if split else sorted(info.splits.keys())):
    for path in info.splits[name].filepaths:
      path = os.fspath(path)
      if not os.path.exists(path):
        raise errors.CorruptFileError(
            f'missing TFRecord shard of {info.full_name} (deleted or moved?)', path=path)
      for index, record in enumerate(tfrecord_files.read_records(path)):
        try:
          yield decode_example(plan, record)
        except (ValueError, IndexError, struct.error, isal_zlib.error) as e:
          raise errors.CorruptFileError(f'record {index} is not a valid example: {e}',
                                        path=path) from None


def decode_example(plan: Sequence[episode_wire.Leaf], record: bytes) -> dict[str, Any]:
  """A serialized tf.train.Example of an RLDS episode -> nested numpy values."""
  features = _features(memoryview(record))
  episode: dict[str, Any] = {}
  for leaf in plan:
    *parents, last = leaf.key.split('/')
    target = episode
    for part in parents:
      target = target.setdefault(part, {})
    target[last] = _decode_leaf(leaf, features.get(leaf.key))
  return episode


@dataclasses.dataclass(frozen=True)
class ParseFeature:
  """One entry of a parse spec: `tf.io.FixedLenFeature(shape, dtype)` (required), or with
  `sequence` `tf.io.FixedLenSequenceFeature(shape, dtype, allow_missing=True)` (rows of `shape`,
  none when the key is absent). `dtype`: 'int64', 'float32' or 'bytes' (TensorFlow's tf.string)."""
  dtype: str
  shape: tuple[int, ...] = ()
  sequence: bool = False

  @property
  def list_kind(self) -> int:
    return {'int64': _INT64_LIST, 'float32': _FLOAT_LIST, 'bytes': _BYTES_LIST}[self.dtype]


def parse_example(record: bytes, spec: Mapping[str, ParseFeature]) -> dict[str, np.ndarray]:
  """A serialized tf.train.Example -> {key: value} as `tf.io.parse_single_example(record, spec)`
  gives them in numpy (bytes values: an object array of bytes); ValueError naming the key when the
  record does not match the spec."""
  features = _features(memoryview(record))
  parsed = {}
  for key, feature in spec.items():
    found = features.get(key)
    if found is None and not feature.sequence:
      raise ValueError(f'feature {key!r} is required but missing')
    kind, message = found if found is not None else (None, memoryview(b''))
    if kind is not None and kind != feature.list_kind:
      raise ValueError(f'feature {key!r}: expected a {_LIST_NAMES[feature.list_kind]}, got a '
                       f'{_LIST_NAMES.get(kind, f"field {kind}")}')
    if feature.dtype == 'bytes':
      items = _bytes_items(message)
      values = np.empty(len(items), object)
      values[:] = [bytes(item) for item in items]
    elif feature.dtype == 'float32':
      values = _floats(message)
    else:
      values = _ints(message)
    row = int(np.prod(feature.shape, dtype=np.int64))
    if (len(values) % row if feature.sequence else len(values) != row):
      raise ValueError(f'feature {key!r}: {len(values)} values do not fill '
                       f'{"rows of " if feature.sequence else ""}shape {list(feature.shape)}')
    parsed[key] = values.reshape(((-1,) if feature.sequence else ()) + tuple(feature.shape))
  return parsed


def _decode_leaf(leaf: episode_wire.Leaf, feature: Optional[tuple[int, memoryview]]) -> Any:
  kind, message = feature if feature is not None else (None, memoryview(b''))
  dtype = np.dtype(leaf.dtype)
  if leaf.kind == episode_wire.TEXT:
    items = _bytes_items(message)
    if len(items) != 1:
      raise ValueError(f'{leaf.key}: expected one text value, got {len(items)}')
    return bytes(items[0])
  if leaf.kind in (episode_wire.FLOAT, episode_wire.INT):
    values = _floats(message) if kind == _FLOAT_LIST else _ints(message)
    values = values.astype(dtype)
  else:
    items = _bytes_items(message)
    if leaf.kind == episode_wire.PNG:
      values = decode_pngs(items, leaf.shape, dtype)
    else:
      row_bytes = int(np.prod(leaf.shape, dtype=np.int64)) * dtype.itemsize
      data = b''.join(bounded_inflate.inflate_exactly(item, row_bytes) for item in items) if (
          leaf.kind == episode_wire.ZLIB) else b''.join(items)
      values = np.frombuffer(data, dtype.newbyteorder('<')).astype(dtype)
  shape = ((-1,) if leaf.per_step else ()) + leaf.shape
  return values.reshape(shape)


# --- The protobuf wire format ------------------------------------------------------------------

def _varint(buffer: memoryview, position: int) -> tuple[int, int]:
  result = shift = 0
  while True:
    byte = buffer[position]
    position += 1
    result |= (byte & 0x7F) << shift
    if byte < 0x80:
      return result, position
    shift += 7


def _fields(buffer: memoryview) -> Iterator[tuple[int, int, Any]]:
  """(field number, wire type, value) of a message: a memoryview for length-delimited fields,
  an int for varints, the raw bytes for fixed32/64."""
  position, end = 0, len(buffer)
  while position < end:
    tag, position = _varint(buffer, position)
    number, wire = tag >> 3, tag & 7
    if wire == 2:
      length, position = _varint(buffer, position)
      if position + length > end:
        raise ValueError('field runs past the end of its message')
      yield number, wire, buffer[position:position + length]
      position += length
    elif wire == 0:
      value, position = _varint(buffer, position)
      yield number, wire, value
    elif wire in (1, 5):
      size = 8 if wire == 1 else 4
      yield number, wire, buffer[position:position + size]
      position += size
    else:
      raise ValueError(f'unsupported wire type {wire}')


def _features(example: memoryview) -> dict[str, tuple[int, memoryview]]:
  """{key: (list kind, list message)} of an Example."""
  found = {}
  for number, _, features in _fields(example):
    if number != 1:
      continue
    for entry_number, _, entry in _fields(features):
      if entry_number != 1:
        continue
      key, feature = '', memoryview(b'')
      for part_number, _, value in _fields(entry):
        if part_number == 1:
          key = bytes(value).decode('utf-8')
        elif part_number == 2:
          feature = value
      kind, message = None, memoryview(b'')  # A Feature with no list set holds no values.
      for kind_number, _, value in _fields(feature):
        kind, message = kind_number, value
      found[key] = (kind, message)
  return found


def _bytes_items(message: memoryview) -> list[memoryview]:
  return [value for number, _, value in _fields(message) if number == 1]


def _floats(message: memoryview) -> np.ndarray:
  parts = [bytes(value) for number, _, value in _fields(message) if number == 1]
  return np.frombuffer(b''.join(parts), '<f4')


def _ints(message: memoryview) -> np.ndarray:
  """Int64List values: packed (as written) or one varint per field."""
  packed, single = [], []
  for number, wire, value in _fields(message):
    if number == 1 and wire == 2:
      packed.append(bytes(value))
    elif number == 1:
      single.append(value)
  if single:
    return np.array(single, dtype=np.uint64).view(np.int64)
  return decode_varints(np.frombuffer(b''.join(packed), np.uint8))


def decode_varints(data: np.ndarray) -> np.ndarray:
  """Back-to-back varints (uint8) -> int64 values (two's complement, as protobuf writes them)."""
  ends = np.flatnonzero(data < 0x80)
  if len(ends) and ends[-1] != len(data) - 1 or (len(data) and not len(ends)):
    raise ValueError('truncated varint')
  if not len(ends) or len(ends) == len(data):  # Empty, or every value one byte.
    return data.astype(np.int64)
  starts = np.concatenate(([0], ends[:-1] + 1))
  sizes = ends - starts + 1
  values = np.zeros(len(ends), dtype=np.uint64)
  for index in range(int(sizes.max())):
    present = sizes > index
    chunk = data[starts[present] + index].astype(np.uint64) & np.uint64(0x7F)
    values[present] |= chunk << np.uint64(7 * index)
  return values.view(np.int64)


# --- PNG ---------------------------------------------------------------------------------------

def decode_pngs(pngs: Sequence[bytes | memoryview], shape: tuple[int, ...],
                dtype: np.dtype = np.dtype(np.uint8)) -> np.ndarray:
  """PNG files -> one [len(pngs), *shape] array, filled in place (no list of frames beside it);
  ValueError naming the first that is not such a PNG."""
  images = np.empty((len(pngs),) + tuple(shape), dtype)
  for index, png in enumerate(pngs):
    try:
      images[index] = decode_png(bytes(png), tuple(shape), dtype)
    except (ValueError, OSError, struct.error, isal_zlib.error) as e:
      raise ValueError(f'frame {index} is not a {list(shape)} {np.dtype(dtype).name} PNG: '
                       f'{e}') from None
  return images


def decode_png(data: bytes, shape: tuple[int, ...],
               dtype: np.dtype = np.dtype(np.uint8)) -> np.ndarray:
  """A PNG file -> a [height, width, channels] array, as TFDS's Image decodes it.

  Non-interlaced files of `dtype`'s depth and `shape`'s channels are inflated once (ISA-L).
  Unfiltered rows (ours) are the pixels; filtered 8-bit rows (libpng's, so TensorFlow's and RL
  Unplugged's, and Pillow's) are unfiltered by Pillow's PNG decoder over the inflated rows, not by
  a second decode of the file; without Pillow, and for 16-bit rows, None/Sub/Up filters are undone
  in numpy and Average/Paeth rows decoded by TensorFlow. Other files (palette, interlaced, other
  depths) go to one decoder: Pillow (8-bit) or TensorFlow."""
  image = _own_png(data, shape, dtype)
  if image is None:
    image = _other_png(data, shape, dtype)
  if image.shape != tuple(shape):
    raise ValueError(f'PNG of shape {list(image.shape)}, expected {list(shape)}')
  return image


def _own_png(data: bytes, shape: tuple[int, ...], dtype: np.dtype) -> Optional[np.ndarray]:
  """The image when its layout is one `_pixels` decodes (None otherwise, before inflating)."""
  if data[:8] != _PNG_SIGNATURE:
    raise ValueError('not a PNG file')
  position, idat, header = 8, [], None
  while position + 8 <= len(data):
    (length,), kind = struct.unpack_from('>I', data, position), data[position + 4:position + 8]
    body = data[position + 8:position + 8 + length]
    if kind == b'IHDR':
      header = struct.unpack('>IIBBBBB', body)
    elif kind == b'IDAT':
      idat.append(body)
    elif kind == b'IEND':
      break
    position += 12 + length
  if header is None:
    raise ValueError('PNG without IHDR')
  width, height, depth, colour, _, _, interlace = header
  channels = _PNG_CHANNELS.get(colour)
  if (interlace or channels is None or depth != 8 * dtype.itemsize or
      len(shape) != 3 or channels != shape[2]):
    return None
  if (height, width) != tuple(shape[:2]):
    raise ValueError(f'PNG of shape {[height, width, channels]}, expected {list(shape)}')
  row_bytes = 1 + width * channels * dtype.itemsize
  scanlines = np.frombuffer(
      bounded_inflate.inflate_exactly(b''.join(idat), height * row_bytes), np.uint8)
  return _pixels(scanlines.reshape(height, row_bytes), tuple(shape), dtype)


def _pixels(scanlines: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> Optional[np.ndarray]:
  """Inflated scanlines [height, 1 + row bytes] -> the image; None for Average or Paeth rows
  that only a decoder of the whole file unfilters (16-bit, or no Pillow)."""
  filters = scanlines[:, 0]
  highest = int(filters.max())
  if highest > 4:
    row = int(np.argmax(filters > 4))
    raise ValueError(f'PNG row {row} has filter type {int(filters[row])} (PNG defines 0-4)')
  if highest:  # Pillow's unfilter (C) is as fast as numpy's running sums for Sub/Up rows.
    image = _unfilter_by_pillow(scanlines, shape) if dtype == np.uint8 else None
    if image is not None or highest > 2:
      return image
  rows = _unfilter_sub_up(scanlines, shape[2] * dtype.itemsize)
  return rows.view(dtype.newbyteorder('>')).astype(dtype).reshape(shape)


def _unfilter_sub_up(scanlines: np.ndarray, pixel_bytes: int) -> np.ndarray:
  """The bytes [height, row bytes] of scanlines filtered by None (0), Sub (1) or Up (2), modulo
  256: a Sub row is the running sum of its bytes `pixel_bytes` apart, and a run of Up rows is the
  row before the run plus the running sum of the run (a segmented sum over rows)."""
  filters, rows = scanlines[:, 0], scanlines[:, 1:].copy()
  sub = filters == 1
  if sub.any():
    rows[sub] = rows[sub].reshape(int(sub.sum()), -1, pixel_bytes).cumsum(
        axis=1, dtype=np.uint8).reshape(int(sub.sum()), -1)
  up = filters == 2
  if up.any():
    # Row i = total[i] - total[start - 1], start: the last row at or before i that is not Up
    # (a run of Up rows from the top starts on an all-zero row above the image).
    total = np.zeros((len(rows) + 1, rows.shape[1]), np.uint8)
    np.cumsum(rows, axis=0, dtype=np.uint8, out=total[1:])
    start = np.maximum.accumulate(np.where(up, 0, np.arange(len(rows))))
    rows = total[1:] - total[start]
  return rows


def _unfilter_by_pillow(scanlines: np.ndarray, shape: tuple[int, ...]) -> Optional[np.ndarray]:
  """8-bit scanlines unfiltered by Pillow's PNG decoder (its 'zip' decoder, what
  PngImagePlugin runs), fed the inflated rows as stored deflate blocks: a copy, not an inflate."""
  try:
    from PIL import Image  # pylint: disable=g-import-not-at-top
  except ImportError:
    return None
  mode = _PILLOW_MODES[shape[2]]
  image = Image.frombytes(mode, (shape[1], shape[0]), zlib.compress(scanlines, 0), 'zip', mode)
  return np.asarray(image).reshape(shape)


def _other_png(data: bytes, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
  if dtype == np.uint8:
    try:
      from PIL import Image  # pylint: disable=g-import-not-at-top
    except ImportError:
      pass
    else:
      with Image.open(io.BytesIO(data)) as image:
        return np.asarray(image.convert(_PILLOW_MODES[shape[2]])).reshape(shape)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  return tf.io.decode_png(data, channels=shape[2], dtype=tf.as_dtype(dtype)).numpy()
