"""dataset_configs entries -> datasets through the one catalog."""

import pytest

from rlds_suite.core import errors
from rlds_suite.streams import catalog


def test_magical_demos_rows_come_from_the_builder_configs():
  resolved = catalog.Catalog().resolve({})
  assert resolved.source == 'magical_demos/move_to_region'
  assert resolved.key == ('demos', 'magical', 'MoveToRegion')


def test_type_and_env_cfg_merge_recursively(tmp_path):
  cat = catalog.Catalog()
  cat.register('random', 'dm_control', 'cheetah-run', tmp_path)
  env_cfg = {'benchmark_name': 'dm_control', 'task_name': 'finger-spin',
             'preproc': {'frame_stack': 4, 'resize': 84}}
  resolved = cat.resolve(
      {'type': 'random', 'env_cfg': {'task_name': 'cheetah-run', 'preproc': {'frame_stack': 3}}},
      env_cfg)
  assert resolved.source == str(tmp_path)
  assert resolved.env_cfg == {'benchmark_name': 'dm_control', 'task_name': 'cheetah-run',
                              'preproc': {'frame_stack': 3, 'resize': 84}}
  assert env_cfg['preproc']['frame_stack'] == 4  # The default is not modified.


def test_unresolvable_entry_is_named():
  with pytest.raises(errors.UnresolvedDatasetError, match="'type': 'random'.*MoveToRegion"):
    catalog.Catalog().resolve({'type': 'random'})
  with pytest.raises(errors.UnresolvedDatasetError, match='known demos tasks'):
    catalog.Catalog().resolve({'env_cfg': {'task_name': 'NoSuchTask'}})
  with pytest.raises(errors.UnresolvedDatasetError, match='unknown keys'):
    catalog.Catalog().resolve({'typo': 'random'})


def test_streams_resolve_registered_directories(tmp_path):
  from rlds_suite import streams  # pylint: disable=g-import-not-at-top
  from tests import streams_data  # pylint: disable=g-import-not-at-top
  directory = streams_data.write(tmp_path, 'random_rollouts', streams_data.id_episodes(0, 2))
  cat = catalog.Catalog()
  cat.register('random', 'magical', 'MoveToRegion', directory)
  batch = next(streams.as_numpy(streams.stream([{'type': 'random'}], catalog=cat, batch_size=2,
                                               seed=0)))
  assert batch['observation'].shape == (2, 3)


def test_d4rl_rows_use_dataset_ids():
  resolved = catalog.Catalog().resolve(
      {'env_cfg': {'benchmark_name': 'd4rl', 'task_name': 'halfcheetah-medium-v2'}})
  assert resolved.source == 'd4rl/halfcheetah-medium-v2'


# il-representations' env_cfg for each benchmark, with its default preprocessing keys.
ILR_ENV_CFGS = {
    'atari': {'benchmark_name': 'atari', 'task_name': 'PongNoFrameskip-v4'},
    'dm_control': {'benchmark_name': 'dm_control', 'task_name': 'reacher-easy',
                   'dm_control_frame_stack': 3},
    'procgen': {'benchmark_name': 'procgen', 'task_name': 'coinrun', 'procgen_frame_stack': 4},
    'minecraft': {'benchmark_name': 'minecraft', 'task_name': 'MineRLTreechopVectorObf-v0'},
    'magical': {'benchmark_name': 'magical', 'task_name': 'MoveToRegion'},
}


def test_all_five_benchmarks_resolve_to_our_builders():
  cat = catalog.Catalog()
  resolve = lambda name, **override: cat.resolve(
      {'env_cfg': override}, ILR_ENV_CFGS[name]).source
  assert resolve('magical') == 'magical_demos/move_to_region'
  assert resolve('atari') == 'ilr_atari_demos/pong'
  assert resolve('minecraft') == 'minerl_streams/treechop_vector_obf'
  # Frame stacks as il-representations' defaults ask: its processed shards.
  assert resolve('dm_control') == 'ilr_shards/demos-dm_control-reacher-easy'
  assert resolve('procgen') == 'ilr_shards/demos-procgen-coinrun'
  # Single frames: the native demos.
  assert resolve('dm_control', dm_control_frame_stack=1) == 'ilr_dm_control_demos/reacher_easy'
  assert resolve('procgen', procgen_frame_stack=1) == 'ilr_procgen_demos/coinrun'
  assert resolve('procgen', task_name='ninja') == 'ilr_shards/demos-procgen-ninja'
  with pytest.raises(errors.UnresolvedDatasetError,
                     match=r"dm_control_frame_stack=4, but its datasets were made otherwise: "
                     r"ilr_dm_control_demos/reacher_easy \(dm_control_frame_stack=1\); "
                     r"ilr_shards/demos-dm_control-reacher-easy \(dm_control_frame_stack=3\)"):
    resolve('dm_control', dm_control_frame_stack=4)


