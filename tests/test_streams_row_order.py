"""Blocks permuted by XLA's compiled gather: the same rows as tf.gather, used only where it pays."""

import itertools

import numpy as np
import pytest
import tensorflow as tf

from rlds_suite import streams
from rlds_suite.streams import row_order

from tests import streams_data


def _block(rows: int) -> dict:
  rng = np.random.default_rng(0)
  return {'observation': {'state': tf.constant(rng.normal(size=(rows, 3)).astype(np.float32)),
                          'pixels': tf.constant(rng.integers(0, 255, (rows, 2, 2, 3), np.uint8))},
          'action': tf.constant(rng.integers(0, 9, rows)),
          'is_last': tf.constant(rng.random(rows) < 0.3),
          'instruction': tf.constant([f'row {i}'.encode() for i in range(rows)])}


@pytest.mark.parametrize('compiled', [True, False])
def test_rows_taken_in_order_as_tf_gather_takes_them(compiled):
  block = _block(37)
  order = tf.random.shuffle(tf.range(37, dtype=tf.int64), seed=1)
  expected = tf.nest.map_structure(lambda t: tf.gather(t, order).numpy(), block)
  in_graph = tf.function(lambda b, o: row_order.take_rows(b, o, compiled))(block, order)
  eager = row_order.take_rows(block, order, compiled)
  for got in (in_graph, eager):
    tf.nest.map_structure(np.testing.assert_array_equal,
                          tf.nest.map_structure(lambda t: t.numpy(), got), expected)


def test_compiled_only_for_small_units_with_room_in_the_budget(monkeypatch):
  probed = []
  monkeypatch.setattr(row_order, 'xla_available', lambda: probed.append(1) or True)
  room = row_order.COMPILER_BYTES
  assert row_order.worth_compiling(64, room)
  assert not row_order.worth_compiling(row_order.COMPILED_UNIT_BYTES + 1, room)
  assert not row_order.worth_compiling(64, room - 1)
  assert len(probed) == 1  # Not probed (nor its compiler loaded) where it would not be used.
  monkeypatch.setattr(row_order, 'xla_available', lambda: False)
  assert not row_order.worth_compiling(64, room)


def test_unshuffled_stream_does_not_load_xla(tmp_path, monkeypatch):
  directory = streams_data.write(tmp_path, 'set_a', streams_data.id_episodes(0, 3, seed=4))
  monkeypatch.setattr(row_order, 'xla_available', lambda: pytest.fail('XLA probed'))
  stream = streams.stream([directory], batch_size=4, shuffle=None)
  assert len(next(iter(streams.as_numpy(stream)))['observation']) == 4


def test_stream_batches_equal_with_and_without_the_compiled_gather(tmp_path, monkeypatch):
  directory = streams_data.write(tmp_path, 'set_a', streams_data.id_episodes(0, 9, seed=4))

  def batches(compiled):
    monkeypatch.setattr(row_order, 'worth_compiling', lambda *_: compiled)
    stream = streams.stream([directory], unit=streams.Transitions(), batch_size=8, seed=5,
                            shuffle=streams.Shuffle(4, 64))
    return (list(itertools.islice(streams.as_numpy(stream), 12)) +  # The numpy exit,
            list(streams.as_numpy(stream.take(12))))  # and the tf.data one.

  with_xla, without = batches(True), batches(False)
  assert len(with_xla) == len(without) == 24
  for a, b in zip(with_xla, without):
    tf.nest.map_structure(np.testing.assert_array_equal, a, b)
  ids = streams_data.ids(with_xla[0]['observation'])
  assert sorted(ids) != ids  # Shuffled, so the order taken matters.
