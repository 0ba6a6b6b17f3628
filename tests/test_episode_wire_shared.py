"""episode_wire.SharedBatches: batches sent to pool workers through shared memory come back as
TFRecord frames in the same blocks, of the same records as `serialize`, checksummed; they fall
back to pickling when shared memory has no room, and leave no block behind."""

import concurrent.futures
import dataclasses
import multiprocessing
import os

import pytest

from rlds_suite.tfds import compression
from rlds_suite.tfds import episode_wire
from rlds_suite.tfds import tfrecord_files
from rlds_suite.tfds import writing

from tests import build_helpers


@pytest.fixture(scope='module')
def batch():
  plan = writing.plan_of(build_helpers.Counting(data_dir='/nonexistent').info.features)
  episodes = [writing.flat_episode(plan, build_helpers.episode(length, index))
              for index, length in enumerate([3, 1, 7, 2])]
  return plan, episodes


@pytest.fixture(scope='module')
def pool():
  with concurrent.futures.ProcessPoolExecutor(
      1, mp_context=multiprocessing.get_context('spawn'),
      initializer=episode_wire.worker_init) as executor:
    yield executor


def _blocks(shared):
  return set(shared._blocks)  # pylint: disable=protected-access


def _written(submitted, path):
  """(the records of a submitted batch as the writer writes them, read back with their CRCs
  checked; whether they came as frames in shared memory)."""
  writer = tfrecord_files.RecordWriter(path)
  framed = False
  for item in submitted.records():
    if isinstance(item, tfrecord_files.Frames):
      framed = True
      writer.write_frames(item)
    else:
      writer.write(item)
  del item
  writer.close()
  return list(tfrecord_files.read_records(path)), framed


def test_shared_batches_serialize_like_serialize_and_reuse_blocks(batch, pool, tmp_path):
  plan, episodes = batch
  shared = episode_wire.SharedBatches()
  try:
    expected = episode_wire.serialize(plan, episodes)
    first = shared.submit(pool, plan, episodes)
    assert _written(first, tmp_path / 'a') == (expected, True)
    names = _blocks(shared)
    assert len(names) == 1 and all(os.path.exists(f'/dev/shm/{n.lstrip("/")}') for n in names)
    assert _written(shared.submit(pool, plan, episodes[1:3]), tmp_path / 'b') == (
        expected[1:3], True)
    assert _blocks(shared) == names  # The freed block is used again.
  finally:
    shared.close()
  assert not any(os.path.exists(f'/dev/shm/{n.lstrip("/")}') for n in names)


def test_without_room_in_shared_memory_the_batch_is_pickled(batch, pool, monkeypatch, tmp_path):
  plan, episodes = batch
  monkeypatch.setattr(episode_wire, '_SHM_DIR', '/nonexistent-shm')
  shared = episode_wire.SharedBatches()
  try:
    assert _written(shared.submit(pool, plan, episodes), tmp_path / 'a') == (
        episode_wire.serialize(plan, episodes), False)
    assert not _blocks(shared)
  finally:
    shared.close()


def test_records_outgrowing_their_room_come_back_pickled(batch, pool, monkeypatch, tmp_path):
  plan, episodes = batch
  pack = episode_wire.SharedBatches._pack  # pylint: disable=protected-access

  def little_room(self, *args):
    packed = pack(self, *args)
    return dataclasses.replace(packed, out=(packed.out[0], 100))  # Less than one frame.

  monkeypatch.setattr(episode_wire.SharedBatches, '_pack', little_room)
  shared = episode_wire.SharedBatches()
  try:
    assert _written(shared.submit(pool, plan, episodes), tmp_path / 'a') == (
        episode_wire.serialize(plan, episodes), False)
    assert _blocks(shared)  # The columns went through shared memory.
  finally:
    shared.close()


