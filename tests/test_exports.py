"""rlds_suite.exports: flat arrays, D4RL HDF5, il-representations' dict and shards, checked against
the episodes they came from, D4RL's reading semantics and the authors' own shards and writer."""

import io
import pathlib
import pickle
import pickletools
import tarfile

import h5py
import numpy as np
import pytest
import zstandard

from rlds_suite import exports
from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import safe_pickle
from rlds_suite.exports import il_representations as ilr_export
from rlds_suite.exports import npz
from rlds_suite.exports.il_representations import dumps
from rlds_suite.readers import d4rl
from rlds_suite.readers import il_representations
from rlds_suite.tfds import datasets
from rlds_suite.tfds import features
from rlds_suite.tfds import writing

REPO = pathlib.Path(__file__).resolve().parents[1]
DUMMY = REPO / 'builders' / 'ilr_shards' / 'dummy_data'
REAL_SHARDS = {
    ('atari', 'PongNoFrameskip-v4'): 'il_representations/atari-PongNoFrameskip-v4-demos.tar.zst',
    ('dm_control', 'reacher-easy'): 'il_representations/dm_control-reacher-easy-demos.tar.zst',
}


def _mixed_episodes():
  """A terminated episode (3 actions) and a truncated one (2 actions), final observations kept."""
  policy = episodes.BoundaryPolicy(episodes.FinalObservation.EXTRA_ROW)
  rng = np.random.default_rng(0)
  terminated = policy.trajectory(rng.normal(size=(4, 3)).astype(np.float32),
                                 rng.normal(size=(3, 2)).astype(np.float32),
                                 np.array([0.5, -1.25, 1 / 3]), terminal_flag=True)
  truncated = policy.trajectory(rng.normal(size=(3, 3)).astype(np.float32),
                                rng.normal(size=(2, 2)).astype(np.float32),
                                np.array([2.0, 1 / 7]), terminal_flag=False)
  return [episodes.to_episode(terminated), episodes.to_episode(truncated)]


@pytest.fixture
def mixed_dataset(tmp_path):
  eps = _mixed_episodes()
  directory = writing.write_episodes(
      eps, data_dir=tmp_path / 'data', name='mixed',
      features=features.rlds_features(observation=features.tensor((3,), np.float32),
                                      action=features.tensor((2,), np.float32),
                                      reward=features.scalar(np.float64)))
  return directory, eps


def test_npz_keeps_terminals_and_timeouts_apart(mixed_dataset, tmp_path):
  directory, (a, b) = mixed_dataset
  shapes = exports.export(directory, 'npz', tmp_path / 'flat.npz')
  got = dict(np.load(tmp_path / 'flat.npz'))
  assert shapes['observations'] == (5, 3)
  obs_a, obs_b = a.steps[fields.OBSERVATION], b.steps[fields.OBSERVATION]
  np.testing.assert_array_equal(got['observations'], np.concatenate([obs_a[:3], obs_b[:2]]))
  np.testing.assert_array_equal(got['next_observations'], np.concatenate([obs_a[1:], obs_b[1:]]))
  np.testing.assert_array_equal(got['actions'], np.concatenate(
      [a.steps[fields.ACTION][:3], b.steps[fields.ACTION][:2]]))
  np.testing.assert_array_equal(got['rewards'], [0.5, -1.25, 1 / 3, 2.0, 1 / 7])  # float64, exact.
  np.testing.assert_array_equal(got['terminals'], [False, False, True, False, False])
  np.testing.assert_array_equal(got['timeouts'], [False, False, False, False, True])


def test_d4rl_export_reads_back_as_the_same_episodes(mixed_dataset, tmp_path):
  directory, originals = mixed_dataset
  out = tmp_path / 'mixed.hdf5'
  exports.export(directory, 'd4rl', out)
  with h5py.File(out, 'r') as h5:
    assert sorted(h5.keys()) == ['actions', 'next_observations', 'observations', 'rewards',
                                 'terminals', 'timeouts']
    np.testing.assert_array_equal(h5['timeouts'][:], [0, 0, 0, 0, 1])
    assert h5['rewards'].dtype == np.float64
  # D4RL's own semantics, as our D4RL reader implements them, give back the same episodes (its
  # locomotion layout declares float32 rewards, as D4RL's files hold them).
  back = [episodes.to_episode(t) for t in d4rl.read_trajectories(out)]
  assert len(back) == 2
  for original, read in zip(originals, back):
    for key, values in original.steps.items():
      if key == fields.REWARD:
        values = values.astype(np.float32)
      np.testing.assert_array_equal(read.steps[key], values, err_msg=key)


