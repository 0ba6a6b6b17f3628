"""The decoded cache: filled once, read back with the same values, refilled when the source changes."""

import gc
import itertools
import os
import shutil
import signal
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from rlds_suite.core import episodes
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite import streams
from rlds_suite.streams import block_draw
from rlds_suite.streams import row_blocks
from rlds_suite.tfds import features
from rlds_suite.tfds import writing

from tests import streams_data

ONE_EPOCH = streams.Mix(exhaustion=streams.Exhaustion.STOP)


def one_epoch(directory, cache_dir, unit=streams.StepUnit()):
  stream = streams.stream([directory], unit=unit, batch_size=4, seed=0, mix=ONE_EPOCH,
                          drop_remainder=False, cache_dir=cache_dir)
  batches = list(streams.as_numpy(stream))
  return {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}


def by_id(got):
  order = np.lexsort(np.asarray(streams_data.ids(got[fields.OBSERVATION])).T[::-1])
  return {key: value[order] for key, value in got.items()}


def test_cached_stream_equals_the_stream_from_files(tmp_path):
  directory = streams_data.write(tmp_path, 'cached', streams_data.id_episodes(0, 9, seed=6))
  cache_dir = tmp_path / 'cache'
  for unit in (streams.StepUnit(), streams.Transitions()):
    from_files = by_id(one_epoch(directory, None, unit))
    cached = by_id(one_epoch(directory, cache_dir, unit))
    again = by_id(one_epoch(directory, cache_dir, unit))
    for key in from_files:
      np.testing.assert_array_equal(cached[key], from_files[key], err_msg=key)
      np.testing.assert_array_equal(again[key], from_files[key], err_msg=key)
  entries = sorted(os.listdir(cache_dir))
  assert len(entries) == 1 and not entries[0].count('incomplete')  # Filled once, kept.
  assert os.path.exists(cache_dir / entries[0] / 'metadata.json')


def test_cache_is_refilled_when_the_source_changes(tmp_path):
  directory = streams_data.write(tmp_path / 'a', 'changing', streams_data.id_episodes(0, 5, seed=1))
  cache_dir = tmp_path / 'cache'
  before = by_id(one_epoch(directory, cache_dir))
  replacement = streams_data.write(tmp_path / 'b', 'changing', streams_data.id_episodes(0, 6, seed=2))
  shutil.rmtree(directory)
  shutil.copytree(replacement, directory)
  after = by_id(one_epoch(directory, cache_dir))
  expected = by_id(one_epoch(directory, None))
  assert len(after[fields.REWARD]) != len(before[fields.REWARD])
  np.testing.assert_array_equal(after[fields.REWARD], expected[fields.REWARD])
  assert [e for e in os.listdir(cache_dir) if 'incomplete' in e] == []


def test_cache_holds_decoded_frames(tmp_path):
  rng = np.random.default_rng(0)
  frames = rng.integers(0, 255, size=(7, 84, 84, 4), dtype=np.uint8)
  episode = episodes.to_episode(episodes.Trajectory(
      observations=frames[:-1], actions=np.arange(6, dtype=np.int64),
      rewards=np.arange(6, dtype=np.float32), ending=episodes.Ending.TERMINATED,
      final_observation=frames[-1]))
  feature_dict = features.rlds_features(observation=features.tensor((84, 84, 4), np.uint8),
                                        action=features.scalar(np.int64))
  directory = writing.write_episodes([episode], features=feature_dict, data_dir=tmp_path,
                                     name='frames')
  got = one_epoch(directory, tmp_path / 'cache')
  order = np.argsort(got[fields.ACTION] + 10 * got[fields.IS_LAST])
  np.testing.assert_array_equal(got[fields.OBSERVATION][order], frames)


def test_cached_mix_gives_the_same_batches_at_both_exits(tmp_path):
  first = streams_data.write(tmp_path, 'mix_a', streams_data.id_episodes(0, 7, seed=3))
  second = streams_data.write(tmp_path, 'mix_b', streams_data.id_episodes(1, 4, seed=4))
  make = lambda: streams.stream([first, second], unit=streams.Transitions(), batch_size=4, seed=1,
                                shuffle=streams.Shuffle(3, 12), mix=ONE_EPOCH,
                                drop_remainder=False, cache_dir=tmp_path / 'cache')
  from_numpy = list(streams.as_numpy(make()))
  from_tf = list(streams.as_numpy(make().dataset))
  assert len(from_numpy) == len(from_tf) > 3
  for a, b in zip(from_numpy, from_tf):
    for key in a:
      np.testing.assert_array_equal(a[key], b[key], err_msg=key)
  got = {key: np.concatenate([b[key] for b in from_numpy]) for key in from_numpy[0]}
  ids = np.asarray(streams_data.ids(got[fields.OBSERVATION]))
  nxt = np.asarray(streams_data.ids(got[fields.NEXT_OBSERVATION]))
  np.testing.assert_array_equal(ids[:, 0], got[streams.DATASET_INDEX])  # Each from its own cache.
  assert np.all(nxt[:, :2] == ids[:, :2]) and np.all(nxt[:, 2] == ids[:, 2] + 1)


