"""RLDSWriter with real environments: what is read back is what the environment returned."""

import os
import zlib

import envlogger
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
from tensorflow_datasets.core import example_serializer
from tensorflow_datasets.proto import tf_example_pb2

import rlds_suite
from rlds_suite.core import errors
from rlds_suite import envs
from rlds_suite.tfds import features
from rlds_suite.core.episodes import Episode
from rlds_suite.recording import random_policy
from rlds_suite.recording import serialization
from rlds_suite.recording import shards
from rlds_suite.recording import step_features
from rlds_suite.core import validation
from tests.recording_helpers import Tape, assert_matches_tape, read_episodes


def _run(env, writer, episodes, seed=0, step_fn=None, episode_fn=None, max_steps=None,
         discard=()):
  policy = random_policy(env.action_spec(), seed)
  logged = envlogger.EnvLogger(env, backend=writer, step_fn=step_fn, episode_fn=episode_fn)
  for index in range(episodes):
    timestep = logged.reset()
    steps = 0
    while not timestep.last() and (max_steps is None or steps < max_steps):
      timestep = logged.step(policy(timestep))
      steps += 1
    if index in discard:
      writer.discard_episode()
  writer.close()


def test_serializer_matches_tfds_encoding():
  feature_dict = features.rlds_features(
      observation={'pixels': features.image((4, 5, 3)), 'state': features.tensor((2,), np.float64)},
      action=features.scalar(np.int64),
      step_metadata={'text': features.text(), 'ragged': step_features.variable_length((None,), np.int32),
                     'big': features.tensor((70, 70), np.uint8)},
      reward=features.scalar(np.float64),
      episode_metadata={'tag': features.text(), 'seed': features.scalar(np.int64),
                        'temperature': features.scalar(np.float64)})
  rng = np.random.default_rng(0)
  n = 3
  ragged = np.empty(n, dtype=object)
  for i in range(n):
    ragged[i] = np.arange(i, dtype=np.int32)
  steps = {
      'observation': {'pixels': rng.integers(0, 255, (n, 4, 5, 3), dtype=np.uint8),
                      'state': rng.normal(size=(n, 2))},
      'action': np.array([-3, 0, 2**40]), 'reward': np.ones(n, np.float32), 'discount': np.ones(n, np.float32),
      'is_first': np.array([1, 0, 0], bool), 'is_last': np.array([0, 0, 1], bool),
      'is_terminal': np.zeros(n, bool), 'text': np.array(['a', 'bb', 'ccc'], dtype=object),
      'ragged': ragged, 'big': rng.integers(0, 255, (n, 70, 70), dtype=np.uint8),
  }
  steps['reward'] = rng.normal(size=n)  # float64: stored as raw bytes, exactly.
  episode = Episode(steps=steps, metadata={'tag': 'x', 'seed': 3, 'temperature': np.pi})
  ours = serialization.EpisodeSerializer(feature_dict).serialize(episode)
  reference = example_serializer.ExampleSerializer(feature_dict.get_serialized_info())
  theirs = reference.serialize_example(feature_dict.encode_example(episode.as_example()))
  ours, theirs = (tf_example_pb2.Example.FromString(e).features.feature for e in (ours, theirs))
  assert set(ours) == set(theirs)
  # Images and ZLIB tensors are encoded faster than TFDS does: other bytes, same decoded arrays.
  decoders = {'steps/observation/pixels': lambda b: tf.io.decode_png(b).numpy(),
              'steps/big': lambda b: np.frombuffer(zlib.decompress(b), np.uint8).reshape(70, 70)}
  for key in ours:
    if key in decoders:
      got = [decoders[key](b) for b in ours[key].bytes_list.value]
      want = [decoders[key](b) for b in theirs[key].bytes_list.value]
      np.testing.assert_array_equal(got, want)
      assert len(got) == n
    else:
      assert ours[key] == theirs[key], key
  pixels = ours['steps/observation/pixels'].bytes_list.value
  np.testing.assert_array_equal([decoders['steps/observation/pixels'](b) for b in pixels],
                                steps['observation']['pixels'])  # Lossless.
  for key, want in (('steps/reward', steps['reward']), ('temperature', [np.pi]),
                    ('steps/observation/state', steps['observation']['state'])):
    got = np.concatenate([np.frombuffer(b, '<f8') for b in ours[key].bytes_list.value])
    assert got.tobytes() == np.asarray(want, '<f8').tobytes(), key  # float64, bit for bit.


def _bits(values) -> list[int]:
  return np.asarray(values, np.float64).view(np.int64).tolist()


