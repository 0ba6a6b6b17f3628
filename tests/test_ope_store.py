"""ope.transition_store: rows written once come back whole, shuffled, a bounded block at a time."""

import collections

import numpy as np
import pytest

from rlds_suite.ope import transition_store


def _store(tmp_path, rows=10, chunks=(4, 3, 3)):
  store = transition_store.TransitionStore(str(tmp_path))
  ids = np.arange(rows)
  start = 0
  for size in chunks:
    part = ids[start:start + size]
    store.append({'observation': np.stack([part, -part], -1).astype(np.float32),
                  'action': part.astype(np.int64), 'infos/x': (part * 0.5).astype(np.float64)})
    start += size
  store.seal()
  return store


def test_read_returns_the_rows_appended(tmp_path):
  store = _store(tmp_path)
  assert store.rows == 10 and store.row_bytes == 2 * 4 + 8 + 8
  rows = store.read(3, 7)
  np.testing.assert_array_equal(rows['action'], [3, 4, 5, 6])
  np.testing.assert_array_equal(rows['observation'], [[3, -3], [4, -4], [5, -5], [6, -6]])
  assert rows['observation'].dtype == np.float32
  np.testing.assert_array_equal(rows['infos/x'], [1.5, 2.0, 2.5, 3.0])


def test_every_pass_serves_each_row_once_in_a_new_order_one_block_at_a_time(tmp_path, monkeypatch):
  store = _store(tmp_path)
  reads = []
  read = store.read
  monkeypatch.setattr(store, 'read', lambda a, b: reads.append(b - a) or read(a, b))
  # Blocks of 4 rows (96 bytes / 24 per row); batches of 3 carry a block's leftover into the next.
  batches = store.batches(3, seed=0, block_bytes=96)
  drawn = [next(batches) for _ in range(10)]  # 30 rows: three passes over the 10
  for b in drawn:
    np.testing.assert_array_equal(b['observation'][:, 0], b['action'])  # rows stay whole
    np.testing.assert_array_equal(b['infos/x'], b['action'] * 0.5)
  ids = np.concatenate([b['action'] for b in drawn])
  assert collections.Counter(ids.tolist()) == {i: 3 for i in range(10)}
  assert max(reads) <= 4
  assert not np.array_equal(ids[:9], ids[10:19])  # a new order each pass


def test_a_store_smaller_than_a_batch_serves_all_its_rows(tmp_path):
  batch = next(_store(tmp_path).batches(64))
  np.testing.assert_array_equal(np.sort(batch['action']), np.arange(10))


def test_mismatched_batches_are_refused(tmp_path):
  store = transition_store.TransitionStore(str(tmp_path))
  store.append({'a': np.zeros((2, 3)), 'b': np.zeros(2)})
  with pytest.raises(ValueError, match=r"fields \['a'\] are not the store's \['a', 'b'\]"):
    store.append({'a': np.zeros((2, 3))})
  with pytest.raises(ValueError, match=r'field a has rows of shape \(4,\), the store \(3,\)'):
    store.append({'a': np.zeros((2, 4)), 'b': np.zeros(2)})
  with pytest.raises(ValueError, match='seal the store before reading'):
    store.read(0, 1)
