"""write_episodes round trip: what is written reads back unchanged, in order."""

import tracemalloc

import numpy as np
import pytest

from rlds_suite.tfds import datasets
from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.tfds import features
from rlds_suite.core import fields
from rlds_suite.tfds import episode_wire
from rlds_suite.tfds import writing
from rlds_suite.readers import rl_unplugged

from tests import streams_data


def test_round_trip(tmp_path):
  eps = streams_data.id_episodes(0, 3)
  directory = streams_data.write(tmp_path, 'roundtrip', eps)
  read = list(datasets.numpy_episodes(datasets.episodes(directory)))
  assert len(read) == 3
  for written, got in zip(eps, read):
    for key in fields.CORE_STEP_FIELDS:
      np.testing.assert_array_equal(got[fields.STEPS][key], written.steps[key])
  assert datasets.validate(directory).ok


def test_features_mismatch_is_a_schema_error(tmp_path):
  eps = streams_data.id_episodes(0, 1, obs_size=3)
  wrong = features.rlds_features(observation=features.tensor((5,), np.float32),
                                 action=features.tensor((2,), np.float32))
  with pytest.raises(errors.SchemaError):
    writing.write_episodes(eps, features=wrong, data_dir=tmp_path, name='wrong')


def _rss_anon() -> int:
  with open('/proc/self/status') as f:
    return next(int(line.split()[1]) << 10 for line in f if line.startswith('RssAnon:'))


@pytest.mark.skipif(writing._malloc_trim() is None, reason='not glibc')  # pylint: disable=protected-access
def test_free_heap_pages_go_back_to_the_system():
  """What made a long non-Beam build's memory creep: freed episode buffers stay resident in the C
  heap (glibc frees only its top). `release_free_heap` hands them back."""
  chunks = [b'\1' * (64 << 10) for _ in range(2048)]  # 128 MiB in the heap, pages written.
  pin = b'\2' * (64 << 10)  # Above them: the heap's top cannot shrink past it.
  del chunks
  before = _rss_anon()
  assert writing.release_free_heap()
  assert before - _rss_anon() > 64 << 20
  del pin


def test_each_completed_shard_hands_free_heap_back(tmp_path, monkeypatch):
  calls = []
  trim = writing._malloc_trim()  # pylint: disable=protected-access
  monkeypatch.setattr(writing, '_malloc_trim',
                      lambda: lambda pad: calls.append(pad) or (trim(pad) if trim else 0))
  eps = streams_data.id_episodes(0, 40, obs_size=256, min_len=50, max_len=60)
  feature_dict = features.rlds_features(observation=features.tensor((256,), np.float32),
                                        action=features.tensor((2,), np.float32))
  work = writing.WorkDir(tmp_path / 'ds' / '1.0.0', {'test': 1})
  writing.write_split(eps, features=feature_dict, work=work, split='train', workers=0,
                      shard_bytes=100 << 10)
  shards = work.progress.shards('train')
  assert len(shards) > 3
  assert len(calls) == len(shards)
  work.remove()


def _atari_example(n: int) -> dict:
  frames = np.zeros((n,) + rl_unplugged.ATARI_FRAME_SHAPE, np.uint8)
  frames[:, 20:30, :, 0] = (np.arange(n) % 200)[:, None, None]
  return {'observations': frames, 'actions': np.arange(n) % 6,
          'discounts': np.r_[np.ones(n - 1), 0].astype(np.float32),
          'unclipped_rewards': np.ones(n, np.float32), 'clipped_rewards': np.ones(n, np.float32),
          'episode_idx': 7, 'checkpoint_idx': 1, 'episode_return': n, 'clipped_episode_return': n}


def test_a_long_episode_is_converted_and_serialized_without_copies_of_its_frames(monkeypatch):
  """Issue 17: a 27,000-step rlu_atari episode (190 MiB of frames) took the build over 1 GB:
  to_episode copied the frames, and the serializer concatenated them and laid out PNG scanlines
  for the whole column. Now the episode's observations are the reader's frames and the encoder
  works ENCODE_ROWS frames at a time: what the serializer holds stays well under the frames' size,
  and the bytes are those of encoding the whole column at once."""
  example = _atari_example(3000)
  frames = example['observations']
  episode = episodes.to_episode(rl_unplugged.atari_trajectory(example)).as_example()
  observations = episode[fields.STEPS][fields.OBSERVATION]
  assert np.shares_memory(observations, frames) and np.array_equal(observations, frames)
  spec = features.rlds_features(observation=features.image(rl_unplugged.ATARI_FRAME_SHAPE),
                                action=features.scalar('int64'), reward=features.scalar('float32'),
                                step_metadata={'clipped_reward': features.scalar('float32')},
                                episode_metadata={'episode_id': features.scalar('int64')})
  del episode['checkpoint_id'], episode['episode_return'], episode['clipped_episode_return']
  plan = writing.plan_of(spec)
  whole = episode_wire.serialize(plan, [writing.flat_episode(plan, episode)])
  monkeypatch.setattr(episode_wire, 'ENCODE_ROWS', 256)
  serializer = writing.Serializer(spec, workers=0)  # As each Beam worker encodes.
  tracemalloc.start()
  try:
    out = list(serializer.add(episode)) + list(serializer.flush())
    peak = tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()
    serializer.close()
  assert out == whole
  assert peak < frames.nbytes / 4, (peak, frames.nbytes)


def test_a_truncated_long_episode_still_repeats_its_last_frame():
  example = _atari_example(50)
  example['discounts'][-1] = 1  # Not terminated: the final observation is not stored.
  steps = episodes.to_episode(rl_unplugged.atari_trajectory(example)).steps
  assert len(steps[fields.OBSERVATION]) == 51
  assert not np.shares_memory(steps[fields.OBSERVATION], example['observations'])
  np.testing.assert_array_equal(steps[fields.OBSERVATION][-1], example['observations'][-1])