def test_pendulum_rewards_and_float64_metadata_are_exact(tmp_path):
  """Rewards and step metadata declared float64 come back bit for bit, as gymnasium gave them."""
  import gymnasium  # pylint: disable=g-import-not-at-top
  writer = rlds_suite.record(
      'gymnasium:Pendulum-v1', 'random', episodes=2, data_dir=tmp_path, name='pendulum', seed=3,
      max_episode_steps=30, progress=False, handle_signals=False,
      step_fn=lambda timestep, action, env: {'theta_dot': np.float64(timestep.observation[2]) / 3})
  assert writer.num_episodes_written == 2
  builder = tfds.builder_from_directory(os.fspath(tmp_path))
  assert builder.info.features['steps']['reward'].np_dtype == np.float64
  replay = gymnasium.make('Pendulum-v1')
  replay.reset(seed=3)
  for index, episode in enumerate(read_episodes(tmp_path)):
    steps = episode['steps']
    if index:
      replay.reset()
    rewards, observations = [], [steps['observation'][0]]
    for action in steps['action'][:-1]:
      observation, reward, _, _, _ = replay.step(action)
      rewards.append(reward)
      observations.append(observation)
    assert steps['reward'].dtype == np.float64
    assert _bits(steps['reward'][:-1]) == _bits(rewards)
    assert len(set(_bits(rewards))) > 20  # Real, varied rewards, e.g. -8.412110397894837.
    np.testing.assert_array_equal(steps['observation'], observations)
    assert _bits(steps['theta_dot']) == _bits(np.float64(np.asarray(observations)[:, 2]) / 3)


@pytest.mark.parametrize('writer_thread', [False, True])
def test_cartpole_round_trip_with_metadata(tmp_path, writer_thread):
  env = Tape(envs.make('gymnasium:CartPole-v1', seed=0))
  writer = rlds_suite.RLDSWriter(tmp_path, name='cartpole', env=env, max_episodes_per_shard=2,
                                 writer_thread=writer_thread)

  def step_fn(timestep, action, environment):  # Text and a variable-length field (envlogger#14).
    count = 0 if action is None else int(action) + 1
    return {'note': f'step{count}', 'tokens': np.arange(count, dtype=np.int32)}

  _run(env, writer, episodes=5, step_fn=step_fn,
       episode_fn=lambda timestep, action, environment: {'source': 'test', 'seed': 0},
       max_steps=12, discard=(1,))
  got = read_episodes(tmp_path)  # Variable-length 'tokens' come back as object arrays.
  assert rlds_suite.validate(tmp_path).ok
  kept = [e for i, e in enumerate(env.episodes) if i != 1]
  assert len(got) == 4 and writer.num_episodes_written == 4
  for episode, taped in zip(got, kept):
    assert_matches_tape(episode, taped)
    assert episode['source'] == b'test'
    expected = [0] + [int(a) + 1 for _, a in taped[1:]]
    assert [n.decode() for n in episode['steps']['note']] == [f'step{c}' for c in expected]
    tokens = episode['steps']['tokens']
    assert [len(t) for t in tokens] == expected  # Final step keeps its own metadata.
  assert any(e['steps']['is_terminal'][-1] for e in got)
  assert any(not e['steps']['is_terminal'][-1] for e in got)  # max_steps cut: truncated.
  assert validation.validate_episodes(got).ok
  builder = tfds.builder_from_directory(os.fspath(tmp_path))
  assert builder.info.splits['train'].shard_lengths == [2, 2]


def test_close_is_idempotent_and_metadata_per_shard(tmp_path, monkeypatch):
  writes = []
  original = shards.ShardedDatasetWriter.write_metadata
  monkeypatch.setattr(shards.ShardedDatasetWriter, 'write_metadata',
                      lambda self: (writes.append(1), original(self)))
  env = envs.make('gymnasium:CartPole-v1', seed=1)
  writer = rlds_suite.RLDSWriter(tmp_path, name='cartpole', env=env, max_episodes_per_shard=4)
  _run(env, writer, episodes=8)
  writer.close()
  writer.close()
  del writer  # __del__ closes again: nothing more is written.
  # One at creation, one per completed shard; closing with no open shard writes nothing.
  assert len(writes) == 3
  assert tfds.builder_from_directory(os.fspath(tmp_path)).info.splits['train'].num_examples == 8


@pytest.mark.parametrize('writer_thread', [False, True])
def test_writer_errors_reach_the_caller(tmp_path, writer_thread):
  env = envs.make('gymnasium:CartPole-v1', seed=0)
  writer = rlds_suite.RLDSWriter(tmp_path, name='cartpole', env=env, writer_thread=writer_thread)
  calls = []

  def step_fn(timestep, action, environment):  # Keys change after the first episode.
    calls.append(timestep.first())
    return {'a' if sum(calls) <= 1 else 'b': 1}

  with pytest.raises(errors.SchemaError):  # Raised by a later step, or at the latest by close().
    _run(env, writer, episodes=4, step_fn=step_fn, max_steps=5)
  if not writer.closed:  # Raised by a recording call: close() raises it again.
    with pytest.raises(errors.SchemaError):
      writer.close()
  writer.close()  # Idempotent once closed.
  assert len(read_episodes(tmp_path)) == 1  # The episode written before the failure is kept.


