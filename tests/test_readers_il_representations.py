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
  order = raw_shard(tmp_path / 'order.tar.zst', ['_metadata.meta.pickle', 'frame_000.obs.pickle',
                                                 'frame_001.obs.pickle', 'frame_000.obs.pickle'])
  with pytest.raises(errors.SchemaError, match='frame 0 comes after frame 1'):
    il_representations.read_shard(order)
  late = raw_shard(tmp_path / 'late.tar.zst', ['_metadata.meta.pickle', 'frame_001.obs.pickle'])
  with pytest.raises(errors.SchemaError, match='late.tar.zst: frame_001.obs.pickle: the first frame '
                     'is 1'):
    il_representations.read_shard(late)
  skipped = raw_shard(tmp_path / 'skipped.tar.zst', ['_metadata.meta.pickle', 'frame_000.obs.pickle',
                                                     'frame_002.obs.pickle'])
  with pytest.raises(errors.SchemaError, match='frame_002.obs.pickle: frame 2 comes after frame 0'):
    il_representations.read_shard(skipped)
  twice = raw_shard(tmp_path / 'twice.tar.zst', ['_metadata.meta.pickle', 'frame_000.obs.pickle',
                                                 'frame_000.obs.pickle'])
  with pytest.raises(errors.SchemaError, match='frame_000.obs.pickle: member stored twice'):
    il_representations.read_shard(twice)
  frames = list(_pong_like(1, length=4))
  del frames[2]['acts']
  _write(tmp_path / 'gap.tar.zst', frames)
  with pytest.raises(errors.SchemaError,
                     match=r"gap.tar.zst: frame_002.acts.pickle: frame 2 has no \['acts'\] member"):
    il_representations.read_trajectories(tmp_path / 'gap.tar.zst')


def _tar_shard(path, members):
  """A zstd tar of `members`: (TarInfo, bytes or None), the metadata member first."""
  import io  # pylint: disable=g-import-not-at-top
  import pickle  # pylint: disable=g-import-not-at-top
  import tarfile  # pylint: disable=g-import-not-at-top
  import zstandard  # pylint: disable=g-import-not-at-top
  buffer = io.BytesIO()
  with tarfile.open(fileobj=buffer, mode='w') as tar:
    meta = pickle.dumps({'env_cfg': {'benchmark_name': 'atari'}})
    info = tarfile.TarInfo('_metadata.meta.pickle')
    info.size = len(meta)
    tar.addfile(info, io.BytesIO(meta))
    for info, data in members:
      tar.addfile(info, None if data is None else io.BytesIO(data))
  path.write_bytes(zstandard.ZstdCompressor(write_checksum=True).compress(buffer.getvalue()))
  return path


def _file_member(name, data):
  import tarfile  # pylint: disable=g-import-not-at-top
  info = tarfile.TarInfo(name)
  info.size = len(data)
  return info, data


def _frame_members(index, keys=('obs', 'next_obs', 'acts', 'dones')):
  import pickle  # pylint: disable=g-import-not-at-top
  values = {'obs': np.zeros((4, 84, 84), np.uint8), 'next_obs': np.zeros((4, 84, 84), np.uint8),
            'acts': np.int64(0), 'dones': np.bool_(False), 'rews': np.float64(1.0)}
  return [_file_member(f'frame_{index:03d}.{key}.pickle', pickle.dumps(values[key]))
          for key in keys]


def test_a_column_missing_from_some_frames_is_refused(tmp_path):
  # frame_000 has no rews while the others do: before, has_rewards was False and every reward lost.
  members = _frame_members(0) + _frame_members(1, ('obs', 'next_obs', 'acts', 'dones', 'rews'))
  shard = _tar_shard(tmp_path / 'norews0.tar.zst', members)
  with pytest.raises(errors.SchemaError, match=r'norews0.tar.zst: frame_001.rews.pickle: frame 1 has '
                     r"a \['rews'\] member, frame 0 has none"):
    il_representations.read(shard)
  with pytest.raises(errors.SchemaError, match='frame_001.rews.pickle'):
    il_representations.read_shard(shard)


def test_a_symlinked_or_hardlinked_member_is_refused(tmp_path):
  import tarfile  # pylint: disable=g-import-not-at-top
  for kind, name in ((tarfile.SYMTYPE, 'symlink'), (tarfile.LNKTYPE, 'hardlink')):
    link = tarfile.TarInfo('frame_000.rews.pickle')
    link.type = kind
    link.linkname = '/etc/passwd' if kind == tarfile.SYMTYPE else 'frame_000.obs.pickle'
    members = _frame_members(0) + [(link, None)] + _frame_members(1, ('obs', 'next_obs', 'acts',
                                                                      'dones', 'rews'))
    shard = _tar_shard(tmp_path / f'{name}.tar.zst', members)
    with pytest.raises(errors.SchemaError,
                       match=f'{name}.tar.zst: frame_000.rews.pickle: the member is a {name}'):
      il_representations.read(shard)


@pytest.mark.parametrize('name', ['../frame_000.rews.pickle', '/tmp/frame_000.rews.pickle',
                                  'a/../../frame_000.rews.pickle'])
def test_unsafe_member_names_are_refused_and_nothing_is_written(tmp_path, name):
  import pickle  # pylint: disable=g-import-not-at-top
  work = tmp_path / 'work'
  work.mkdir()
  members = _frame_members(0) + [_file_member(name, pickle.dumps(np.float64(1.0)))]
  shard = _tar_shard(work / 'unsafe.tar.zst', members)
  with pytest.raises(errors.SchemaError, match='unsafe member name'):
    il_representations.read(shard)
  assert sorted(p.name for p in tmp_path.rglob('*')) == ['unsafe.tar.zst', 'work']
  assert not (tmp_path / 'frame_000.rews.pickle').exists()


def test_members_are_checked_by_name_before_their_data_is_read(tmp_path):
  import io  # pylint: disable=g-import-not-at-top
  import pickle  # pylint: disable=g-import-not-at-top
  import tarfile  # pylint: disable=g-import-not-at-top
  import tracemalloc  # pylint: disable=g-import-not-at-top
  import zstandard  # pylint: disable=g-import-not-at-top
  junk_bytes = 48 << 20  # Below the expansion limit's 64 MiB floor.
  path = tmp_path / 'junk.tar.zst'
  with open(path, 'wb') as raw, \
      zstandard.ZstdCompressor().stream_writer(raw) as compressed, \
      tarfile.open(fileobj=compressed, mode='w|') as tar:
    for info, data in [_file_member('_metadata.meta.pickle',
                                    pickle.dumps({'env_cfg': {'benchmark_name': 'atari'}}))]:
      tar.addfile(info, io.BytesIO(data))
    junk = tarfile.TarInfo('junk.bin')
    junk.size = junk_bytes

    class Zeros(io.RawIOBase):
      left = junk_bytes

      def readable(self):
        return True

      def readinto(self, b):
        n = min(len(b), self.left)
        b[:n] = bytes(n)
        self.left -= n
        return n

    tar.addfile(junk, io.BufferedReader(Zeros()))
    for info, data in _frame_members(0):
      tar.addfile(info, io.BytesIO(data))
  assert path.stat().st_size < junk_bytes // 100
  tracemalloc.start()
  shard = il_representations.read(path)
  _, peak = tracemalloc.get_traced_memory()
  tracemalloc.stop()
  assert len(shard.trajectories) == 1
  assert peak < 16 << 20, peak  # The junk member was passed over, not read whole (48 MiB).