def cached_and_not(tmp_path, refs, **kwargs):
  """Batches of the same stream without and with the cache (cache filled first)."""
  kwargs.setdefault('batch_size', 3)
  return [list(streams.as_numpy(streams.stream(refs, cache_dir=cache, **kwargs)))
          for cache in (None, tmp_path / 'cache')]


def joined(batches):
  return {key: np.concatenate([b[key] for b in batches]) for key in batches[0]}


def test_cached_exhaustion_and_shards_keep_their_counts(tmp_path):
  first = streams_data.write(tmp_path, 'ex_a', streams_data.id_episodes(0, 12, seed=1))
  second = streams_data.write(tmp_path, 'ex_b', streams_data.id_episodes(1, 5, seed=2))
  steps = [sum(e.num_steps for e in streams_data.id_episodes(d, n, seed=s))
           for d, n, s in ((0, 12, 1), (1, 5, 2))]
  for exhaustion in (streams.Exhaustion.STOP, streams.Exhaustion.DROP):
    mix = streams.Mix(exhaustion=exhaustion, granularity=2)
    files, cached = cached_and_not(tmp_path, [first, second], seed=0, mix=mix,
                                   drop_remainder=False, shuffle=streams.Shuffle(3, 8))
    assert len(cached) == len(files)
    got, expected = joined(cached), joined(files)
    np.testing.assert_array_equal(np.bincount(got[streams.DATASET_INDEX], minlength=2),
                                  np.bincount(expected[streams.DATASET_INDEX], minlength=2))
    ids = streams_data.ids(got[fields.OBSERVATION])
    assert len(set(ids)) == len(ids)  # No unit twice in one pass.
    if exhaustion is streams.Exhaustion.DROP:
      assert np.bincount(got[streams.DATASET_INDEX]).tolist() == steps
  for unit in (streams.StepUnit(), streams.Transitions()):
    shards = [cached_and_not(tmp_path, [first, second], unit=unit, seed=5, num_shards=3,
                             shard_index=i, mix=ONE_EPOCH) for i in range(3)]
    assert len({len(cached) for _, cached in shards}) == 1
    assert [len(cached) for _, cached in shards] == [len(files) for files, _ in shards]
    id_sets = [set(streams_data.ids(joined(cached)[fields.OBSERVATION])) for _, cached in shards]
    assert not (id_sets[0] & id_sets[1] or id_sets[0] & id_sets[2] or id_sets[1] & id_sets[2])


def test_cached_stream_keeps_file_order_without_shuffling(tmp_path):
  eps = streams_data.id_episodes(0, 6, seed=3)
  directory = streams_data.write(tmp_path, 'ordered', eps)
  files, cached = cached_and_not(tmp_path, [directory], shuffle=None, mix=ONE_EPOCH,
                                 drop_remainder=False)
  expected = np.concatenate([e.steps[fields.OBSERVATION] for e in eps])
  np.testing.assert_array_equal(joined(cached)[fields.OBSERVATION], expected)
  np.testing.assert_array_equal(joined(files)[fields.OBSERVATION], expected)


