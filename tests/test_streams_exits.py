"""The two exits of a stream (numpy and tf.data) cut the same batches; corrupt shards are named."""

import logging
import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite import streams
from rlds_suite.streams import exits
from rlds_suite.streams import reading
from rlds_suite.streams import sync_exit

from tests import streams_data


@pytest.fixture(scope='module')
def directory(tmp_path_factory):
  return streams_data.write(tmp_path_factory.mktemp('exits'), 'set_exits',
                            streams_data.id_episodes(0, 12, seed=4))


@pytest.mark.parametrize('shuffle, drop_remainder', [(streams.Shuffle(4, 24), True),
                                                     (streams.Shuffle(4, 10), False),
                                                     (None, False)])
def test_numpy_and_tf_exits_give_the_same_batches(directory, shuffle, drop_remainder):
  make = lambda: streams.stream([directory], unit=streams.Transitions(), batch_size=4, seed=3,
                                shuffle=shuffle, drop_remainder=drop_remainder,
                                mix=streams.Mix(exhaustion=streams.Exhaustion.STOP))
  # Two streams with one seed: iterating one dataset twice reshuffles, as in tf.data.
  from_numpy = list(streams.as_numpy(make()))
  from_tf = list(streams.as_numpy(make().dataset))
  assert len(from_numpy) == len(from_tf) > 3
  for a, b in zip(from_numpy, from_tf):
    for key in (fields.OBSERVATION, fields.NEXT_OBSERVATION, fields.REWARD, streams.EPOCH):
      np.testing.assert_array_equal(a[key], b[key], err_msg=key)
  sizes = [len(b[fields.REWARD]) for b in from_numpy]
  assert all(s == 4 for s in sizes[:-1]) and (sizes[-1] == 4 or not drop_remainder)


def _graph_ops(function, *args) -> set[str]:
  return {op.type for op in function.get_concrete_function(*args).graph.get_operations()}


@pytest.mark.parametrize('cache', [False, True])
def test_the_tf_exit_in_a_tf_function_takes_batches_synchronously(directory, tmp_path, cache):
  """In a graph the exit's get_next is IteratorGetNextSync (no thread wake-up a batch), with the
  numpy exit's batches; an iterator passed into a tf.function (as Keras passes it) stays one."""
  make = lambda: streams.stream([directory], unit=streams.Transitions(), batch_size=4, seed=3,
                                shuffle=streams.Shuffle(4, 24),
                                cache_dir=tmp_path if cache else None,
                                mix=streams.Mix(exhaustion=streams.Exhaustion.STOP))
  from_numpy = list(streams.as_numpy(make()))
  iterator = iter(make().dataset)
  assert isinstance(iterator, sync_exit.SyncIterator)
  take_closed_over = tf.function(lambda: iterator.get_next())
  take_passed = tf.function(lambda it: it.get_next())
  for ops in (_graph_ops(take_closed_over), _graph_ops(take_passed, iterator)):
    assert 'IteratorGetNextSync' in ops and 'IteratorGetNext' not in ops
  from_graph = [take_closed_over() if i % 2 else take_passed(iterator)
                for i in range(len(from_numpy))]
  for a, b in zip(from_numpy, from_graph):
    for key in (fields.OBSERVATION, fields.REWARD, streams.EPOCH):
      np.testing.assert_array_equal(a[key], b[key].numpy(), err_msg=key)
  with pytest.raises(tf.errors.OutOfRangeError):
    take_closed_over()


_DRAIN_WITH_ONE_INTER_OP_THREAD = """
import sys
import tensorflow as tf
tf.config.threading.set_inter_op_parallelism_threads(1)
from rlds_suite import streams
for cache_dir in (None, sys.argv[2]):
  iterator = iter(streams.stream([sys.argv[1]], batch_size=4, seed=0, cache_dir=cache_dir).dataset)
  drain = tf.function(lambda n: tf.while_loop(
      lambda i: i < n, lambda i: (iterator.get_next(), i + 1)[1], [tf.constant(0)]))
  print(int(drain(tf.constant(500))[0]), flush=True)
"""


