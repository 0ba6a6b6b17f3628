"""Streams torn down and left open at interpreter exit: no hang with a Python decode in flight."""

import os
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from rlds_suite.core import episodes
from rlds_suite.streams import iterator_exit
from rlds_suite.tfds import features
from rlds_suite.tfds import writing

SHAPE = (84, 84, 4)

# A stream's tf.data exit left open at exit while a ZLIB decode, slowed once a batch is out (the
# GIL released), is in flight. (Its numpy exit did not hang so: not tested, a second TF import.)
_EXIT_WITH_A_DECODE_IN_FLIGHT = '''
import sys, threading, time
from rlds_suite import streams
from rlds_suite.streams import frames
slowed, lock, inflate, slow = [0], threading.Lock(), frames._inflate_rows, threading.Event()

def slow_inflate(*args, **kwargs):
  if slow.is_set():
    with lock:
      slowed[0] += 1
    time.sleep(1)
  return inflate(*args, **kwargs)

frames._inflate_rows = slow_inflate
stream = streams.stream([sys.argv[1]], batch_size=2, seed=0)
batches = iter(stream.dataset)
next(batches)
slow.set()
deadline = time.monotonic() + 60
while not slowed[0] and time.monotonic() < deadline:
  time.sleep(0.01)
assert slowed[0], 'no decode in flight'
print('exiting', flush=True)
'''

# The same for a cached stream's tf.data exit: its blocks are drawn by a Python function mapped
# over Dataset.range (streams.row_blocks), slowed once a batch is out. (2 of 10 such exits hung,
# unslowed, before the release was registered there.) Batches are taken eagerly, or by a
# tf.function that closes over the iterator and so holds its resource handle to the end (issue
# #21's training loop: that exit hung every time while only the iterator's reference was dropped).
_EXIT_WITH_A_CACHED_BLOCK_IN_FLIGHT = '''
import sys, threading, time
import tensorflow as tf
from rlds_suite import streams
from rlds_suite.streams import row_blocks
slowed, draw, slow = [0], row_blocks.RowBlocks.__call__, threading.Event()

def slow_draw(self, block):
  if slow.is_set():
    slowed[0] += 1
    time.sleep(1)
  return draw(self, block)

row_blocks.RowBlocks.__call__ = slow_draw
stream = streams.stream([sys.argv[1]], batch_size=2, seed=0, cache_dir=sys.argv[2])
batches = iter(stream.dataset)
take = (lambda: next(batches)) if sys.argv[3] == 'eager' else tf.function(batches.get_next)
take()
slow.set()
while not slowed[0]:  # Blocks drawn ahead are taken until one is drawn slowly; more follow it.
  take()
print('exiting', flush=True)
'''


def _frames_dataset(tmp_path) -> str:
  rng = np.random.default_rng(0)
  eps = [episodes.to_episode(episodes.Trajectory(
      observations=rng.integers(0, 4, size=(6,) + SHAPE, dtype=np.uint8),
      actions=np.zeros((6, 2), np.float32), rewards=np.zeros(6, np.float32),
      ending=episodes.Ending.TRUNCATED)) for _ in range(4)]
  feature_dict = features.rlds_features(observation=features.tensor(SHAPE, np.uint8),
                                        action=features.tensor((2,), np.float32))
  return writing.write_episodes(eps, features=feature_dict, data_dir=tmp_path, name='frames')


def _run_child(script: str, *args: str) -> subprocess.CompletedProcess:
  """`script` run by a fresh Python with `args`, its output captured (90 s at most)."""
  return subprocess.run([sys.executable, '-c', script, *args], capture_output=True, text=True,
                        env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'}, timeout=90)


def test_exit_with_a_frame_decode_in_flight_does_not_hang(tmp_path):
  # Without the release at exit the iterator was destroyed during finalization, waiting forever
  # for a decode whose thread Python had ended.
  done = _run_child(_EXIT_WITH_A_DECODE_IN_FLIGHT, _frames_dataset(tmp_path))
  assert done.returncode == 0 and 'exiting' in done.stdout, done.stderr[-2000:]


def _python_calls_dataset(calls: list) -> tf.data.Dataset:
  """1000 elements, each made by a Python call that `calls` records."""
  return tf.data.Dataset.range(1000).map(
      lambda x: tf.numpy_function(lambda v: calls.append(v) or v, [x], tf.int64),
      num_parallel_calls=2).prefetch(2)


def test_a_released_iterator_ends_its_pipeline_and_raises_if_used():
  calls = []
  iterator = iter(_python_calls_dataset(calls))
  assert int(next(iterator)) == 0
  assert any(found is iterator for found in iterator_exit.live_iterators())
  assert iterator_exit.release([iterator]) == 1
  made = len(calls)
  assert made < 1000  # Cancelled, not drained.
  with pytest.raises(AttributeError):
    next(iterator)
  assert len(calls) == made and iterator_exit.release([iterator]) == 0


@pytest.mark.parametrize('taken_by', ['eager', 'tf.function'])
def test_exit_with_a_cached_block_in_flight_does_not_hang(tmp_path, taken_by):
  done = _run_child(_EXIT_WITH_A_CACHED_BLOCK_IN_FLIGHT, _frames_dataset(tmp_path),
                    str(tmp_path / 'cache'), taken_by)
  assert done.returncode == 0 and 'exiting' in done.stdout, done.stderr[-2000:]


@pytest.mark.parametrize('made_from', ['dataset', 'components'])
def test_a_released_iterator_ends_its_pipeline_for_a_tf_function_holding_its_handle(made_from):
  calls = []
  dataset = _python_calls_dataset(calls)
  iterator = iter(dataset)
  if made_from == 'components':  # As a tf.function returns one: no dataset to take a structure.
    iterator = type(iterator)(components=[iterator._iterator_resource],
                              element_spec=iterator.element_spec)
  take = tf.function(iterator.get_next)  # Captures the resource handle.
  assert int(take()) == 0
  assert iterator_exit.release([iterator]) == 1
  made = len(calls)
  with pytest.raises(tf.errors.OutOfRangeError):
    take()
  assert made < 1000 and len(calls) == made  # Cancelled and ended, not drained.


# A cached stream's numpy exit with its blocks drawn ahead by a worker process, left open at exit.
_EXIT_WITH_A_DRAW_WORKER = '''
import os, sys
from rlds_suite import streams
stream = streams.stream([sys.argv[1]], batch_size=2, seed=0, cache_dir=sys.argv[2])
batches = streams.as_numpy(stream, draw_worker=True)
next(batches)
workers = [p for p in os.listdir('/proc') if p.isdigit() and
           b'rlds_suite_block_draw' in open(f'/proc/{p}/cmdline', 'rb').read() and
           open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()[1] == str(os.getpid())]
print('exiting', *workers, flush=True)
'''


def test_exit_with_a_draw_worker_does_not_hang_and_ends_it(tmp_path):
  done = _run_child(_EXIT_WITH_A_DRAW_WORKER, _frames_dataset(tmp_path), str(tmp_path / 'cache'))
  assert done.returncode == 0 and 'exiting' in done.stdout, done.stderr[-2000:]
  assert 'Exception ignored' not in done.stderr and 'Traceback' not in done.stderr, done.stderr
  workers = done.stdout.split('exiting', 1)[1].split()
  assert workers  # It had one, which ends once its requests pipe closes with the process.
  deadline = time.monotonic() + 20
  while any(os.path.exists(f'/proc/{pid}') for pid in workers) and time.monotonic() < deadline:
    time.sleep(0.05)
  assert not any(os.path.exists(f'/proc/{pid}') for pid in workers)
