"""A dataset's elements as numpy, read from its iterator's GetNext: what tfds.as_numpy yields."""

import collections

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_suite.streams import numpy_elements

Pair = collections.namedtuple('Pair', 'value flag')


def _assert_same(got, expected):
  assert tf.nest.map_structure(lambda g, e: (type(g), getattr(g, 'dtype', None)), got, expected) \
      == tf.nest.map_structure(lambda e: (type(e), getattr(e, 'dtype', None)), expected)
  tf.nest.map_structure(np.testing.assert_array_equal, got, expected)


def test_nested_elements_as_tfds_as_numpy_gives_them():
  element = ({'zeta': tf.range(3), 'alpha': {'text': tf.constant([b'x', b'yy']),
                                             'image': tf.ones([2, 2], tf.uint8)}},
             tf.constant(5), (tf.zeros([1]), Pair(tf.constant(1.5), tf.constant(True))))
  dataset = tf.data.Dataset.from_tensors(element).repeat(3).enumerate()
  got, expected = list(numpy_elements.numpy_elements(dataset)), list(tfds.as_numpy(dataset))
  assert len(got) == len(expected) == 3
  for g, e in zip(got, expected):
    _assert_same(g, e)
    assert list(g[1][0]) == ['zeta', 'alpha'] and list(g[1][0]['alpha']) == ['text', 'image']
    assert isinstance(g[1][2][1], Pair)


def test_ragged_elements_through_tfds():
  dataset = tf.data.Dataset.from_tensors(tf.ragged.constant([[1, 2], [3]])).repeat(2)
  got = list(numpy_elements.numpy_elements(dataset))
  assert len(got) == 2
  assert [list(row) for row in got[0]] == [[1, 2], [3]]


def test_an_error_inside_the_pipeline_reaches_the_consumer():
  def checked(i):
    with tf.control_dependencies([tf.debugging.assert_less(i, tf.constant(2, tf.int64),
                                                           message='too big')]):
      return tf.identity(i)

  dataset = tf.data.Dataset.range(3).map(checked)
  elements = numpy_elements.numpy_elements(dataset)
  assert [next(elements), next(elements)] == [0, 1]
  with pytest.raises(tf.errors.InvalidArgumentError, match='too big'):
    next(elements)
