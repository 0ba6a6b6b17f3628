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
