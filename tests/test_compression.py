"""The recording encoders decode, with TFDS's own decoders, to exactly the arrays given."""

import zlib

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.tfds import compression


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
