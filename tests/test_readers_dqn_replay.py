"""rlds_suite.readers.dqn_replay on simulated circular buffers, against the stream they logged.

The builder's test reads files written by dopamine itself; these simulate dopamine's buffer (rows at
`add_count % capacity`, stack_size - 1 zero rows before each episode, np.save'd gzip logs) under
several logging schedules to check the add-order reconstruction, the checkpoint-range rule and the
parallel (edges / join) path against the sequential one.
"""

import gzip

import numpy as np
import pytest

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.readers import dqn_replay
from rlds_suite.readers import gzip_npy
from tests import dqn_replay_buffers as buffers




def test_batch_rl_logging_rule(tmp_path):
  rows, spans = buffers.stream(buffers.LENGTHS)
  capacity = 50
  buffers.log(tmp_path, rows, capacity, {a for a in range(1, len(rows) + 1) if a % capacity == capacity - 1},
       final=True)
  expected = buffers.expected(rows, spans)
  assert buffers.summary(dqn_replay.read_run(tmp_path, block_rows=7)) == expected


def test_periodic_checkpoints_overlap_and_wrap(tmp_path):
  """dopamine's own save() at arbitrary add counts: rows already logged are not read twice. The
  41-step episode outlasts a checkpoint's 37 new rows: read in one pass it is whole (the Beam
  path's spans, tests/test_readers_dqn_replay_spans.py, too)."""
  rows, spans = buffers.stream(buffers.LENGTHS)
  buffers.log(tmp_path, rows, 60, {37, 74, 111, 148, 185, 222, 259, len(rows)})
  assert buffers.summary(dqn_replay.read_run(tmp_path, block_rows=5)) == buffers.expected(rows, spans)


def test_checkpoint_range_holds_episodes_starting_in_it(tmp_path):
  rows, spans = buffers.stream(buffers.LENGTHS)
  logs = sorted({49, 99, 149, 199, 249, len(rows)})
  buffers.log(tmp_path, rows, 50, set(logs))
  # Checkpoint 2 holds add indices [99, 149); its last episode is read on into checkpoint 3.
  expected = buffers.expected(rows, spans, first_add=99, stop_add=149)
  assert buffers.summary(dqn_replay.read_run(tmp_path, [2])) == expected


def test_a_skipped_log_ends_the_episode_in_flight(tmp_path, caplog):
  rows, spans = buffers.stream(buffers.LENGTHS)
  # The log after add 99 is missing: adds 49-108 are overwritten before checkpoint 1 (at 159).
  buffers.log(tmp_path, rows, 50, {49, 159, 209, 259, len(rows)})
  got = buffers.summary(dqn_replay.read_run(tmp_path))
  lost_from, lost_to = 49, 159 - 50  # Add indices never logged.
  assert 'never logged' in caplog.text
  # The episode in flight at add 49 ends there; those starting in the lost rows, and the rows after
  # them up to the first episode end (an episode whose start was lost), are missing.
  first_after = min(a for a, row in enumerate(rows) if a >= lost_to and row[3]) + 1
  kept = [e for e in buffers.expected(rows, spans, cut_at=lost_from)
          if e[0] < lost_from or e[0] >= first_after]
  assert got == kept


def test_time_limit_is_a_truncation():
  policy = dqn_replay.POLICY
  assert policy.ending(dqn_replay.TIME_LIMIT, terminal_flag=True) is episodes.Ending.TRUNCATED
  assert policy.ending(dqn_replay.TIME_LIMIT - 1, terminal_flag=True) is episodes.Ending.TERMINATED


def test_padding_rows_must_be_zero():
  observations = np.ones((5, 2), np.uint8)
  with pytest.raises(errors.EpisodeBoundaryError, match='zero padding'):
    dqn_replay.POLICY.trajectory(observations, np.zeros(5), np.zeros(5), terminal_flag=True)


def test_gzip_npy_rows_stream_and_truncation(tmp_path):
  array = np.arange(1000 * 6, dtype=np.int32).reshape(1000, 2, 3)
  path = tmp_path / 'a.gz'
  with gzip.open(path, 'wb') as f:
    np.save(f, array)
  with gzip_npy.GzipNpyRows(path) as rows:
    assert (rows.num_rows, rows.row_shape) == (1000, (2, 3))
    first = rows.read(300)
    rows.skip(200)
    np.testing.assert_array_equal(np.concatenate([first, rows.read(10_000)]),
                                  np.concatenate([array[:300], array[500:]]))
  data = path.read_bytes()
  path.write_bytes(data[:len(data) // 2])
  with pytest.raises(errors.CorruptFileError, match=str(path)):
    with gzip_npy.GzipNpyRows(path) as rows:
      rows.read(1000)


def test_gzip_npy_rows_read_into_a_given_array(tmp_path):
  """read_into fills a slice of the caller's array in place; rows of another dtype or shape than
  the array's (a checkpoint unlike the ones before) are a SchemaError naming the file."""
  array = np.arange(1000 * 6, dtype=np.int32).reshape(1000, 2, 3)
  path = tmp_path / 'a.gz'
  with gzip.open(path, 'wb') as f:
    np.save(f, array)
  out = np.full((1001, 2, 3), -1, dtype=np.int32)
  with gzip_npy.GzipNpyRows(path) as rows:
    rows.read_into(out[:400])
    rows.read_into(out[400:1000])
    assert rows.position == 1000
  np.testing.assert_array_equal(out[:1000], array)
  assert (out[1000] == -1).all()
  with gzip_npy.GzipNpyRows(path, field='action') as rows:
    with pytest.raises(errors.SchemaError, match=f'{path}.*action.*int64'):
      rows.read_into(np.empty((5, 2, 3), dtype=np.int64))
    with pytest.raises(errors.SchemaError, match='int32 \\[2, 3\\]'):
      rows.read_into(np.empty((5, 3, 2), dtype=np.int32))
    with pytest.raises(ValueError, match='at most 1000 rows'):
      rows.read_into(np.empty((1001, 2, 3), dtype=np.int32))


@pytest.mark.parametrize('private_reader', [True, False])
def test_gzip_stream_reads_the_same_with_or_without_isal_private_reader(
    tmp_path, monkeypatch, private_reader):
  """files.gzip_stream reads through isal's private _GzipReader when the release has it, and
  through igzip.GzipFile otherwise: the same bytes, and a damaged CRC is refused either way."""
  from rlds_suite.readers import files  # pylint: disable=g-import-not-at-top
  assert files._ISAL_GZIP_READER is not None  # pylint: disable=protected-access
  if not private_reader:
    monkeypatch.setattr(files, '_ISAL_GZIP_READER', None)
  data = np.random.default_rng(0).integers(0, 4, 3 << 20, dtype=np.uint8).tobytes()
  path = tmp_path / 'rows.gz'
  path.write_bytes(gzip.compress(data, 1))
  with files.gzip_stream(path) as f:
    assert f.read() == data
  damaged = bytearray(path.read_bytes())
  damaged[-8] ^= 0xFF  # The CRC-32.
  path.write_bytes(bytes(damaged))
  with pytest.raises(errors.CorruptFileError, match='rows.gz'):
    with files.gzip_stream(path) as f:
      f.read()
