"""The decoded cache: filled once, read back with the same values, refilled when the source changes."""

import os
import shutil

import numpy as np

from rlds_suite.core import episodes
from rlds_suite.core import fields
from rlds_suite import streams
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