def test_il_representations_dict(mixed_dataset, tmp_path):
  directory, originals = mixed_dataset
  exports.export(directory, 'il_representations_dict', tmp_path / 'dict.npz')
  got = dict(np.load(tmp_path / 'dict.npz'))
  expected = episodes.to_il_representations_dict(originals)
  assert sorted(got) == sorted(expected) == ['acts', 'dones', 'next_obs', 'obs', 'rews']
  for key in expected:
    np.testing.assert_array_equal(got[key], expected[key], err_msg=key)
  np.testing.assert_array_equal(got['dones'], [False, False, True, False, True])


def test_failed_export_leaves_nothing(tmp_path):
  def broken():
    yield _mixed_episodes()[0].as_example()
    raise errors.CorruptFileError('damaged shard', path='x.tfrecord')

  with pytest.raises(errors.CorruptFileError):
    npz.export(broken(), tmp_path / 'out.npz')
  assert list(tmp_path.iterdir()) == []
  with pytest.raises(errors.SchemaError, match='unknown export format'):
    exports.export('unused', 'csv', tmp_path / 'out.csv')


def _build(root, data_dir, benchmark, task):
  return datasets.build(f'ilr_shards/demos-{benchmark}-{task}', manual_dir=str(root),
                        data_dir=str(data_dir))


def _numpy_episodes(builder):
  return list(datasets.numpy_episodes(builder.as_dataset(split='train')))


def _assert_same_episodes(first, second):
  assert len(first) == len(second)
  for a, b in zip(first, second):
    assert a.keys() == b.keys()
    for key in a:
      if key != fields.STEPS:
        assert a[key] == b[key], key
    for key, values in a[fields.STEPS].items():
      assert values.dtype == b[fields.STEPS][key].dtype, key
      np.testing.assert_array_equal(values, b[fields.STEPS][key], err_msg=key)


def _members(path):
  data = zstandard.ZstdDecompressor().stream_reader(open(path, 'rb')).read()
  with tarfile.open(fileobj=io.BytesIO(data)) as tar:
    return [(m.name, m.mode, m.uname, m.gname, tar.extractfile(m).read()) for m in tar]


@pytest.mark.parametrize('suite,task', sorted(REAL_SHARDS))
def test_real_shard_to_rlds_to_shard_to_rlds(real_data, tmp_path, suite, task):
  benchmark = suite
  relative = pathlib.Path('processed', 'demos', benchmark, task, 'demos.tar.zst')
  source = tmp_path / 'source' / relative
  source.parent.mkdir(parents=True)
  source.symlink_to(real_data / REAL_SHARDS[(benchmark, task)])
  first = _build(tmp_path / 'source', tmp_path / 'data1', benchmark, task)
  exported = tmp_path / 'exported' / relative
  frames = exports.export(first, 'il_representations', exported)
  second = _build(tmp_path / 'exported', tmp_path / 'data2', benchmark, task)
  _assert_same_episodes(_numpy_episodes(first), _numpy_episodes(second))
  # Member by member, metadata included, the export is byte for byte the authors' shard, except
  # where the RLDS episode says more or differently.
  theirs = {m[0]: m for m in _members(source)}
  ours = {m[0]: m for m in _members(exported)}
  assert frames == len(native_acts := [n for n in theirs if n.endswith('.acts.pickle')])
  assert [m[1:4] for m in ours.values()] == [(0o444, 'bigdata', 'bigdata')] * len(ours)
  differing = sorted(n for n in theirs.keys() & ours.keys() if theirs[n][4] != ours[n][4])
  extra = sorted(ours.keys() - theirs.keys())
  assert not theirs.keys() - ours.keys()
  if benchmark == 'dm_control':
    # next_obs: the authors' zero-padded stacks on each episode's first two steps; RLDS keeps
    # obs[t + 1], the observation the agent saw. infos at each episode's end: the authors' also
    # hold gym's `TimeLimit.truncated: False` (dm_control ended the episode by its own step limit,
    # not gym's wrapper), which RLDS does not keep: every dm_control episode is a truncation.
    assert differing == sorted([f'frame_{t:03d}.next_obs.pickle' for t in (0, 1, 125, 126)] +
                               ['frame_124.infos.pickle', 'frame_249.infos.pickle'])
    for name in ('frame_124.infos.pickle', 'frame_249.infos.pickle'):
      mine, authors = safe_pickle.loads(ours[name][4]), safe_pickle.loads(theirs[name][4])
      assert authors.pop('TimeLimit.truncated') is False
      assert dumps(mine) == dumps(authors)
    assert extra == []
  else:
    # The Pong shard has no dones (two recordings back to back) and no infos; its two truncated
    # recordings are written the same way (the jump in observations, then the shard's end, ends
    # them): every member is the authors'.
    assert differing == [] and extra == []
  assert _has_content_checksum(exported) == _has_content_checksum(source) == True  # pylint: disable=g-explicit-bool-comparison
  assert len(native_acts) == sum(len(e[fields.STEPS][fields.ACTION]) - 1
                                 for e in _numpy_episodes(first))


