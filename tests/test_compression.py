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
