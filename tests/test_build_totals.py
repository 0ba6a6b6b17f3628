"""A build's progress bar counts out of the totals each format declares before its data is read
(file counts, headers, metadata, terminal flags), and those totals are the real counts; where none
is knowable, the bar has no total (counts and rate only)."""

import pathlib
import shutil

import pytest

from rlds_suite.core import progress
from rlds_suite.tfds import datasets

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILDERS = ROOT / 'builders'


def _built(bars: list, builder) -> progress.Bar:
  """The build's one bar, after checking it counted every episode the dataset holds."""
  [bar] = bars
  assert bar.episodes == builder.info.splits['train'].num_examples > 0
  return bar


def _build(name: str, manual_dir: pathlib.Path, data_dir: pathlib.Path, **kwargs):
  return datasets.build(name, manual_dir=str(manual_dir), data_dir=str(data_dir), **kwargs)


@pytest.mark.parametrize('name,manual_dir', [
    ('d4rl/halfcheetah-medium-v2', BUILDERS / 'd4rl' / 'dummy_data'),  # Timeouts.
    ('d4rl/hopper-medium-replay-v2', BUILDERS / 'd4rl' / 'dummy_data'),  # Terminals.
    ('d4rl/walker2d-random-v2', BUILDERS / 'd4rl' / 'dummy_data'),
    ('d4rl_families/door-human-v1', BUILDERS / 'd4rl_families' / 'dummy_data'),
    ('d4rl_families/kitchen-partial-v0', BUILDERS / 'd4rl_families' / 'dummy_data'),
    ('d4rl_families/maze2d-umaze-v1', BUILDERS / 'd4rl_families' / 'dummy_data'),
    ('d4rl_pybullet/hopper-bullet-medium-v0', BUILDERS / 'd4rl_pybullet' / 'dummy_data'),
    ('dqn_replay/Pong-run1', BUILDERS / 'dqn_replay' / 'dummy_data'),
])
def test_episodes_and_steps_known_from_flags(name, manual_dir, tmp_path, bars):
  kwargs = {'beam': False} if name.startswith('dqn_replay') else {}
  bar = _built(bars, _build(name, manual_dir, tmp_path, **kwargs))
  assert bar.totals == progress.Totals(bar.episodes, bar.steps)
  assert bar.by_steps and bar.total == bar.steps  # Out of the steps: the ETA follows the data.


def test_magical_and_minerl_count_out_of_their_files_and_metadata(tmp_path, bars):
  bar = _built(bars, _build('magical_demos/move_to_corner',
                            BUILDERS / 'magical_demos' / 'dummy_data', tmp_path / 'a'))
  assert bar.totals == progress.Totals(episodes=2) and bar.episodes == 2
  assert not bar.by_steps and bar.total == 2
  bars.clear()
  # MineRL: a stream a directory, its steps in its metadata.json.
  bar = _built(bars, _build('minerl_streams/treechop_vector_obf',
                            BUILDERS / 'minerl_streams' / 'dummy_data', tmp_path / 'b'))
  assert bar.totals == progress.Totals(episodes=2, steps=bar.steps) and bar.episodes == 2


def test_imitation_npz_headers_give_the_totals_pickles_none(tmp_path, bars):
  npz_only = tmp_path / 'npz'
  npz_only.mkdir()
  for name in ('cartpole_rollouts.npz', 'cartpole_single.npz'):
    shutil.copy(ROOT / 'tests' / 'fixtures' / 'imitation' / name, npz_only / name)
  bar = _built(bars, _build('imitation_rollouts/cartpole', npz_only, tmp_path / 'a'))
  assert bar.totals == progress.Totals(bar.episodes, bar.steps, files=2) and bar.episodes == 5
  assert bar.by_steps and bar.files == 2
  bars.clear()
  # With a pickle among the files the episodes are known only once it is unpickled: files.
  bar = _built(bars, _build('imitation_rollouts/cartpole',
                            BUILDERS / 'imitation_rollouts' / 'dummy_data', tmp_path / 'b'))
  assert bar.totals == progress.Totals(files=2) and bar.unit == 'files'
  assert bar.tqdm.total == bar.files == 2


@pytest.mark.parametrize('name,manual_dir,kwargs,num_files', [
    ('ilr_atari_demos/pong', BUILDERS / 'ilr_atari_demos' / 'dummy_data', {}, 1),
    ('ilr_dm_control_demos/reacher_easy', BUILDERS / 'ilr_dm_control_demos' / 'dummy_data', {}, 1),
    ('ilr_procgen_demos/coinrun', BUILDERS / 'ilr_procgen_demos' / 'dummy_data', {}, 1),
    ('ilr_shards/demos-dm_control-reacher-easy', BUILDERS / 'ilr_shards' / 'dummy_data', {}, 1),
])
def test_files_of_an_unknown_number_of_episodes_are_the_total(name, manual_dir, kwargs, num_files,
                                                              tmp_path, bars):
  bar = _built(bars, _build(name, manual_dir, tmp_path, **kwargs))
  assert bar.totals == progress.Totals(files=num_files) and bar.unit == 'files'
  assert bar.tqdm.total == bar.files == num_files  # Each file counted once read.