def _has_content_checksum(path) -> bool:
  with open(path, 'rb') as f:
    return zstandard.get_frame_parameters(f.read(18)).has_checksum


@pytest.mark.parametrize('suite,task', sorted(REAL_SHARDS))
def test_metadata_is_the_authors(real_data, suite, task):
  """Our metadata pickle names the same globals as the authors' shards and unpickles equal."""
  path = real_data / REAL_SHARDS[(suite, task)]
  real_bytes = dict((m[0], m[4]) for m in _members(path)[:1])['_metadata.meta.pickle']
  real = safe_pickle.loads(real_bytes)
  ours_bytes = ilr_export.dumps_metadata(ilr_export.meta_dict(real['env_cfg']))
  ours = safe_pickle.loads(ours_bytes)
  assert _globals(ours_bytes) == _globals(real_bytes)
  assert ours['env_cfg'] == real['env_cfg'] and ours['color_space'] == real['color_space']
  for space in ('observation_space', 'action_space'):
    assert type(ours[space]) is type(real[space])
    for key, value in real[space].state.items():
      np.testing.assert_array_equal(ours[space].state[key], value, err_msg=f'{space}.{key}')


def _globals(data: bytes) -> set:
  strings, found = [], set()
  for opcode, arg, _ in pickletools.genops(data):
    if opcode.name in ('SHORT_BINUNICODE', 'BINUNICODE'):
      strings.append(arg)
    elif opcode.name == 'STACK_GLOBAL':
      found.add(tuple(strings[-2:]))
  return found


def test_export_is_what_the_authors_writer_writes(tmp_path):
  """The dm_control dummy shard was written by the authors' write_frames on webdataset's
  TarWriter (tests/fixtures/write_il_representations.py); exporting its RLDS dataset gives the same
  members in the same order with the same values. (Bytes differ only in numpy's module name: the
  fixture was pickled by numpy 2, ours name numpy.core as the authors' real shards do.)"""
  builder = _build(DUMMY, tmp_path / 'data', 'dm_control', 'reacher-easy')
  out = tmp_path / 'demos.tar.zst'
  exports.export(builder, 'il_representations', out)
  theirs = _members(DUMMY / 'processed/demos/dm_control/reacher-easy/demos.tar.zst')
  ours = _members(out)
  assert [m[:4] for m in ours] == [m[:4] for m in theirs]
  assert ours[0][0] == '_metadata.meta.pickle'
  for mine, authors in zip(ours[1:], theirs[1:]):
    a, b = safe_pickle.loads(mine[4]), safe_pickle.loads(authors[4])
    assert type(a) is type(b), mine[0]
    if isinstance(a, dict):
      assert a.keys() == b.keys() and a['discount'] == b['discount']
      a, b = a['internal_state'], b['internal_state']
    np.testing.assert_array_equal(a, b, err_msg=mine[0])
    assert np.asarray(a).dtype == np.asarray(b).dtype, mine[0]
  assert safe_pickle.loads(ours[0][4])['env_cfg'] == safe_pickle.loads(theirs[0][4])['env_cfg']


