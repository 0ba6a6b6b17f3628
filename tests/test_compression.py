"""The recording and build encoders decode, with TFDS's own decoders, to exactly the arrays given."""

import struct
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.tfds import compression

# Every filter, at the levels builds and recordings use and at others, with each library here.
ENCODERS = [compression.RECORDING, compression.BUILD] + [
    compression.PngEncoder(library, level, scanline_filter)
    for library, level in (('isal', 0), ('isal', 3), ('zlib', 1), ('zlib', 9))
    for scanline_filter in ('none', 'sub', 'up')]


@settings(max_examples=40, deadline=None)
@given(height=st.integers(1, 40), width=st.integers(1, 40), channels=st.sampled_from([1, 3, 4]),
       dtype=st.sampled_from([np.uint8, np.uint16]), seed=st.integers(0, 2**16))
def test_png_round_trips_through_tfds_image_decoder(height, width, channels, dtype, seed):
  rng = np.random.default_rng(seed)
  image = rng.integers(0, np.iinfo(dtype).max, size=(height, width, channels), dtype=dtype,
                       endpoint=True)
  if seed % 2:  # Flat regions too, where deflate finds long matches.
    image[:, : width // 2] = image[0, 0]
  feature = tfds.features.Image(shape=(height, width, channels), dtype=dtype)
  decoded = feature.decode_example(compression.png_bytes(image)).numpy()
  assert decoded.dtype == dtype
  np.testing.assert_array_equal(decoded, image)


@settings(max_examples=60, deadline=None)
@given(height=st.integers(1, 24), width=st.integers(1, 24), channels=st.sampled_from([1, 3, 4]),
       dtype=st.sampled_from([np.uint8, np.uint16]), encoder=st.sampled_from(ENCODERS),
       seed=st.integers(0, 2**16))
def test_every_encoder_round_trips_a_column_through_tfds_image_decoder(
    height, width, channels, dtype, encoder, seed):
  rng = np.random.default_rng(seed)
  images = rng.integers(0, np.iinfo(dtype).max, size=(3, height, width, channels), dtype=dtype,
                        endpoint=True)
  images[1] = images[1, :1]  # Equal rows (what UP turns into zeros) and, below, equal pixels
  images[2, :, width // 2:] = images[2, :, :1]  # (what SUB does): wrap-around both ways.
  feature = tfds.features.Image(shape=(height, width, channels), dtype=dtype)
  for png, image in zip(compression.png_rows(images, encoder), images):
    decoded = feature.decode_example(png).numpy()
    assert decoded.dtype == dtype
    np.testing.assert_array_equal(decoded, image)


def _scanlines(png: bytes, row_bytes: int) -> np.ndarray:
  """The inflated IDAT of one of our PNGs: [height, 1 + row bytes], filter byte first."""
  length, kind = struct.unpack('>I4s', png[33:41])
  assert kind == b'IDAT'
  return np.frombuffer(zlib.decompress(png[41:41 + length]), np.uint8).reshape(-1, 1 + row_bytes)


@pytest.mark.parametrize('dtype,channels', [(np.uint8, 1), (np.uint16, 3)])
def test_filters_are_the_png_filters_they_declare(dtype, channels):
  image = np.random.default_rng(3).integers(0, 5000, size=(6, 5, channels)).astype(dtype)
  raw = image.astype(np.dtype(dtype).newbyteorder('>')).view(np.uint8).reshape(6, -1)
  pixel = channels * np.dtype(dtype).itemsize
  left = np.pad(raw, ((0, 0), (pixel, 0)))[:, :-pixel]
  above = np.pad(raw, ((1, 0), (0, 0)))[:-1]
  for name, expected in (('none', raw), ('sub', raw - left), ('up', raw - above)):
    encoder = compression.PngEncoder('isal', 1, name)
    lines = _scanlines(compression.png_rows(image[None], encoder)[0], raw.shape[1])
    assert (lines[:, 0] == compression.FILTERS[name]).all()
    np.testing.assert_array_equal(lines[:, 1:], expected)


@pytest.mark.parametrize('settings_', [dict(level=4), dict(library='isal', level=-1),
                                       dict(library='lz4', level=1),
                                       dict(scanline_filter='paeth')])
def test_png_encoder_refuses_settings_it_does_not_have(settings_):
  with pytest.raises(errors.InvalidValueError, match='PNG encoder'):
    compression.PngEncoder(**settings_)


def test_libdeflate_without_its_package_is_refused_when_set(monkeypatch):
  real_find_spec = compression.importlib.util.find_spec
  monkeypatch.setattr(compression.importlib.util, 'find_spec',
                      lambda name, *a: None if name == 'deflate' else real_find_spec(name, *a))
  with pytest.raises(errors.InvalidValueError, match='pip install deflate'):
    compression.PngEncoder('libdeflate', 1)


def test_libdeflate_pngs_decode_exactly_when_installed():
  pytest.importorskip('deflate')
  images = np.random.default_rng(2).integers(0, 9, size=(4, 7, 6, 3)).astype(np.uint8)
  pngs = compression.png_rows(images, compression.PngEncoder('libdeflate', 6, 'up'))
  for png, image in zip(pngs, images):
    np.testing.assert_array_equal(tf_decode(png), image)


def tf_decode(png: bytes) -> np.ndarray:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return tf.io.decode_png(png).numpy()


@pytest.mark.parametrize('bad', [np.zeros((4, 4), np.uint8), np.zeros((4, 4, 2), np.uint8),
                                 np.zeros((4, 4, 3), np.float32), np.zeros((0, 4, 3), np.uint8)])
def test_png_refuses_what_it_cannot_store(bad):
  with pytest.raises(errors.InvalidValueError, match='PNG needs'):
    compression.png_bytes(bad)


def test_zlib_bytes_is_a_zlib_stream_of_the_array():
  array = np.arange(60, dtype=np.int32).reshape(3, 4, 5)[:, ::2]  # Not contiguous.
  restored = np.frombuffer(zlib.decompress(compression.zlib_bytes(array)), np.int32)
  np.testing.assert_array_equal(restored.reshape(array.shape), array)


@pytest.mark.parametrize('dtype,channels', [(np.uint8, 1), (np.uint8, 3), (np.uint16, 4)])
def test_png_rows_are_png_bytes_of_each_image(dtype, channels):
  images = np.random.default_rng(1).integers(0, 200, size=(5, 7, 6, channels)).astype(dtype)
  images[2] = 0
  assert compression.png_rows(images) == [compression.png_bytes(image) for image in images]
  assert compression.png_rows(images[:0]) == []


def test_png_rows_refuses_what_png_bytes_refuses():
  with pytest.raises(errors.InvalidValueError, match='PNG needs'):
    compression.png_rows(np.zeros((3, 4, 4, 2), np.uint8))


def test_zlib_rows_are_zlib_streams_of_each_row():
  rows = np.arange(120, dtype=np.int32).reshape(3, 4, 10)[:, :, ::2]  # Not contiguous.
  restored = [np.frombuffer(zlib.decompress(item), np.int32) for item in compression.zlib_rows(rows)]
  np.testing.assert_array_equal(np.stack(restored).reshape(rows.shape), rows)
  assert compression.zlib_rows(rows[:0]) == []