def test_minari_metadata_totals(tmp_path, bars):
  from rlds_suite.builders.minari import minari_dataset_builder  # pylint: disable=g-import-not-at-top
  builder = minari_dataset_builder.Builder(dataset_id='cartpole/random-hdf5-v0',
                                           minari_root=str(BUILDERS / 'minari' / 'dummy_data'),
                                           data_dir=str(tmp_path))
  builder.download_and_prepare()
  bar = _built(bars, builder)
  assert bar.totals == progress.Totals(bar.episodes, bar.steps)
  assert bar.totals.episodes == builder.info.metadata['total_episodes']


def test_antmaze_has_no_total_without_reading_observations(tmp_path, bars):
  bar = _built(bars, _build('d4rl_families/antmaze-umaze-diverse-v2',
                            BUILDERS / 'd4rl_families' / 'dummy_data', tmp_path))
  assert bar.totals == progress.UNKNOWN and bar.tqdm.total is None


def test_dqn_replay_beam_split_totals_are_the_episodes_read(bars):
  from rlds_suite.builders.dqn_replay import dqn_replay_dataset_builder as dqn  # pylint: disable=g-import-not-at-top
  from rlds_suite.readers import dqn_replay  # pylint: disable=g-import-not-at-top
  logs = str(BUILDERS / 'dqn_replay' / 'dummy_data' / 'Pong' / '1' / 'replay_logs')
  split = dqn._beam_split(logs, None, item_rows=7, workers=2)  # pylint: disable=protected-access
  read = [dqn._example(t)[1] for t in dqn_replay.read_run(logs)]  # pylint: disable=protected-access
  assert (split.total_episodes, split.total_steps) == (
      len(read), sum(progress.num_steps(e) for e in read))


def test_beam_bar_polls_the_workers_counts_out_of_the_split_totals(tmp_path, bars):
  from rlds_suite.tfds import beam  # pylint: disable=g-import-not-at-top
  for item, (episodes, steps) in enumerate([(2, 30), (3, 12)]):
    (tmp_path / f'.progress-x-train-{item:05d}').write_text(
        f'{{"examples": {episodes}, "steps": {steps}}}')
  stop, thread = beam._progress_thread(  # pylint: disable=protected-access
      str(tmp_path), 'x-train', progress.Totals(5, 42), None)
  stop.set()
  thread.join()
  [bar] = bars
  assert (bar.total, bar.episodes, bar.steps) == (42, 5, 42) and bar.by_steps
  # Items that are files (per_file): counted as their workers finish them.
  bars.clear()
  (tmp_path / '.progress-x-train-00000').write_text('{"examples": 2, "steps": 30, "items": 1}')
  stop, thread = beam._progress_thread(  # pylint: disable=protected-access
      str(tmp_path), 'x-train', progress.Totals(files=3), None)
  stop.set()
  thread.join()
  [bar] = bars
  assert (bar.unit, bar.total, bar.files, bar.episodes) == ('files', 3, 1, 5)


def test_rl_unplugged_shards_are_the_total(tmp_path, bars):
  from rlds_suite.builders.rlu_control_suite import rlu_control_suite_dataset_builder as rlu  # pylint: disable=g-import-not-at-top
  from rlds_suite.tfds import beam  # pylint: disable=g-import-not-at-top
  builder = rlu.Builder(config='cartpole_swingup', data_dir=str(tmp_path), beam=False, num_shards=2)
  builder.download_and_prepare(download_config=beam.download_config(
      str(BUILDERS / 'rlu_control_suite' / 'dummy_data')))
  bar = _built(bars, builder)
  assert bar.totals == progress.Totals(files=2) and bar.tqdm.total == bar.files == 2
  # Built by Beam workers, one shard a work item: the same total.
  assert beam.per_file(['a', 'b'], len).total_files == 2


def test_imitation_headers_of_the_authors_rollouts(real_data):
  from rlds_suite.readers import imitation  # pylint: disable=g-import-not-at-top
  path = real_data / 'imitation' / 'cartpole_0_rollouts_final.npz'
  read = imitation.read_episodes(path, imitation.LAYOUTS['cartpole'])
  assert imitation.expected_totals([path]) == progress.Totals(
      len(read), sum(progress.num_steps(e) for e in read), files=1)


def test_minerl_metadata_totals_of_a_real_stream(real_data):
  from rlds_suite.core import episodes  # pylint: disable=g-import-not-at-top
  from rlds_suite.readers import minerl  # pylint: disable=g-import-not-at-top
  streams = minerl.stream_dirs(real_data / 'minerl', minerl.ENVS['treechop_vector_obf'])
  read = [episodes.to_episode(minerl.read_stream(
      s, minerl.ENVS['treechop_vector_obf'], with_video=False)) for s in streams]
  assert minerl.expected_totals(streams) == progress.Totals(
      len(read), sum(progress.num_steps(e) for e in read))