def test_webdataset_groups_our_shard_as_il_representations_reads_it(tmp_path):
  """il-representations reads shards with webdataset: the zstd stream's first tar member must be
  `_metadata.meta.pickle`, the rest grouped by key, each `.pickle` value unpickled."""
  from webdataset import tariterators  # pylint: disable=g-import-not-at-top
  builder = _build(DUMMY, tmp_path / 'data', 'atari', 'PongNoFrameskip-v4')
  out = tmp_path / 'demos.tar.zst'
  exports.export(builder, 'il_representations', out)
  with open(out, 'rb') as f:
    stream = zstandard.ZstdDecompressor().stream_reader(f, read_across_frames=True)
    items = list(tariterators.tar_file_iterator(stream))
  assert items[0]['fname'] == '_metadata.meta.pickle'
  samples = list(tariterators.group_by_keys(iter({**item, '__url__': str(out)}
                                                 for item in items[1:])))
  frames = [{k.split('.', 1)[0]: pickle.loads(v) for k, v in s.items() if k.endswith('.pickle')}
            for s in samples]
  assert [f['frame'] for f in frames] == list(range(7))
  assert sorted(frames[0]) == ['acts', 'dones', 'frame', 'next_obs', 'obs']
  steps = [e[fields.STEPS] for e in _numpy_episodes(builder)]
  np.testing.assert_array_equal([f['obs'] for f in frames],
                                np.concatenate([s[fields.OBSERVATION][:-1] for s in steps]))
  np.testing.assert_array_equal([f['acts'] for f in frames],
                                np.concatenate([s[fields.ACTION][:-1] for s in steps]))
  # Two truncated recordings: no done, as in the authors' Pong shard (the jump between them ends
  # the first).
  assert [bool(f['dones']) for f in frames] == [False] * 7


def test_procgen_shard_round_trip_keeps_next_episode_frames(tmp_path):
  """procgen shards did not keep final observations: every step is a transition, and next_obs at a
  done is the next episode's first frame, as in the authors' shards."""
  path = DUMMY / 'processed/demos/procgen/coinrun/demos.tar.zst'
  builder = _build(DUMMY, tmp_path / 'data', 'procgen', 'coinrun')
  out = tmp_path / 'exported' / 'processed/demos/procgen/coinrun/demos.tar.zst'
  assert exports.export(builder, 'il_representations', out) == 5
  native, back = il_representations.read_shard(path)[1], il_representations.read_shard(out)[1]
  for key in ('obs', 'next_obs', 'acts', 'rews', 'dones'):
    np.testing.assert_array_equal(back[key], native[key], err_msg=key)
  assert back['rews'].dtype == native['rews'].dtype == np.float32  # procgen's loader stores float32.
  again = _build(tmp_path / 'exported', tmp_path / 'data2', 'procgen', 'coinrun')
  _assert_same_episodes(_numpy_episodes(builder), _numpy_episodes(again))


def test_magical_shard_round_trip_is_the_authors_columns(tmp_path):
  """MAGICAL shards: dones at each demo's end, no rews (has_rewards False), no infos (every demo
  is a truncation by MAGICAL's declared semantics, so no TimeLimit mark is needed)."""
  path = DUMMY / 'processed/demos/magical/MoveToRegion/demos.tar.zst'
  builder = _build(DUMMY, tmp_path / 'data', 'magical', 'MoveToRegion')
  out = tmp_path / 'exported' / 'processed/demos/magical/MoveToRegion/demos.tar.zst'
  assert exports.export(builder, 'il_representations', out) == 5
  theirs, ours = _members(path), _members(out)
  assert [m[0] for m in ours] == [m[0] for m in theirs]
  native, back = il_representations.read_shard(path)[1], il_representations.read_shard(out)[1]
  for key in ('obs', 'next_obs', 'acts', 'dones'):
    np.testing.assert_array_equal(back[key], native[key], err_msg=key)


def test_il_representations_export_needs_a_declared_task(mixed_dataset, tmp_path):
  directory, _ = mixed_dataset
  with pytest.raises(errors.SchemaError, match='no env_cfg metadata'):
    exports.export(directory, 'il_representations', tmp_path / 'x.tar.zst')
  with pytest.raises(errors.SchemaError, match="no il-representations task layout declared for "
                     "'atari'/'NoSuchNoFrameskip-v4'"):
    exports.export(directory, 'il_representations', tmp_path / 'x.tar.zst',
                   env_cfg={'benchmark_name': 'atari', 'task_name': 'NoSuchNoFrameskip-v4'})
  assert not list(tmp_path.glob('x.tar.zst*'))


def _frame_stack_episodes(num_episodes: int):
  """Atari-like episodes of 50 steps (84x84x4 frames, ~1.4 MB each), made one at a time."""
  policy = episodes.BoundaryPolicy(episodes.FinalObservation.EXTRA_ROW)
  for index in range(num_episodes):
    obs = np.full((51, 4, 84, 84), index % 256, np.uint8)
    trajectory = policy.trajectory(obs, np.arange(50) % 6, np.zeros(50), terminal_flag=True)
    yield {**episodes.to_episode(trajectory).as_example(), 'has_rewards': False}