def test_cached_passes_hold_every_unit_once_and_count_epochs(tmp_path):
  first = streams_data.write(tmp_path, 'ep_a', streams_data.id_episodes(0, 7, seed=4))
  second = streams_data.write(tmp_path, 'ep_b', streams_data.id_episodes(1, 3, seed=5))
  make = lambda seed: streams.stream([first, second], unit=streams.Transitions(), batch_size=5,
                                     seed=seed, shuffle=streams.Shuffle(2, 20),
                                     mix=streams.Mix(weights=[1, 3], granularity=2),
                                     cache_dir=tmp_path / 'cache')
  batches = [b for _, b in zip(range(120), streams.as_numpy(make(3)))]
  got = joined(batches)
  tags = [b[key] for b in batches for key in (streams.DATASET_INDEX, streams.EPOCH)]
  assert all(t.flags.writeable and t.strides[0] for t in tags)  # Constants handed out filled.
  again = joined([b for _, b in zip(range(120), streams.as_numpy(make(3)))])
  other = joined([b for _, b in zip(range(120), streams.as_numpy(make(4)))])
  np.testing.assert_array_equal(got[fields.OBSERVATION], again[fields.OBSERVATION])
  assert not np.array_equal(got[fields.OBSERVATION], other[fields.OBSERVATION])
  assert 0.65 < np.mean(got[streams.DATASET_INDEX] == 1) < 0.85
  ids = np.asarray(streams_data.ids(got[fields.OBSERVATION]))
  nxt = np.asarray(streams_data.ids(got[fields.NEXT_OBSERVATION]))
  assert np.all(nxt[:, :2] == ids[:, :2]) and np.all(nxt[:, 2] == ids[:, 2] + 1)
  for dataset in (0, 1):
    mine = got[streams.DATASET_INDEX] == dataset
    epochs = got[streams.EPOCH][mine]
    per_epoch = [sorted(map(tuple, ids[mine][epochs == e])) for e in range(epochs.max())]
    assert len(per_epoch) >= 2 - dataset  # Dataset 1 (3 episodes, weight 3) went round often.
    for units in per_epoch[1:]:  # Every complete pass: each transition exactly once.
      assert units == per_epoch[0] and len(set(units)) == len(units)
    assert ids[mine][:, 0].tolist() == [dataset] * int(mine.sum())


def test_cached_stream_resumes_from_a_checkpoint_at_both_exits(tmp_path):
  first = streams_data.write(tmp_path, 'ck_a', streams_data.id_episodes(0, 7, seed=6))
  second = streams_data.write(tmp_path, 'ck_b', streams_data.id_episodes(1, 3, seed=7))
  make = lambda: streams.stream([first, second], batch_size=4, seed=1,
                                shuffle=streams.Shuffle(3, 8), mix=streams.Mix(granularity=2),
                                cache_dir=tmp_path / 'cache')
  iterator = iter(make())
  checkpoint = tf.train.Checkpoint(iterator=iterator)
  for _ in range(5):
    next(iterator)
  path = checkpoint.save(str(tmp_path / 'ckpt'))
  after = [next(iterator)[fields.OBSERVATION].numpy() for _ in range(30)]
  checkpoint.restore(path)
  again = [next(iterator)[fields.OBSERVATION].numpy() for _ in range(30)]
  np.testing.assert_array_equal(np.stack(after), np.stack(again))
  from_numpy = [b[fields.OBSERVATION] for _, b in zip(range(35), streams.as_numpy(make()))]
  np.testing.assert_array_equal(np.stack(from_numpy[5:]), np.stack(after))


def test_unit_tables_select_the_rows_the_unit_cuts():
  """A table holds per-episode row starts and per-field offsets, not per-unit rows: expanded, it
  selects exactly the rows the unit itself cuts from the whole shard."""
  row_splits = np.concatenate([[0], np.cumsum(np.random.default_rng(0).integers(1, 9, 40))])
  paths = [fields.OBSERVATION, fields.ACTION, fields.REWARD, fields.DISCOUNT, fields.IS_FIRST,
           fields.IS_LAST, fields.IS_TERMINAL]
  rows = tf.range(int(row_splits[-1]), dtype=tf.int64)
  for unit in (streams.StepUnit(), streams.Transitions(), streams.TargetPairs(3)):
    table = row_blocks.UnitTable.cut(unit, lambda steps: steps, paths, row_splits)
    assert all(v.size < 2 * len(row_splits) for v in (table.row_starts, table.unit_splits))
    units, episode = unit.from_episodes({p: rows for p in paths}, tf.constant(row_splits))
    counts = np.diff(table.unit_splits)
    np.testing.assert_array_equal(counts, np.bincount(episode, minlength=len(counts)))
    first = np.repeat(table.row_starts - table.unit_splits[:-1], counts) + np.arange(
        table.num_units)
    for path, value in nested.flatten_paths(units).items():
      np.testing.assert_array_equal(first + table.offsets[path], value, err_msg=path)
  with pytest.raises(ValueError, match='fixed offset'):
    row_blocks.UnitTable.cut(streams.NStepTransitions(2), lambda steps: steps, paths, row_splits)



