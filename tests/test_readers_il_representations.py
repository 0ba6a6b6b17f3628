"""il-representations shards: the authors' real files read into RLDS and back, exactly."""

import numpy as np
import pytest

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import validation
from rlds_suite.readers import il_representations

REACHER = 'il_representations/dm_control-reacher-easy-demos.tar.zst'
PONG = 'il_representations/atari-PongNoFrameskip-v4-demos.tar.zst'


def test_real_reacher_round_trips_to_the_same_dict(real_data):
  path = real_data / REACHER
  _, native = il_representations.read_shard(path)
  trajectories = il_representations.read_trajectories(path)
  assert [len(t.actions) for t in trajectories] == [125, 125]  # dones at rows 124 and 249.
  assert all(t.ending is episodes.Ending.TRUNCATED for t in trajectories)  # dm_control time limit.
  eps = [episodes.to_episode(t) for t in trajectories]
  assert validation.validate_episodes(eps).ok
  assert not any(e.steps[fields.IS_TERMINAL].any() for e in eps)
  back = episodes.to_il_representations_dict(eps)
  for key in ('obs', 'acts', 'dones', 'rews'):
    np.testing.assert_array_equal(back[key], native[key], err_msg=key)
  assert back['obs'].shape == (250, 9, 100, 100)
  # The shard's next_obs pads the frame stack with zeros on the first two steps of each episode,
  # where obs[t+1] repeats the first frame; RLDS keeps obs[t+1]. Everywhere else it is exact.
  jumps = il_representations.observation_jumps(native['obs'], native['next_obs'])
  assert np.flatnonzero(jumps).tolist() == [0, 1, 124, 125, 126]  # 124: the episode boundary.
  same = np.ones(250, bool)
  same[[0, 1, 125, 126]] = False
  np.testing.assert_array_equal(back['next_obs'][same], native['next_obs'][same])


def test_real_pong_shard_splits_at_the_undelimited_reset(real_data):
  path = real_data / PONG
  _, native = il_representations.read_shard(path)
  assert not native['dones'].any()  # Two recordings back to back, neither reaching a done.
  first, second = il_representations.read_trajectories(path)
  assert (len(first.actions), len(second.actions)) == (499, 499)
  assert first.ending is second.ending is episodes.Ending.TRUNCATED
  eps = [episodes.to_episode(first), episodes.to_episode(second)]
  assert validation.validate_episodes(eps).ok
  back = episodes.to_il_representations_dict(eps)
  for key in ('obs', 'next_obs', 'acts'):
    np.testing.assert_array_equal(back[key], native[key], err_msg=key)
  # Our dict marks both ends; the shard had none.
  np.testing.assert_array_equal(np.flatnonzero(back['dones']), [498, 997])


def test_truncated_shard_is_a_typed_error(real_data, tmp_path):
  data = (real_data / REACHER).read_bytes()
  broken = tmp_path / 'broken.tar.zst'
  broken.write_bytes(data[:len(data) // 3])
  with pytest.raises(errors.CorruptFileError, match='broken.tar.zst'):
    il_representations.read_shard(broken)


def _write(path, frames, env_cfg=None):
  from rlds_suite.exports import il_representations as export  # pylint: disable=g-import-not-at-top
  env_cfg = env_cfg or {'benchmark_name': 'atari', 'task_name': 'PongNoFrameskip-v4'}
  export.write_frames(path, export.meta_dict(env_cfg), frames)


def _pong_like(num_episodes, length=20):
  for e in range(num_episodes):
    for t in range(length):
      frame = np.full((4, 84, 84), (e * length + t) % (12 * length), np.uint8)
      yield {'obs': frame, 'next_obs': frame + 1, 'acts': np.int64(t % 6),
             'dones': np.bool_(t == length - 1)}


def test_shards_are_read_one_episode_at_a_time(tmp_path):
  import tracemalloc  # pylint: disable=g-import-not-at-top

  def peak(num_episodes):
    path = tmp_path / f'{num_episodes}.tar.zst'
    _write(path, _pong_like(num_episodes))
    tracemalloc.start()
    count = sum(1 for _ in il_representations.open_shard(path).trajectories)
    _, peak_bytes = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert count == num_episodes
    return peak_bytes

  small, large = peak(3), peak(30)
  assert large < small + 2 * 20 * 2 * 4 * 84 * 84, (small, large)


def test_malformed_shards_are_named(tmp_path):
  import io  # pylint: disable=g-import-not-at-top
  import pickle  # pylint: disable=g-import-not-at-top
  import tarfile  # pylint: disable=g-import-not-at-top
  import zstandard  # pylint: disable=g-import-not-at-top

  def raw_shard(path, names):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode='w') as tar:
      for name in names:
        data = pickle.dumps({'env_cfg': {'benchmark_name': 'atari'}} if 'meta' in name else
                            np.zeros(2))
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    path.write_bytes(zstandard.ZstdCompressor().compress(buffer.getvalue()))
    return path

  first = raw_shard(tmp_path / 'first.tar.zst', ['frame_000.obs.pickle', '_metadata.meta.pickle'])
  with pytest.raises(errors.SchemaError, match='first.tar.zst: the first member must be '
                     "_metadata.meta.pickle, found 'frame_000.obs.pickle'"):
    il_representations.read_shard(first)
  order = raw_shard(tmp_path / 'order.tar.zst', ['_metadata.meta.pickle', 'frame_001.obs.pickle',
                                                 'frame_000.obs.pickle'])
  with pytest.raises(errors.SchemaError, match='frame 0 comes after frame 1'):
    il_representations.read_shard(order)
  frames = list(_pong_like(1, length=4))
  del frames[2]['acts']
  _write(tmp_path / 'gap.tar.zst', frames)
  with pytest.raises(errors.SchemaError, match=r"gap.tar.zst: acts: transition 2 has no \['acts'\]"):
    il_representations.read_trajectories(tmp_path / 'gap.tar.zst')
