"""ZLIB frame fields decoded by ISA-L in streams: the written values, a bounded size, corrupt rows named."""

import os

import numpy as np
import pytest
import tensorflow as tf
from isal import isal_zlib

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite import streams
from rlds_suite.streams import frames
from rlds_suite.tfds import features
from rlds_suite.tfds import writing

SHAPE = (84, 84, 4)
ONE_EPOCH = streams.Mix(exhaustion=streams.Exhaustion.STOP)


def write(tmp_path, name='frames', num=3):
  rng = np.random.default_rng(0)
  observations = rng.integers(0, 255, size=(num, 5) + SHAPE, dtype=np.uint8)
  maps = rng.normal(size=(num, 5, 70, 70)).astype(np.float32)  # ZLIB-encoded too, 4 bytes a value.
  eps = [episodes.to_episode(episodes.Trajectory(
      observations=observations[i], actions=maps[i], rewards=np.full(5, i, np.float32),
      ending=episodes.Ending.TRUNCATED)) for i in range(num)]
  feature_dict = features.rlds_features(observation=features.tensor(SHAPE, np.uint8),
                                        action=features.tensor((70, 70), np.float32))
  directory = writing.write_episodes(eps, features=feature_dict, data_dir=tmp_path, name=name)
  return directory, observations, maps


def test_streamed_frames_are_the_written_ones_at_both_exits(tmp_path):
  directory, observations, maps = write(tmp_path)
  make = lambda: streams.stream([directory], batch_size=3, seed=0, mix=ONE_EPOCH,
                                drop_remainder=False)
  for batches in (list(streams.as_numpy(make())), list(streams.as_numpy(make().dataset))):
    got = {k: np.concatenate([b[k] for b in batches])
           for k in (fields.OBSERVATION, fields.ACTION, fields.REWARD)}
    assert len(got[fields.REWARD]) == observations.shape[0] * observations.shape[1]
    for i in range(observations.shape[0]):  # Steps of episode i, in any order.
      mine = got[fields.REWARD] == i
      key = lambda a: a.reshape(len(a), -1)[:, :64].tobytes()
      assert sorted(map(key, got[fields.OBSERVATION][mine])) == sorted(map(key, observations[i]))
      assert sorted(map(key, got[fields.ACTION][mine])) == sorted(map(key, maps[i]))


def test_rows_inflate_no_further_than_their_declared_size():
  row = np.arange(np.prod(SHAPE), dtype=np.int64).astype(np.uint8)
  good = isal_zlib.compress(row.tobytes())
  decode = lambda rows: frames.decode_zlib_rows(tf.constant(rows), tf.uint8, SHAPE, 'steps/x')
  np.testing.assert_array_equal(decode([good, good]).numpy()[1].reshape(-1), row)
  bomb = isal_zlib.compress(bytes(256 << 20))  # 256 MiB of zeros in ~250 KiB.
  for bad in (bomb, good[:-4], isal_zlib.compress(row.tobytes()[:-1]), b'not zlib'):
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
      decode([good, bad])
    assert frames.CORRUPT_ROW in raised.value.message and 'steps/x' in raised.value.message


def test_rows_of_several_decode_chunks_land_in_order_and_the_first_bad_one_is_named():
  rows = np.random.default_rng(1).integers(0, 4, size=(3 * frames.DECODE_CHUNK_ROWS + 5,) + SHAPE,
                                           dtype=np.uint8)
  encoded = [isal_zlib.compress(row.tobytes()) for row in rows]
  decode = lambda rows: frames.decode_zlib_rows(tf.constant(rows), tf.uint8, SHAPE, 'steps/x')
  np.testing.assert_array_equal(decode(encoded).numpy(), rows)
  first_bad = frames.DECODE_CHUNK_ROWS + 3  # In the second chunk; a later chunk's fails too.
  for index in (first_bad, 3 * frames.DECODE_CHUNK_ROWS + 1):
    encoded[index] = encoded[index][:-4]
  with pytest.raises(tf.errors.InvalidArgumentError) as raised:
    decode(encoded)
  assert f"b'row'\n{first_bad}\n" in raised.value.message  # Eager Assert: a line per item.


def test_a_corrupt_frame_row_is_named_at_the_numpy_exit(tmp_path):
  directory, observations, _ = write(tmp_path, 'corrupt_frames')
  shard = next(os.path.join(directory, f) for f in os.listdir(directory) if '.tfrecord' in f)
  records = list(tf.data.TFRecordDataset(shard).as_numpy_iterator())
  example = tf.train.Example.FromString(records[1])
  rows = example.features.feature[f'{fields.STEPS}/{fields.OBSERVATION}'].bytes_list.value
  rows[2] = isal_zlib.compress(observations[1, 2].tobytes()[:100])  # A valid stream, too short.
  records[1] = example.SerializeToString()
  with tf.io.TFRecordWriter(shard) as writer:  # Frames whose checksums hold: only the row is bad.
    for record in records:
      writer.write(record)
  stream = streams.stream([directory], batch_size=3, seed=0, mix=ONE_EPOCH)
  with pytest.raises(errors.CorruptFileError) as raised:
    for _ in streams.as_numpy(stream):
      pass
  assert frames.CORRUPT_ROW in str(raised.value) and len(str(raised.value).splitlines()) == 1


def test_frame_stream_resumes_from_a_checkpoint(tmp_path):
  directory, _, _ = write(tmp_path, 'checkpointed_frames', num=4)
  iterator = iter(streams.stream([directory], batch_size=2, seed=1,
                                 shuffle=streams.Shuffle(2, 4)))
  checkpoint = tf.train.Checkpoint(iterator=iterator)
  for _ in range(3):
    next(iterator)
  path = checkpoint.save(str(tmp_path / 'ckpt'))
  after = [next(iterator)[fields.OBSERVATION].numpy() for _ in range(12)]
  checkpoint.restore(path)
  again = [next(iterator)[fields.OBSERVATION].numpy() for _ in range(12)]
  np.testing.assert_array_equal(np.stack(after), np.stack(again))
