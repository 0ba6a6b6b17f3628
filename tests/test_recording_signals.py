"""Crash safety and pre-emption of RLDSWriter, with a real child process and real signals."""

import os
import signal
import time

import tensorflow_datasets as tfds

import rlds_suite
from tests.recording_helpers import read_episodes
from tests.recording_helpers import start_recording_child as _start


def _wait_for_episodes(directory, process, count, timeout=120):
  deadline = time.time() + timeout
  path = str(directory) + '.progress'
  while time.time() < deadline:
    assert process.poll() is None, process.stderr.read().decode()[-2000:]
    if os.path.exists(path) and open(path).read().count('episode') >= count:
      return
    time.sleep(0.05)
  raise AssertionError('child did not record in time')


def _wait_for_files(directory, process, count, timeout=60):
  deadline = time.time() + timeout
  while len(_data_files(directory)) < count:
    assert process.poll() is None and time.time() < deadline, 'child wrote no shards in time'
    time.sleep(0.05)


def _shard_lengths(directory):
  return list(tfds.builder_from_directory(os.fspath(directory)).info.splits['train'].shard_lengths)


def _data_files(directory):
  if not os.path.isdir(directory):  # Created when the writer thread writes the first episode.
    return []
  return sorted(f for f in os.listdir(directory) if '.tfrecord-' in f and not f.startswith('.'))


def test_sigkill_leaves_completed_shards_loadable(tmp_path):
  directory = tmp_path / 'ds'
  process = _start(directory, per_shard=2)
  _wait_for_episodes(directory, process, 6)  # Five episodes complete, one in flight.
  _wait_for_files(directory, process, 2)  # Episodes are written by a background thread.
  process.send_signal(signal.SIGKILL)
  process.wait()
  lengths = _shard_lengths(directory)
  assert len(lengths) >= 2 and set(lengths) == {2}
  assert len(_data_files(directory)) == len(lengths)  # Metadata agrees with the files.
  episodes = read_episodes(directory)
  assert len(episodes) == sum(lengths)
  for episode in episodes:  # Every completed episode is whole.
    assert len(episode['steps']['reward']) == 51 and episode['steps']['is_terminal'][-1]
  assert rlds_suite.validate(directory).ok
  # A new run appends to what the killed one left.
  process = _start(directory, per_shard=2)
  _wait_for_episodes(directory, process, sum(lengths) + 4 + 3)
  _wait_for_files(directory, process, len(lengths) + 1)  # Its first new shard is complete.
  process.send_signal(signal.SIGKILL)
  process.wait()
  assert len(_shard_lengths(directory)) > len(lengths)
  assert rlds_suite.validate(directory).ok


def test_sigterm_writes_the_episode_in_flight_as_truncated(tmp_path):
  directory = tmp_path / 'ds'
  process = _start(directory, per_shard=1000)  # Nothing would be on disk without the handler.
  _wait_for_episodes(directory, process, 3)
  time.sleep(0.01)
  process.send_signal(signal.SIGTERM)
  assert process.wait(timeout=60) == -signal.SIGTERM  # Terminates as SIGTERM would.
  episodes = read_episodes(directory)
  started = open(str(directory) + '.progress').read().count('episode')
  assert len(episodes) == started
  *complete, in_flight = episodes
  for episode in complete:
    assert episode['steps']['is_terminal'][-1] and len(episode['steps']['reward']) == 51
  assert not in_flight['steps']['is_terminal'][-1]  # Cut by the signal: truncated.
  assert 1 < len(in_flight['steps']['reward']) < 51
  assert in_flight['steps']['discount'].tolist() == [1.0] * len(in_flight['steps']['discount'])
  assert rlds_suite.validate(directory).ok


def test_sigusr1_checkpoints_and_keeps_recording(tmp_path):
  directory = tmp_path / 'ds'
  process = _start(directory, per_shard=1000)
  _wait_for_episodes(directory, process, 3)
  process.send_signal(signal.SIGUSR1)
  deadline = time.time() + 60
  # The shard is renamed into place, then the metadata naming it is rewritten: wait for both.
  while not (_data_files(directory) and _shard_lengths(directory)) and time.time() < deadline:
    time.sleep(0.05)
  checkpointed = _shard_lengths(directory)
  assert len(checkpointed) == 1 and checkpointed[0] >= 2  # Completed episodes only.
  started = open(str(directory) + '.progress').read().count('episode')
  _wait_for_episodes(directory, process, started + 1)  # Still recording.
  process.send_signal(signal.SIGKILL)
  process.wait()
  assert _shard_lengths(directory) == checkpointed
  assert rlds_suite.validate(directory).ok