def test_the_synchronous_exit_needs_no_free_inter_op_thread(directory, tmp_path):
  """IteratorGetNextSync blocks the graph's thread while a batch is made: with a single inter-op
  thread, the stream (uncached, and cached, whose blocks are drawn by a numpy_function) must still
  make its batches on tf.data's own threads, not wait for that one."""
  done = subprocess.run([sys.executable, '-c', _DRAIN_WITH_ONE_INTER_OP_THREAD, str(directory),
                         str(tmp_path / 'cache')], capture_output=True, text=True, timeout=120,
                        env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
  assert done.returncode == 0 and done.stdout.split() == ['500', '500'], done.stderr[-2000:]


_MIRRORED = """
import sys
import numpy as np
import tensorflow as tf
cpu = tf.config.list_physical_devices('CPU')[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
from rlds_suite import streams
for cache_dir in (None, sys.argv[2]):
  make = lambda: streams.stream([sys.argv[1]], unit=streams.Transitions(), batch_size=8, seed=0,
                                cache_dir=cache_dir)
  expected = [b['reward'] for b, _ in zip(streams.as_numpy(make()), range(4))]
  for devices in (['/cpu:0'], ['/cpu:0', '/cpu:1']):
    strategy = tf.distribute.MirroredStrategy(devices)
    batches = strategy.experimental_distribute_dataset(make().dataset)
    for want, (got, _) in zip(expected, zip(batches, range(4))):
      parts = [p.numpy() for p in strategy.experimental_local_results(got['reward'])]
      assert [len(p) for p in parts] == [8 // len(devices)] * len(devices), [len(p) for p in parts]
      np.testing.assert_array_equal(np.concatenate(parts), want)
print('ok', flush=True)
"""


def test_tf_distribute_splits_the_streams_batches_across_replicas(directory, tmp_path):
  """A MirroredStrategy (one device, and two) hands each replica its share of the numpy exit's
  batches: its auto-shard rewrite dropped the exit's rebatch, so even one device got whole
  blocks where the element spec said batches (a stream shards itself: auto-sharding is off)."""
  done = subprocess.run([sys.executable, '-c', _MIRRORED, str(directory), str(tmp_path / 'cache')],
                        capture_output=True, text=True, timeout=120,
                        env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
  assert done.returncode == 0 and done.stdout.split() == ['ok'], done.stderr[-2000:]


def test_batches_span_blocks_like_rebatch():
  blocks = [{'x': np.arange(0, 5)}, {'x': np.arange(5, 12)}, {'x': np.arange(12, 13)}]
  got = [b['x'].tolist() for b in exits.cut_batches(iter(blocks), 4, drop_remainder=False)]
  assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12]]
  got = [b['x'].tolist() for b in exits.cut_batches(iter(blocks), 4, drop_remainder=True)]
  assert got == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]


def test_a_block_is_split_into_views_of_whole_batches_and_a_rest():
  block = {'a': np.arange(10), 'b': {'c': np.arange(20).reshape(10, 2)}}
  batches, rest = exits.split_block(block, 4)
  assert [b['a'].tolist() for b in batches] == [[0, 1, 2, 3], [4, 5, 6, 7]]
  assert batches[1]['b']['c'].tolist() == [[8, 9], [10, 11], [12, 13], [14, 15]]
  assert all(np.shares_memory(b['b']['c'], block['b']['c']) for b in batches)
  assert rest['a'].tolist() == [8, 9] and rest['b']['c'].tolist() == [[16, 17], [18, 19]]
  batches, rest = exits.split_block({'a': np.arange(8)}, 4)
  assert len(batches) == 2 and rest is None
  batches, rest = exits.split_block({'a': np.arange(3)}, 4)
  assert batches == [] and rest['a'].tolist() == [0, 1, 2]


def corrupt_stream(tmp_path):
  """A one-epoch stream over a dataset whose only shard lost its last third, and that shard."""
  eps = streams_data.id_episodes(0, 40, min_len=50, max_len=60, seed=5)
  directory = streams_data.write(tmp_path, 'set_corrupt', eps)
  shard = next(os.path.join(directory, f) for f in os.listdir(directory) if '.tfrecord' in f)
  with open(shard, 'r+b') as f:
    f.truncate(os.path.getsize(shard) * 2 // 3)
  return streams.stream([directory], batch_size=8, seed=0, shuffle=streams.Shuffle(4, 64),
                        mix=streams.Mix(exhaustion=streams.Exhaustion.STOP)), shard


def test_corrupt_shard_is_named(tmp_path):
  stream, shard = corrupt_stream(tmp_path)
  with pytest.raises(errors.CorruptFileError) as raised:
    for _ in streams.as_numpy(stream):
      pass
  assert raised.value.path == shard and 'truncated record' in str(raised.value)
  assert len(str(raised.value).splitlines()) == 1


def test_corrupt_shard_is_named_at_the_tf_data_exit(tmp_path):
  """TF's own DataLossError names no file; the tf.data exit's error names the shard."""
  stream, shard = corrupt_stream(tmp_path)
  with pytest.raises(tf.errors.InvalidArgumentError, match=re.escape(shard)) as raised:
    for _ in stream.dataset:
      pass
  assert reading.SHORT_SHARD in raised.value.message


@pytest.mark.parametrize('cached', [False, True])
def test_a_stream_left_open_at_interpreter_exit_prints_nothing(directory, tmp_path, cached):
  """A numpy exit's generator closed at interpreter exit must not print 'Exception ignored'; a
  cached stream's block threads end with it."""
  cache_dir = repr(str(tmp_path / 'cache')) if cached else None
  script = ('import sys; from rlds_suite import streams; '
            f's = streams.stream([sys.argv[1]], batch_size=2, seed=0, cache_dir={cache_dir}); '
            'batches = streams.as_numpy(s); next(batches)')
  done = subprocess.run([sys.executable, '-c', script, str(directory)], capture_output=True,
                        text=True, env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'}, check=True,
                        timeout=120)
  assert 'Exception ignored' not in done.stderr and 'Traceback' not in done.stderr, done.stderr


def test_no_deprecation_warnings_from_streams(directory, caplog):
  with caplog.at_level(logging.WARNING):
    stream = streams.stream([directory], unit=streams.Transitions(), batch_size=4, seed=0)
    next(streams.as_numpy(stream))
    next(iter(stream))
  assert not [r.getMessage() for r in caplog.records if 'deprecated' in r.getMessage()]