def test_without_preprocessing_keys_the_native_demos_come_first():
  resolved = catalog.Catalog().resolve(
      {'env_cfg': {'benchmark_name': 'dm_control', 'task_name': 'cheetah-run'}})
  assert resolved.source == 'ilr_dm_control_demos/cheetah_run'


def test_random_magical_says_why_it_cannot_be_recorded(tmp_path):
  with pytest.raises(errors.UnresolvedDatasetError,
                     match="MAGICAL's simulator cannot be installed on a current stack"):
    catalog.Catalog(random_dir=tmp_path).resolve({'type': 'random'})


def test_random_without_rollouts_names_the_record_command(tmp_path):
  with pytest.raises(errors.UnresolvedDatasetError, match=(
      f'record them with: rlds-suite record --env atari:Pong --policy random --episodes N '
      f'--out {tmp_path}/atari/PongNoFrameskip-v4')):
    catalog.Catalog(random_dir=tmp_path, data_dir=str(tmp_path / 'tfds')).resolve(
        {'type': 'random'}, ILR_ENV_CFGS['atari'])


@pytest.mark.parametrize('suite,module', [('atari', 'ale_py'), ('dm_control', 'dm_control'),
                                          ('procgen', 'procgen')])
def test_random_resolves_to_rollouts_recorded_with_rlds_suite_record(tmp_path, capsys, suite,
                                                                      module):
  pytest.importorskip(module, reason=f'{module} is installed by scripts/setup_envs.sh')
  from rlds_suite import cli  # pylint: disable=g-import-not-at-top
  from rlds_suite import streams  # pylint: disable=g-import-not-at-top
  env_cfg = ILR_ENV_CFGS[suite]
  out = catalog.random_rollouts_dir(tmp_path / 'random', suite, env_cfg['task_name'])
  env = catalog.RANDOM_ENVS[suite](env_cfg['task_name'])
  assert cli.main(['record', '--env', env, '--policy', 'random', '--episodes', '2',
                   '--max_episode_steps', '4', '--seed', '0', '--out', out, '--no_progress']) == 0
  capsys.readouterr()
  cat = catalog.Catalog(random_dir=tmp_path / 'random')
  assert cat.resolve({'type': 'random'}, env_cfg).source == out
  batch = next(streams.as_numpy(streams.stream([{'type': 'random'}], env_cfg=env_cfg,
                                               catalog=cat, batch_size=3, seed=0)))
  assert len(batch['action']) == 3
  ilr_dict = streams.load_dict_dataset([{'type': 'random'}], env_cfg=env_cfg, catalog=cat)
  assert len(ilr_dict['acts']) == 8  # Two episodes of four actions.
  assert ilr_dict['dones'].nonzero()[0].tolist() == [3, 7]


def test_streams_read_the_il_representations_shards_a_config_names(tmp_path):
  import pathlib  # pylint: disable=g-import-not-at-top
  from rlds_suite import streams  # pylint: disable=g-import-not-at-top
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top
  dummy = pathlib.Path(__file__).resolve().parents[1] / 'builders' / 'ilr_shards' / 'dummy_data'
  datasets.build('ilr_shards/demos-dm_control-reacher-easy', manual_dir=str(dummy),
                 data_dir=str(tmp_path))
  batch = next(streams.as_numpy(streams.stream(
      [{}], env_cfg=ILR_ENV_CFGS['dm_control'], catalog=catalog.Catalog(), batch_size=4, seed=0,
      data_dir=str(tmp_path))))
  assert batch['observation'].shape == (4, 9, 100, 100)


def test_magical_preprocessing_is_declared_not_applied():
  cat = catalog.Catalog()
  raw = {'benchmark_name': 'magical', 'task_name': 'MoveToCorner', 'magical_preproc': None,
         'magical_remove_null_actions': False}
  assert cat.resolve({}, raw).source == 'magical_demos/move_to_corner'
  with pytest.raises(errors.UnresolvedDatasetError, match=(
      r"magical_preproc='LoRes4E'.*magical_demos/move_to_corner \(magical_preproc=None, "
      r'magical_remove_null_actions=False\); ilr_shards/demos-magical-MoveToCorner '
      r'\(magical_preproc=LoResCHW4E\) \(the catalog does not preprocess')):
    cat.resolve({'env_cfg': {'magical_preproc': 'LoRes4E'}}, raw)
  # il-representations' processed MAGICAL shards were made with LoResCHW4E.
  assert cat.resolve({'env_cfg': {'magical_preproc': 'LoResCHW4E'}}, raw).source == (
      'ilr_shards/demos-magical-MoveToCorner')
