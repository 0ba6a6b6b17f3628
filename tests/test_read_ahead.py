"""core.read_ahead: the items in order, the producer's errors in order, an early stop ends it."""

import threading

import pytest

from rlds_suite.core import read_ahead


def test_items_in_order_and_errors_where_they_happened():
  def items():
    yield from range(10)
    raise ValueError('broken at 10')

  got = []
  with pytest.raises(ValueError, match='broken at 10'):
    for item in read_ahead.read_ahead(items(), depth=2):
      got.append(item)
  assert got == list(range(10))


def test_stopping_early_ends_the_producer_thread():
  produced = []

  def items():
    for i in range(1000):
      produced.append(i)
      yield i

  iterator = read_ahead.read_ahead(items(), depth=3, name='test-read-ahead')
  assert [next(iterator) for _ in range(5)] == [0, 1, 2, 3, 4]
  iterator.close()
  assert not any(t.name == 'test-read-ahead' for t in threading.enumerate())
  assert len(produced) < 1000
