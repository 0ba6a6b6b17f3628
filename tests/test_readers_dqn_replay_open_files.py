"""dqn_replay_spans.SpanReader holds open only the checkpoint files the rows still to come are in:
each checkpoint's four open gzip streams keep ~6 MiB of buffers (a 1 MiB BufferedReader, ISA-L's
512 KiB input chunk and its inflate state, per field), so a reader that kept every file it had read
open grew by that much per checkpoint over a build (a 5x1M-row DQN Replay build: +23 MiB RSS from
the first third to the last). Spans come in add order; one that goes back reopens the file."""

import os
import pathlib

import pytest

from rlds_suite.readers import dqn_replay
from rlds_suite.readers import dqn_replay_spans
from tests import dqn_replay_buffers as buffers

pytestmark = pytest.mark.skipif(not os.path.isdir('/proc/self/fd'), reason='needs /proc/self/fd')

ROWS, _ = buffers.stream(buffers.LENGTHS)
CAPACITY = 50
LOG_AFTER = {a for a in range(1, len(ROWS) + 1) if a % CAPACITY == CAPACITY - 1}  # batch_rl's.


def _open_checkpoints(replay_logs: pathlib.Path) -> set[int]:
  """The checkpoints whose store files this process has open."""
  found = set()
  for fd in os.listdir('/proc/self/fd'):
    try:
      target = pathlib.Path(os.readlink(f'/proc/self/fd/{fd}'))
    except OSError:
      continue
    if target.parent == replay_logs and target.name.startswith('$store$_'):
      found.add(int(target.name.split('ckpt.')[1].split('.')[0]))
  return found


def _checkpoints_of(run: dqn_replay.Run, span: dqn_replay_spans.Span) -> set[int]:
  return {k for k in run.available
          if run.layout(k).first_add < span.end_add and span.first_add < run.layout(k).add_count}


def test_files_of_checkpoints_passed_are_closed(tmp_path):
  buffers.log(tmp_path, ROWS, CAPACITY, LOG_AFTER, final=True)
  logs = tmp_path.resolve()
  run = dqn_replay.Run(logs)
  spans = dqn_replay_spans.episode_spans(run)
  assert len(run.available) >= 4
  held = []
  with dqn_replay_spans.SpanReader(run) as reader:
    for span in spans:
      reader.rows(span)
      held.append(_open_checkpoints(logs))
      # At most the span's own checkpoints (the last, where the next span starts, stays open).
      assert held[-1] <= _checkpoints_of(run, span), (span, held[-1])
  assert _open_checkpoints(logs) == set()
  assert max(len(h) for h in held) == 1  # A file the next span may read on in, and no other.


def test_a_span_before_the_files_in_use_reopens_them(tmp_path):
  """Going back (a work item read again, an out-of-order caller) reopens a closed checkpoint."""
  buffers.log(tmp_path, ROWS, CAPACITY, LOG_AFTER, final=True)
  run = dqn_replay.Run(tmp_path)
  spans = dqn_replay_spans.episode_spans(run)
  with dqn_replay_spans.SpanReader(run) as reader:
    forward = [reader.rows(span) for span in spans]
    back = [reader.rows(span) for span in (spans[0], spans[-1], spans[1])]
  for got, want in zip(back, (forward[0], forward[-1], forward[1])):
    assert got.first_add == want.first_add
    assert (got.observation == want.observation).all() and (got.reward == want.reward).all()
