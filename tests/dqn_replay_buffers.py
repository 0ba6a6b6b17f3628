"""Simulated dopamine circular buffers for the DQN Replay reader tests: rows at
`add_count % capacity`, stack_size - 1 zero rows before each episode, np.save'd gzip logs under a
logging schedule, and the episodes such a stream holds."""

import gzip
import pathlib

import numpy as np

from rlds_suite.readers import dqn_replay

LENGTHS = [5, 17, 30, 2, 41, 9, 12, 33, 1, 26, 8, 40, 3, 19]


def stream(lengths, terminal_last=True):
  """The add stream of episodes of `lengths` steps: (observation, action, reward, terminal) rows
  and each episode's (first step's add index, steps)."""
  rows, spans = [], []
  step = 0
  for length in lengths:
    rows += [(np.zeros(2, np.uint8), 0, 0.0, 0)] * (dqn_replay.STACK_SIZE - 1)
    spans.append((len(rows), length))
    for t in range(length):
      step += 1
      obs = np.array([step % 251 + 1, step // 251], np.uint8)
      rows.append((obs, step % 5, float(t % 3 - 1), int(t == length - 1 and terminal_last)))
  return rows, spans


def log(directory: pathlib.Path, rows, capacity: int, log_after: set, final: bool = False):
  """Replays `rows` into a circular buffer, saving it after the adds in `log_after` (add counts),
  and, with `final`, once more at the end with the cursor as add count (batch_rl's last log)."""
  directory.mkdir(parents=True, exist_ok=True)
  store = {'observation': np.zeros((capacity, 2), np.uint8), 'action': np.zeros(capacity, np.int32),
           'reward': np.zeros(capacity, np.float32), 'terminal': np.zeros(capacity, np.uint8)}
  checkpoint = 0

  def save(add_count):
    nonlocal checkpoint
    for field, array in store.items():
      with gzip.open(dqn_replay.store_file(directory, field, checkpoint), 'wb') as f:
        np.save(f, array)
    with gzip.open(dqn_replay.add_count_file(directory, checkpoint), 'wb') as f:
      np.save(f, np.array(add_count))
    checkpoint += 1

  for add, row in enumerate(rows):
    for field, value in zip(store, row):
      store[field][add % capacity] = value
    if add + 1 in log_after:
      save(add + 1)
  if final:
    save(len(rows) % capacity)


def summary(trajectories):
  return sorted((t.metadata['first_add_index'], len(t.rewards), t.ending.value,
                 int(t.observations[0][0])) for t in trajectories)


def expected(rows, spans, first_add=0, stop_add=None, cut_at=None):
  """Episodes whose first step lies in [first_add, stop_add), cut short (truncated) at `cut_at`."""
  out = []
  for start, length in spans:
    if start < first_add or (stop_add is not None and start >= stop_add):
      continue
    ending = 'truncated' if length >= dqn_replay.TIME_LIMIT else 'terminated'
    if cut_at is not None and start < cut_at < start + length:
      length, ending = cut_at - start, 'truncated'
    out.append((start, length, ending, int(rows[start][0][0])))
  return sorted(out)
