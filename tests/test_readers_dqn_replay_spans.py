"""rlds_suite.readers.dqn_replay_spans: episodes found from terminal files alone and read back in
work items give exactly `read_run`'s episodes, on the simulated buffers of tests/dqn_replay_buffers.py
(wrapped files, overlapping logs, skipped logs, checkpoint ranges, episodes longer than a
checkpoint)."""

import threading

import numpy as np
import pytest

from rlds_suite.core import episodes
from rlds_suite.core import fields
from rlds_suite.readers import dqn_replay
from rlds_suite.readers import dqn_replay_spans
from tests import dqn_replay_buffers as buffers


ROWS, _ = buffers.stream(buffers.LENGTHS)
SCHEDULES = {
    'batch_rl': (50, {a for a in range(1, len(ROWS) + 1) if a % 50 == 49}, True),
    'overlapping_and_longer_than_a_checkpoint': (60, {37, 74, 111, 148, 185, 222, 259, len(ROWS)},
                                                 False),
    'periodic': (50, {49, 99, 149, 199, 249, len(ROWS)}, False),
    'skipped_log': (50, {49, 159, 209, 259, len(ROWS)}, False),
}


@pytest.mark.parametrize('schedule', sorted(SCHEDULES))
@pytest.mark.parametrize('checkpoints', [None, [1], [2, 3]])
@pytest.mark.parametrize('num_items', [1, 50])
def test_work_items_read_the_episodes_read_run_reads(tmp_path, schedule, checkpoints, num_items):
  capacity, log_after, final = SCHEDULES[schedule]
  buffers.log(tmp_path, ROWS, capacity, log_after, final=final)
  run = dqn_replay.Run(tmp_path)
  if checkpoints and checkpoints[-1] not in run.available:
    pytest.skip('no such checkpoint in this schedule')
  spans = dqn_replay_spans.episode_spans(run, checkpoints)
  items = dqn_replay_spans.work_items(spans, num_items)
  assert [span for item in items for span in item] == spans
  assert 1 <= len(items) <= num_items
  found = [t for item in items
           for t in dqn_replay_spans.read_spans(str(tmp_path), item, checkpoints)]
  expected = list(dqn_replay.read_run(tmp_path, checkpoints, block_rows=7))
  summary = buffers.summary
  assert summary(found) == summary(expected)
  # Both paths give the episodes in time (add) order, an episode that crosses a checkpoint file
  # included.
  assert [_first(t) for t in found] == [_first(t) for t in expected]
  assert [_first(t) for t in expected] == sorted(_first(t) for t in expected)
  for got, want in zip(sorted(found, key=_first), sorted(expected, key=_first)):
    assert got.metadata == want.metadata
    assert (got.observations == want.observations).all() and (got.rewards == want.rewards).all()


def _first(trajectory):
  return trajectory.metadata['first_add_index']


@pytest.mark.parametrize('schedule', ['batch_rl', 'overlapping_and_longer_than_a_checkpoint'])
def test_episode_frames_reach_the_rlds_steps_uncopied(tmp_path, schedule):
  """Each episode's frames are inflated into one array with a spare row for the final (copied)
  frame, so to_episode's steps are a view of the reader's array, across checkpoint files and
  wrapped files too, and equal the steps of read_run's (joined, copied) episodes."""
  buffers.log(tmp_path, ROWS, *SCHEDULES[schedule])
  run = dqn_replay.Run(tmp_path)
  found = list(dqn_replay_spans.read_spans(str(tmp_path), dqn_replay_spans.episode_spans(run)))
  expected = list(dqn_replay.read_run(tmp_path, block_rows=7))
  assert len(found) == len(expected) > 5
  for got, want in zip(found, expected):
    steps = episodes.to_episode(got).steps
    assert np.shares_memory(steps[fields.OBSERVATION], got.observations)
    for key, value in episodes.to_episode(want).steps.items():
      np.testing.assert_array_equal(steps[key], value, err_msg=key)
      assert steps[key].dtype == value.dtype, key


def test_work_items_are_balanced_by_rows():
  spans = [dqn_replay_spans.Span(a, a + 10) for a in range(0, 1000, 10)]
  items = dqn_replay_spans.work_items(spans, 4)
  assert [sum(len(s) for s in item) for item in items] == [250, 250, 250, 250]


def test_a_long_episode_is_not_read_ahead(tmp_path, monkeypatch):
  """Episodes over AHEAD_BYTES are read in the caller's thread once it asks for them (nothing is
  read while the episode before is in use); shorter ones are read one ahead by a thread."""
  buffers.log(tmp_path, ROWS, *SCHEDULES['batch_rl'])
  spans = dqn_replay_spans.episode_spans(dqn_replay.Run(tmp_path))
  lengths = sorted({len(span) for span in spans})
  assert len(lengths) > 2
  monkeypatch.setattr(dqn_replay_spans, 'AHEAD_BYTES', lengths[-2] * dqn_replay_spans.ROW_BYTES)
  long = [index for index, span in enumerate(spans) if len(span) > lengths[-2]]
  assert long and len(long) < len(spans) - 1
  received, reads = [], {}
  rows = dqn_replay_spans.SpanReader.rows

  def recording_rows(self, span):
    in_caller = threading.current_thread() is threading.main_thread()
    reads[spans.index(span)] = (len(received), in_caller)
    return rows(self, span)

  monkeypatch.setattr(dqn_replay_spans.SpanReader, 'rows', recording_rows)
  for trajectory in dqn_replay_spans.read_spans(str(tmp_path), spans):
    received.append(trajectory)
  assert len(received) == len(spans) == len(reads)
  for index, (received_before, in_caller) in reads.items():
    if index in long:
      assert in_caller and received_before == index  # Asked for, and not before.
    else:
      assert not in_caller and received_before <= index
  assert buffers.summary(received) == buffers.summary(list(dqn_replay.read_run(tmp_path)))
