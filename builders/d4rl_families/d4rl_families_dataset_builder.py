"""D4RL AntMaze, Maze2D, Adroit and Kitchen datasets as RLDS: one config per released file."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Optional

from etils import epath
import numpy as np
import tensorflow_datasets as tfds

from rlds_suite import scores
from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.readers import d4rl_families
from rlds_suite.tfds import builder_base
from rlds_suite.tfds import features
from rlds_suite.builders.d4rl import d4rl_dataset_builder


@dataclasses.dataclass
class FamilyConfig(tfds.core.BuilderConfig):
  """One released file of a D4RL family."""
  dataset: Optional[d4rl_families.Dataset] = None


def _published_checksums() -> frozenset[str]:
  """URLs with a published size and SHA-256 (checksums.tsv: copied from TFDS's d4rl builders)."""
  path = epath.Path(__file__).parent / 'checksums.tsv'
  return frozenset(line.split('\t', 1)[0] for line in path.read_text().splitlines() if line.strip())


class Builder(builder_base.RLDSBuilder):
  """D4RL AntMaze (v0, v2), Maze2D, Adroit (v0, v1) and Kitchen, named like D4RL's gym ids."""

  BUILDER_CONFIGS = [
      FamilyConfig(name=dataset.name, dataset=dataset,
                   description=f'D4RL {dataset.name} ({dataset.file_name}); {dataset.family.rule}.')
      for dataset in d4rl_families.DATASETS
  ]
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Files with a published checksum (checksums.tsv) are downloaded from rail.eecs.berkeley.edu
  unless --manual_dir holds them. The others (Maze2D, Kitchen, relocate, antmaze-medium-play-v2)
  have no published checksum: download the file named by the config's URL yourself and put it in
  --manual_dir under its release name (the last part of the URL).
  """

  def _info(self) -> tfds.core.DatasetInfo:
    dataset = self.builder_config.dataset
    layout = dataset.layout
    step_metadata: dict[str, Any] = {}
    if layout.infos:
      step_metadata['infos'] = d4rl_dataset_builder._features(layout.infos)  # pylint: disable=protected-access
    if dataset.family.terminals_field:
      step_metadata[dataset.family.terminals_field] = features.scalar(
          np.bool_, doc="D4RL's relabelled terminals: the next row is within 0.5 of the goal.")
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation=features.tensor(layout.observation.shape, layout.observation.dtype),
            action=features.tensor(layout.action.shape, layout.action.dtype),
            reward=features.scalar(layout.reward.dtype),
            step_metadata=step_metadata or None,
            observation_is_copy=dataset.family.policy.marks_copies),
        supervised_keys=None,
        homepage='https://github.com/Farama-Foundation/D4RL',
        metadata=tfds.core.MetadataDict({
            **scores.reference(dataset.name).as_metadata(),
            'd4rl_name': dataset.name, 'family': dataset.family.name,
            'boundary_rule': dataset.family.rule}),
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    dataset = self.builder_config.dataset
    path = self._manual_file(dl_manager)
    if path is None:
      if dataset.url not in _published_checksums():
        raise errors.EmptyInputError(
            f'{dataset.file_name} has no published checksum: download {dataset.url} and pass its '
            'directory as --manual_dir', path=dataset.url)
      path = dl_manager.download(dataset.url)
    return {'train': progress.expect(self._generate_examples(epath.Path(path)),
                                     d4rl_families.expected_totals(path, dataset))}

  def _manual_file(self, dl_manager: tfds.download.DownloadManager) -> Optional[epath.Path]:
    try:
      manual_dir = dl_manager.manual_dir
    except AssertionError:  # No manual dir, or an empty one.
      return None
    path = manual_dir / self.builder_config.dataset.file_name
    if not path.is_file():
      raise errors.EmptyInputError(f'no {self.builder_config.dataset.file_name} here',
                                   path=os.fspath(manual_dir))
    return path

  def _generate_examples(self, path: epath.Path):
    trajectories, counts = d4rl_families.read(path, self.builder_config.dataset)
    for index, trajectory in enumerate(trajectories):
      yield index, episodes.to_episode(trajectory).as_example()
    # Generation runs in this process: the counts reach metadata.json with the dataset info.
    self.info.metadata.update({'boundaries': counts.as_metadata()})