def test_append_to_existing_dataset(tmp_path):
  for seed in (0, 1):
    env = envs.make('gymnasium:CartPole-v1', seed=seed)
    _run(env, rlds_suite.RLDSWriter(tmp_path, name='cartpole', env=env), episodes=3, seed=seed)
  assert len(read_episodes(tmp_path)) == 6
  assert rlds_suite.validate(tmp_path).ok
  other = envs.make('atari:Pong', seed=0, max_episode_steps=3)
  with pytest.raises(errors.SpecMismatchError):
    _run(other, rlds_suite.RLDSWriter(tmp_path, name='cartpole', env=other), episodes=1)


def test_pong_frames_round_trip(tmp_path):
  env = Tape(envs.make('atari:Pong', seed=0, max_episode_steps=15))
  writer = rlds_suite.RLDSWriter(tmp_path, name='pong', env=env,
                                 image_fields=envs.image_fields(env))
  _run(env, writer, episodes=2)
  builder = tfds.builder_from_directory(os.fspath(tmp_path))
  assert isinstance(builder.info.features['steps']['observation'], tfds.features.Image)
  got = read_episodes(tmp_path)
  assert len(got) == 2
  for episode, taped in zip(got, env.episodes):
    assert len(taped) == 16
    assert_matches_tape(episode, taped)
    assert not episode['steps']['is_terminal'][-1]  # Time limit: truncation.


def test_dm_control_pixels_round_trip(tmp_path):
  env = Tape(envs.make('dm_control:cartpole-swingup', seed=0, pixels=True, pixels_only=False,
                       time_limit=0.1, render_frames=True))
  writer = rlds_suite.RLDSWriter(tmp_path, name='swingup', env=env,
                                 image_fields=envs.image_fields(env))
  _run(env, writer, episodes=2, step_fn=envs.frame_step_fn)
  env.close()
  got = read_episodes(tmp_path)
  assert len(got) == 2
  for episode, taped in zip(got, env.episodes):
    assert len(taped) == 11
    assert episode['steps']['frame'].shape == (11, 84, 84, 3)
    np.testing.assert_array_equal(episode['steps']['observation']['pixels'],
                                  np.stack([t.observation['pixels'] for t, _ in taped]))
    for key in ('position', 'velocity'):  # float64, exact.
      np.testing.assert_array_equal(episode['steps']['observation'][key],
                                    np.stack([t.observation[key] for t, _ in taped]))
    np.testing.assert_array_equal(episode['steps']['reward'][:-1],
                                  [t.reward for t, _ in taped[1:]])
    assert not episode['steps']['is_terminal'][-1]
  assert rlds_suite.validate(tmp_path).ok


class _PoisonedRewards(Tape):
  """CartPole whose episode `bad` earns a NaN reward on its second step."""

  def __init__(self, env, bad):
    super().__init__(env)
    self._bad = bad

  def step(self, action):
    timestep = super().step(action)
    if len(self.episodes) - 1 == self._bad and len(self.episodes[-1]) == 3:
      timestep = timestep._replace(reward=np.float64('nan'))
    return timestep


def test_batched_episodes_keep_order_and_shards_and_stop_at_a_bad_episode(tmp_path):
  env = Tape(envs.make('gymnasium:CartPole-v1', seed=3))
  writer = rlds_suite.RLDSWriter(tmp_path / 'good', name='cartpole', env=env,
                                 max_episodes_per_shard=3)
  _run(env, writer, episodes=7)
  got = read_episodes(tmp_path / 'good')
  assert len(got) == 7
  for episode, taped in zip(got, env.episodes):
    assert_matches_tape(episode, taped)
  builder = tfds.builder_from_directory(os.fspath(tmp_path / 'good'))
  assert builder.info.splits['train'].shard_lengths == [3, 3, 1]

  env = _PoisonedRewards(envs.make('gymnasium:CartPole-v1', seed=3), bad=4)
  writer = rlds_suite.RLDSWriter(tmp_path / 'bad', name='cartpole', env=env,
                                 max_episodes_per_shard=10)
  with pytest.raises(errors.InvalidValueError, match='non-finite values at steps'):
    _run(env, writer, episodes=7)  # The batch is converted at close().
  got = read_episodes(tmp_path / 'bad')
  assert len(got) == 4  # The episodes before the bad one, nothing after it.
  for episode, taped in zip(got, env.episodes):
    assert_matches_tape(episode, taped)


def test_shards_complete_after_max_seconds(tmp_path):
  env = envs.make('gymnasium:CartPole-v1', seed=0)
  writer = rlds_suite.RLDSWriter(tmp_path, name='cartpole', env=env, max_seconds_per_shard=0)
  _run(env, writer, episodes=3)  # Each episode end is past its shard's deadline.
  builder = tfds.builder_from_directory(os.fspath(tmp_path))
  assert builder.info.splits['train'].shard_lengths == [1, 1, 1]