@pytest.mark.parametrize('room', [True, False])
def test_workers_encode_pngs_as_the_writer_is_set(batch, pool, monkeypatch, room, tmp_path):
  """A spawned worker has its own episode_wire: the writer's png_encoder travels with the batch,
  in shared memory or pickled."""
  plan, episodes = batch
  assert any(leaf.kind == episode_wire.PNG for leaf in plan)
  setting = compression.PngEncoder('isal', 1, 'up')  # Not the default: other bytes.
  assert (episode_wire.serialize(plan, episodes, setting) !=
          episode_wire.serialize(plan, episodes, compression.BUILD))
  monkeypatch.setattr(episode_wire, 'png_encoder', setting)
  if not room:
    monkeypatch.setattr(episode_wire, '_SHM_DIR', '/nonexistent-shm')
  shared = episode_wire.SharedBatches()
  try:
    assert (_written(shared.submit(pool, plan, episodes), tmp_path / 'a')[0] ==
            episode_wire.serialize(plan, episodes, setting) ==
            episode_wire.serialize(plan, episodes))
  finally:
    shared.close()


def test_a_batch_larger_than_a_block_is_serialized_here_and_blocks_stay_bounded(
    batch, pool, monkeypatch, tmp_path):
  """A long episode's batch (issue 17: a 27,000-step Atari episode, 190 MiB of frames) no longer
  leaves a block of its size, rounded up to a power of two, in place for the rest of the build:
  it is serialized by the caller from its own arrays, and the blocks stay at most MAX_BLOCK."""
  # pylint: disable=protected-access
  plan, episodes = batch
  small = episodes[:1]
  monkeypatch.setattr(episode_wire, '_ROOM_MIN', 64)
  monkeypatch.setattr(episode_wire, '_MIN_BLOCK', 64)
  cap = 1 << (episode_wire._block_bytes(episode_wire._step_bytes(plan, small)) - 1).bit_length()
  assert episode_wire._block_bytes(episode_wire._step_bytes(plan, episodes)) > cap
  monkeypatch.setattr(episode_wire, 'MAX_BLOCK', cap)
  shared = episode_wire.SharedBatches()
  try:
    assert _written(shared.submit(pool, plan, small), tmp_path / 'a') == (
        episode_wire.serialize(plan, small), True)
    names = _blocks(shared)
    big = shared.submit(pool, plan, episodes)
    assert big.done() and _written(big, tmp_path / 'b') == (
        episode_wire.serialize(plan, episodes), False)
    assert _blocks(shared) == names and max(shared.block_sizes) <= cap
    assert _written(shared.submit(pool, plan, small), tmp_path / 'c') == (
        episode_wire.serialize(plan, small), True)
    assert _blocks(shared) == names
  finally:
    shared.close()


def test_blocks_of_a_killed_builder_are_removed_by_the_next(tmp_path):
  """A builder killed with its process group (its resource tracker too) leaves its blocks in
  /dev/shm; the next SharedBatches unlinks them, and leaves a live builder's alone."""
  import signal  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  script = ('import sys, time\n'
            'from rlds_suite.tfds import episode_wire\n'
            'block = episode_wire.SharedBatches()._take(1)\n'
            'print(block.name, flush=True)\n'
            'time.sleep(60)\n')
  child = subprocess.Popen([sys.executable, '-c', script], stdout=subprocess.PIPE, text=True,
                           start_new_session=True)
  name = child.stdout.readline().strip()
  assert name.startswith('rlds_suite_'), name
  live = episode_wire.SharedBatches()
  live_block = live._take(1)  # pylint: disable=protected-access
  assert os.path.exists(f'/dev/shm/{name}')  # Its builder is alive: kept.
  os.killpg(child.pid, signal.SIGKILL)
  child.wait()
  child.stdout.close()
  assert os.path.exists(f'/dev/shm/{name}')  # Nobody unlinked it.
  episode_wire.SharedBatches()
  assert not os.path.exists(f'/dev/shm/{name}')
  assert os.path.exists(f'/dev/shm/{live_block.name}')  # This process is alive.
  live.close()
