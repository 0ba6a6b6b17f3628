"""d4rl_families over dummy_data (written by tests/fixtures/write_d4rl_families.py with each family's
own generation logic)."""

import pathlib
import shutil

import numpy as np
import pytest
import tensorflow_datasets as tfds

import rlds_suite
from rlds_suite import scores
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.tfds import datasets
from rlds_suite.builders.d4rl_families import d4rl_families_dataset_builder

DUMMY_DATA = pathlib.Path(__file__).parent / 'dummy_data'


def _build(config: str, manual_dir: pathlib.Path, data_dir: pathlib.Path):
  return datasets.build(f'd4rl_families/{config}', manual_dir=str(manual_dir),
                                        data_dir=str(data_dir))


def _episodes(builder) -> list:
  return list(datasets.numpy_episodes(builder.as_dataset(split='train')))


@pytest.mark.parametrize('config,num_episodes,num_rows,terminated', [
    ('antmaze-umaze-diverse-v2', 5, 40, 0),
    ('antmaze-umaze-diverse-v0', 5, 40, 0),
    ('maze2d-umaze-v1', 7, 30, 0),
    ('door-human-v1', 3, 14, 0),
    ('pen-expert-v1', 3, 16, 1),
    ('kitchen-partial-v0', 3, 13, 0),
])
def test_builds_and_validates(config, num_episodes, num_rows, terminated, tmp_path):
  builder = _build(config, DUMMY_DATA, tmp_path)
  report = rlds_suite.validate(builder)
  report.raise_if_invalid()
  # These families did not keep the final observation: one step per file row, and a placeholder
  # last step per episode repeating the last observation (marked observation_is_copy).
  assert (report.num_episodes, report.num_steps) == (num_episodes, num_rows + num_episodes)
  found = _episodes(builder)
  for episode in found:
    copies = episode[fields.STEPS][fields.OBSERVATION_IS_COPY]
    assert copies[-1] and not copies[:-1].any()
  assert sum(bool(e[fields.STEPS][fields.IS_TERMINAL][-1]) for e in found) == terminated
  stored = scores.directory_metadata(builder.data_dir)
  assert stored['d4rl_name'] == config
  assert stored['boundaries']['episodes'] == num_episodes
  reference = scores.reference(config)
  assert (stored['ref_min_score'], stored['ref_max_score']) == (reference.low, reference.high)


def test_antmaze_metadata_counts_inferred_boundaries(tmp_path):
  builder = _build('antmaze-umaze-diverse-v2', DUMMY_DATA, tmp_path)
  stored = scores.directory_metadata(builder.data_dir)
  assert stored['boundaries'] == {'episodes': 5, 'inferred_ends': 1, 'stored_timeouts': 3,
                                  'stored_timeouts_at_ends': 3}
  assert stored['family'] == 'antmaze' and 'jumps' in stored['boundary_rule']
  # D4RL antmaze refs (0, 1): normalised score = return.
  assert (stored['ref_min_score'], stored['ref_max_score']) == (0.0, 1.0)
  lengths = sorted(len(e[fields.STEPS][fields.REWARD]) for e in _episodes(builder))
  assert lengths == [6, 6, 11, 11, 11]  # Rows + the placeholder last step.
  goal = np.concatenate([e[fields.STEPS]['goal_reached'] for e in _episodes(builder)])
  assert goal.sum() == 8


def test_adroit_infos_and_float_types(tmp_path):
  builder = _build('pen-expert-v1', DUMMY_DATA, tmp_path)
  steps = builder.info.features[fields.STEPS]
  assert set(steps['infos'].keys()) == {'qpos', 'qvel', 'desired_orien', 'action_mean',
                                        'action_log_std'}
  v0_cloned = tfds.builder('d4rl_families/door-cloned-v0', data_dir=str(tmp_path))
  v0_steps = v0_cloned.info.features[fields.STEPS]
  assert v0_steps[fields.OBSERVATION].np_dtype == np.float64
  assert v0_steps[fields.ACTION].np_dtype == np.float32


def test_unpublished_checksum_needs_manual_dir(tmp_path):
  builder = tfds.builder('d4rl_families/kitchen-mixed-v0', data_dir=str(tmp_path))
  with pytest.raises(errors.EmptyInputError, match='no published checksum'):
    builder.download_and_prepare(download_config=tfds.download.DownloadConfig(
        download_mode=tfds.download.GenerateMode.REUSE_DATASET_IF_EXISTS))
  assert not builder.is_prepared()


def test_truncated_file_leaves_nothing_prepared(tmp_path):
  manual = tmp_path / 'manual'
  manual.mkdir()
  source = DUMMY_DATA / 'door-human-v1.hdf5'
  (manual / source.name).write_bytes(source.read_bytes()[:4000])
  with pytest.raises(errors.CorruptFileError, match='door-human-v1.hdf5'):
    _build('door-human-v1', manual, tmp_path / 'out')
  builder = d4rl_families_dataset_builder.Builder(config='door-human-v1',
                                                  data_dir=str(tmp_path / 'out'))
  assert not builder.is_prepared()


def test_manual_dir_without_the_file(tmp_path):
  manual = tmp_path / 'manual'
  manual.mkdir()
  shutil.copy(DUMMY_DATA / 'door-human-v1.hdf5', manual)
  with pytest.raises(errors.EmptyInputError, match='no pen-expert-v1.hdf5 here'):
    _build('pen-expert-v1', manual, tmp_path / 'out')


class D4RLFamiliesTest(tfds.testing.DatasetBuilderTestCase):
  """TFDS's standard builder checks (manual_dir = dummy_data) on configs with 3 episodes each."""
  DATASET_CLASS = d4rl_families_dataset_builder.Builder
  BUILDER_CONFIG_NAMES_TO_TEST = ['door-human-v1', 'pen-expert-v1', 'kitchen-partial-v0']
  SPLITS = {'train': 3}