def test_row_blocks_permute_every_field_by_the_blocks_seeded_permutation():
  """A block of two datasets whose passes end inside it (parts carried in the rows' high bits
  while the rows are shuffled in place) is the unpermuted block taken in numpy's permutation
  seeded by the block: rows, offsets, DATASET_INDEX and EPOCH moved together."""
  tables = [row_blocks.UnitTable({'o': 0, 'n': 1}, np.array([0, 4, 7]), np.array([0, 3, 5])),
            row_blocks.UnitTable({'o': 0, 'n': 1}, np.array([0, 6]), np.array([0, 4, 6]))]
  make = lambda seed: row_blocks.RowBlocks(
      tables, np.array([[7, 6], [3, 9]]), repeat=True, stop=False, limits=[None, None],
      epoch_seeds=[1, 2], permute_seed=seed, shuffle=True, dataset_index='d', epoch='e')
  plain, permuted = make(None), make(11)
  for block in range(5):
    expected, got = plain(block), permuted(block)
    order = np.random.default_rng([11, block]).permutation(len(expected['o']))
    assert len(set(expected['e'].tolist())) > 1 and len(set(expected['d'].tolist())) == 2
    for key in ('o', 'n', 'd', 'e'):
      np.testing.assert_array_equal(got[key], expected[key][order], err_msg=key)
    np.testing.assert_array_equal(got['n'], got['o'] + 1)


def test_cached_numpy_exit_starts_no_thread(tmp_path):
  """Cached row blocks are drawn, gathered and cut in the consumer's own thread: a thread ahead
  of it cost more CPU a step than it overlapped on a shared machine."""
  directory = streams_data.write(tmp_path, 'inline', streams_data.id_episodes(0, 5, seed=2))
  stream = streams.stream([directory], batch_size=4, seed=0, shuffle=streams.Shuffle(2, 8),
                          cache_dir=tmp_path / 'cache')
  before = threading.active_count()
  batches = streams.as_numpy(stream)
  got = [next(batches) for _ in range(12)]
  assert threading.active_count() == before
  assert len({tuple(i) for b in got for i in streams_data.ids(b[fields.OBSERVATION])}) > 4


def _draw_workers() -> list[int]:
  """This process's block-draw worker processes (streams.block_draw)."""
  found = []
  for pid in filter(str.isdigit, os.listdir('/proc')):
    try:
      with open(f'/proc/{pid}/cmdline', 'rb') as f:
        command = f.read()
      with open(f'/proc/{pid}/stat') as f:
        parent = int(f.read().rsplit(')', 1)[1].split()[1])
    except OSError:
      continue
    if parent == os.getpid() and b'rlds_suite_block_draw' in command:
      found.append(int(pid))
  return found


def _gone(pids: list[int], seconds: float = 20) -> bool:
  deadline = time.monotonic() + seconds
  while time.monotonic() < deadline:
    if not set(pids) & set(_draw_workers()):
      return True
    time.sleep(0.05)
  return False


def _mix_stream(tmp_path, **kwargs):
  """Two cached datasets whose passes end inside blocks (parts in a block's rows' high bits)."""
  refs = [str(tmp_path / name / '1.0.0') for name in ('ahead_a', 'ahead_b')]
  if not os.path.exists(refs[0]):
    refs = [streams_data.write(tmp_path, 'ahead_a', streams_data.id_episodes(0, 7, seed=3)),
            streams_data.write(tmp_path, 'ahead_b', streams_data.id_episodes(1, 4, seed=4))]
  return streams.stream(refs, unit=streams.Transitions(), batch_size=4, seed=1,
                        shuffle=streams.Shuffle(3, 12), cache_dir=tmp_path / 'cache', **kwargs)


def _block_draw(stream) -> block_draw.BlockDraw:
  """The BlockDraw behind a cached stream's numpy blocks (its RowBlocks, held by the closure)."""
  fn = stream.numpy_blocks
  return dict(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))[
      'row_blocks']._draw