@pytest.mark.parametrize('target', ['npz', 'il_representations'])
def test_exports_hold_one_episode_at_a_time(tmp_path, target):
  """Peak Python memory of an export of 40 episodes is that of 4: it grows with an episode, not
  with the dataset."""
  import tracemalloc  # pylint: disable=g-import-not-at-top

  def peak(num_episodes: int) -> int:
    out = tmp_path / f'{target}-{num_episodes}'
    tracemalloc.start()
    if target == 'npz':
      npz.export(_frame_stack_episodes(num_episodes), out)
    else:
      ilr_export.export(_frame_stack_episodes(num_episodes), out, env_cfg={
          'benchmark_name': 'atari', 'task_name': 'PongNoFrameskip-v4'})
    _, peak_bytes = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak_bytes

  small, large = peak(4), peak(40)
  episode_bytes = 51 * 4 * 84 * 84
  assert large < small + 2 * episode_bytes, (small, large)


def test_il_representations_export_refuses_frames_of_another_layout(tmp_path):
  """Native Atari demos are channels last; a shard's metadata says (4, 84, 84): refused, named."""
  policy = episodes.BoundaryPolicy(episodes.FinalObservation.EXTRA_ROW)
  trajectory = policy.trajectory(np.zeros((3, 84, 84, 4), np.uint8), np.zeros(2, np.int64),
                                 np.zeros(2), terminal_flag=True)
  with pytest.raises(errors.SchemaError, match=r'observation: episode 0: observations of shape '
                     r'\(84, 84, 4\); atari/PongNoFrameskip-v4 shards hold \(4, 84, 84\)'):
    ilr_export.export([episodes.to_episode(trajectory).as_example()], tmp_path / 'x.tar.zst',
                      env_cfg={'benchmark_name': 'atari', 'task_name': 'PongNoFrameskip-v4'})
  assert not list(tmp_path.iterdir())


def test_il_representations_dict_names_dict_observations_as_its_magical_loader(tmp_path):
  builder = datasets.build('magical_demos/move_to_corner', data_dir=str(tmp_path / 'data'),
                           manual_dir=str(REPO / 'builders' / 'magical_demos' / 'dummy_data'))
  exports.export(builder, 'il_representations_dict', tmp_path / 'dict.npz')
  got = dict(np.load(tmp_path / 'dict.npz'))
  assert sorted(got) == ['acts', 'dones', 'next_obs_allo', 'next_obs_ego', 'obs_allo', 'obs_ego',
                         'rews']
  steps = [e[fields.STEPS] for e in _numpy_episodes(builder)]
  np.testing.assert_array_equal(got['obs_ego'], np.concatenate(
      [s[fields.OBSERVATION]['ego'][:-1] for s in steps]))


def test_il_representations_export_of_no_transition_leaves_nothing(tmp_path):
  policy = episodes.BoundaryPolicy(episodes.FinalObservation.NOT_STORED)
  one_step = policy.trajectory(np.zeros((1, 4, 84, 84), np.uint8), np.zeros(1, np.int64),
                               np.zeros(1), terminal_flag=True)
  steps = dict(episodes.to_episode(one_step).steps)
  steps = {key: value[:1] for key, value in steps.items()}  # A reset-only episode: one step.
  with pytest.raises(errors.EmptyInputError, match='x.tar.zst: no transition to write'):
    ilr_export.export([{fields.STEPS: steps}], tmp_path / 'x.tar.zst',
                      env_cfg={'benchmark_name': 'atari', 'task_name': 'PongNoFrameskip-v4'})
  assert not list(tmp_path.iterdir())


@pytest.fixture(scope='module')
def d4rl_built(tmp_path_factory):
  """halfcheetah-medium-v2 built from its dummy file (infos/qpos, qvel, action_log_probs and
  metadata/algorithm, iteration, policy/* as D4RL's collect_data.py writes them)."""
  data_dir = tmp_path_factory.mktemp('d4rl_data')
  builder = datasets.build('d4rl/halfcheetah-medium-v2', data_dir=str(data_dir),
                           manual_dir=str(REPO / 'builders' / 'd4rl' / 'dummy_data'))
  return builder, REPO / 'builders' / 'd4rl' / 'dummy_data' / 'halfcheetah_medium-v2.hdf5'