def test_blocks_drawn_by_a_worker_equal_blocks_drawn_inline(tmp_path):
  """The worker draws the very blocks the consumer would (slots of shared memory read in place);
  a block it has not finished in time, while it starts or while it is starved, is drawn inline,
  and a starved worker is used again once it runs."""
  draw = _block_draw(_mix_stream(tmp_path))
  ahead = block_draw.drawn_ahead(draw, itertools.count())

  def served(got, block: int) -> bool:
    """Whether the worker drew `got` (a view of its slot of shared memory); checks it."""
    for a, b in zip(got, draw(block)):
      assert a.dtype == b.dtype
      np.testing.assert_array_equal(a, b, err_msg=str(block))
    owner = got[0]
    while isinstance(owner, np.ndarray):
      owner = owner.base
    return isinstance(owner, memoryview)

  block, from_worker, deadline = 0, 0, time.monotonic() + 60
  while from_worker <= 5 and time.monotonic() < deadline:  # Time to start and draw ahead.
    from_worker += served(next(ahead), block)
    block += 1
    time.sleep(0.02)
  assert from_worker > 5
  worker, = _draw_workers()
  os.kill(worker, signal.SIGSTOP)  # Starved (the cores busy): every block drawn here, but for
  try:  # those it had finished already.
    assert sum(served(next(ahead), b) for b in range(block, block + 100)) <= block_draw.DEPTH
  finally:
    os.kill(worker, signal.SIGCONT)
  block, deadline = block + 100, time.monotonic() + 60
  while not served(next(ahead), block) and time.monotonic() < deadline:  # Used again.
    block += 1
    time.sleep(0.002)
  assert time.monotonic() < deadline
  ahead.close()
  assert _gone([worker])


def test_draw_worker_skips_a_block_stolen_before_it_begins_it(tmp_path):
  """The steal protocol (issue 21): a requested block the consumer stole before the worker began
  it is skipped (replied -1, drawn once: by the consumer), one not stolen is drawn into its slot,
  and the worker says which block it began last (the consumer steals only blocks beyond it)."""
  draw = _block_draw(_mix_stream(tmp_path))
  worker = block_draw._Worker(draw, 3)
  try:
    assert worker.begun() == -1
    assert worker.steal(1, 1)  # Not begun: the worker skips it.
    for block, slot in ((0, 0), (1, 1), (2, 2)):
      worker.request(block, slot)
    replies, deadline = [], time.monotonic() + 60
    while len(replies) < 3 and time.monotonic() < deadline:
      worker.wait(0.1)
      replies += worker.replies() or []
    assert [(b, u >= 0) for b, u in replies] == [(0, True), (1, False), (2, True)]
    assert worker.begun() == 2 and not worker.steal(2, 2)  # Begun already: not stolen.
    for block, slot in ((0, 0), (2, 2)):
      units = dict(replies)[block]
      for got, want in zip(worker.slots[slot, :, :units], draw(block)):
        np.testing.assert_array_equal(got, want)
  finally:
    worker.close()


def test_draw_worker_gives_the_same_batches_and_ends_with_its_iterator(tmp_path):
  plain = [b for _, b in zip(range(60), streams.as_numpy(_mix_stream(tmp_path),
                                                         draw_worker=False))]
  batches = streams.as_numpy(_mix_stream(tmp_path), draw_worker=True)
  got = [next(batches) for _ in range(30)]
  workers = _draw_workers()
  assert len(workers) == 1
  os.kill(workers[0], signal.SIGKILL)  # A worker gone mid-stream: the rest drawn inline.
  got += [next(batches) for _ in range(30)]
  for a, b in zip(plain, got):
    for key in a:
      np.testing.assert_array_equal(a[key], b[key], err_msg=key)
  assert _gone(workers)
  batches = streams.as_numpy(_mix_stream(tmp_path), draw_worker=True)
  next(batches)
  workers = _draw_workers()
  del batches  # Abandoned mid-epoch: its worker ends with it.
  gc.collect()
  assert workers and _gone(workers)
  finite = _mix_stream(tmp_path, mix=ONE_EPOCH, drop_remainder=False)
  assert len(list(streams.as_numpy(finite, draw_worker=True))) == len(
      list(streams.as_numpy(finite, draw_worker=False)))
  assert _gone(_draw_workers())


def test_a_worker_draws_by_default_only_where_two_cores_may_run_the_process(tmp_path, monkeypatch):
  if len(os.sched_getaffinity(0)) < 2:
    pytest.skip('one core: the default draws inline here')
  batches = streams.as_numpy(_mix_stream(tmp_path))
  next(batches)
  workers = _draw_workers()
  assert len(workers) == 1
  del batches
  gc.collect()
  assert _gone(workers)
  monkeypatch.setattr(os, 'sched_getaffinity', lambda pid: {0})
  batches = streams.as_numpy(_mix_stream(tmp_path))
  next(batches)
  assert not _draw_workers()
  monkeypatch.delattr(os, 'sched_getaffinity')  # macOS: the machine's cores count.
  monkeypatch.setattr(os, 'cpu_count', lambda: 1)
  batches = streams.as_numpy(_mix_stream(tmp_path))
  next(batches)
  assert not _draw_workers()