@pytest.mark.parametrize('to,name', [('d4rl', 'out.hdf5'), ('npz', 'out.npz')])
def test_d4rl_layout_keeps_infos_and_metadata_where_d4rl_has_them(d4rl_built, tmp_path, to, name):
  builder, source = d4rl_built
  out = tmp_path / name
  exports.export(builder, to, out)
  if to == 'd4rl':
    with h5py.File(out, 'r') as h5:
      got = {key: h5[key][()] for key in _h5_datasets(h5)}
  else:
    got = dict(np.load(out))
  with h5py.File(source, 'r') as h5:
    original = {key: h5[key][()] for key in _h5_datasets(h5)}
  assert not any(key.startswith('infos/infos') for key in got)
  for key in ('infos/qpos', 'infos/qvel', 'infos/action_log_probs'):
    # The dataset's declared dtypes (TFDS's d4rl configs: action_log_probs float64) hold the
    # file's values exactly.
    assert np.can_cast(original[key].dtype, got[key].dtype, 'safe'), key
    assert len(got[key]) == len(got['observations']), key
    assert set(got[key].ravel().tolist()) == set(original[key].astype(got[key].dtype).ravel().tolist())
  metadata = sorted(key for key in original if key.startswith('metadata/'))
  assert metadata and sorted(key for key in got if key.startswith('metadata/')) == metadata
  for key in metadata:
    want = original[key]
    have = got[key]
    if isinstance(want, bytes):
      have = have.item() if isinstance(have, np.ndarray) else have
    np.testing.assert_array_equal(have, want, err_msg=key)


def _h5_datasets(h5) -> list:
  names = []
  h5.visititems(lambda name, node: names.append(name) if isinstance(node, h5py.Dataset) else None)
  return names


def test_d4rl_export_reads_with_tfds_own_d4rl_reader_and_d3rlpy(d4rl_built, tmp_path):
  from tensorflow_datasets.d4rl import dataset_utils  # pylint: disable=g-import-not-at-top
  builder, _ = d4rl_built
  out = tmp_path / 'halfcheetah.hdf5'
  exports.export(builder, 'd4rl', out)
  ours = list(datasets.numpy_episodes(builder.as_dataset(split='train')))
  theirs = [episode for _, episode in dataset_utils.generate_examples(str(out))]
  assert len(theirs) == len(ours)
  for mine, other in zip(sorted(ours, key=_first_observation), sorted(theirs, key=_first_observation)):
    real = slice(0, len(mine['steps']['reward']) - 1)  # Our last step is the final observation.
    np.testing.assert_array_equal(other['steps']['action'][real], mine['steps']['action'][real])
    np.testing.assert_array_equal(other['steps']['infos']['qpos'][real],
                                  mine['steps']['infos']['qpos'][real])
    assert other['algorithm'] == mine['algorithm']
  d3rlpy = _d3rlpy()
  with h5py.File(out, 'r') as h5:
    mdp = d3rlpy.dataset.MDPDataset(h5['observations'][()], h5['actions'][()], h5['rewards'][()],
                                    h5['terminals'][()], h5['timeouts'][()])
  assert len(mdp.episodes) == len(ours)
  assert sorted(len(e) for e in mdp.episodes) == sorted(len(e['steps']['reward']) - 1 for e in ours)


def _d3rlpy():
  """d3rlpy from the folder scripts/setup_envs.sh installs it into (.test_deps/d3rlpy: its
  scikit-learn stays off the path of every other test, where Keras would import it)."""
  import sys  # pylint: disable=g-import-not-at-top
  folder = str(REPO / '.test_deps' / 'd3rlpy')
  if folder not in sys.path:
    sys.path.append(folder)
  return pytest.importorskip('d3rlpy', reason=f'd3rlpy: scripts/setup_envs.sh installs it in {folder}')


def _first_observation(episode) -> tuple:
  return tuple(np.asarray(episode['steps']['observation'][0]).ravel().tolist())


@pytest.mark.parametrize('to,name', [('d4rl', 'x.npz'), ('npz', 'x.hdf5'),
                                     ('il_representations', 'demos.tar'),
                                     ('il_representations_dict', 'x.h5')])
def test_an_output_name_that_does_not_fit_the_format_is_refused_before_reading(tmp_path, to, name):
  with pytest.raises(errors.SchemaError, match=f'--to {to} writes'):
    exports.export(tmp_path / 'no_such_dataset', to, tmp_path / name)
  assert not (tmp_path / name).exists()
