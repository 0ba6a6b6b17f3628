"""D4RL gym-mujoco locomotion datasets (v2) as RLDS: one config per task and dataset."""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Mapping, Optional

from etils import epath
import tensorflow_datasets as tfds

from rlds_suite.tfds import builder_base
from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.core import spaces
from rlds_suite.tfds import features
from rlds_suite.readers import d4rl


@dataclasses.dataclass
class D4RLConfig(tfds.core.BuilderConfig):
  """One released file: a task and a dataset kind; `time_limit` only for files without timeouts."""
  task: Optional[d4rl.Task] = None
  collection: Optional[d4rl.Collection] = None
  time_limit: Optional[int] = None

  @property
  def file_name(self) -> str:
    return d4rl.file_name(self.task, self.collection)

  @property
  def url(self) -> str:
    return d4rl.url(self.task, self.collection)

  @property
  def layout(self) -> d4rl.Layout:
    return d4rl.locomotion_layout(self.task, self.collection)


def _feature(spec: d4rl.Spec) -> Any:
  if spec.is_text:
    return features.text()
  if not spec.shape:
    return features.scalar(spec.dtype)
  return features.tensor(spec.shape, spec.dtype)


def _features(specs: Mapping[str, Any]) -> dict[str, Any]:
  return {name: _feature(value) if isinstance(value, d4rl.Spec) else _features(value)
          for name, value in specs.items()}


class Builder(builder_base.RLDSBuilder):
  """D4RL gym-mujoco v2 (halfcheetah, hopper, walker2d, ant x random ... full-replay)."""

  BUILDER_CONFIGS = [
      D4RLConfig(name=f'{task.name}-{collection.name}-v2', task=task, collection=collection,
                 description=f'D4RL {task.name}-{collection.name}-v2 ({d4rl.file_name(task, collection)}).')
      for task in d4rl.LOCOMOTION_TASKS
      for collection in d4rl.V2_COLLECTIONS
  ]
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Optional: files are downloaded from rail.eecs.berkeley.edu (checksums.tsv). To use local copies,
  put the config's file under its release name (e.g. halfcheetah_medium-v2.hdf5, the last part of
  its URL) in --manual_dir; it is then read instead of downloading, without a checksum check.
  """

  def __init__(self, *, time_limit: Optional[int] = None, **kwargs: Any):
    """`time_limit` (the env's max_episode_steps) is needed for files without timeouts."""
    self._time_limit = time_limit
    super().__init__(**kwargs)

  def _info(self) -> tfds.core.DatasetInfo:
    layout = self.builder_config.layout
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation=features.tensor(layout.observation.shape, layout.observation.dtype),
            action=features.tensor(layout.action.shape, layout.action.dtype),
            reward=features.scalar(layout.reward.dtype),
            step_metadata={d4rl.INFOS: _features(layout.infos)} if layout.infos else None,
            episode_metadata=_features(layout.metadata),
            observation_is_copy=d4rl.WITHOUT_NEXT_OBSERVATIONS.marks_copies),
        supervised_keys=None,
        # Every gym-mujoco task's actuators take [-1, 1] (its action_space).
        metadata=tfds.core.MetadataDict(spaces.as_metadata(action=spaces.Box(-1.0, 1.0))),
        homepage='https://github.com/Farama-Foundation/D4RL',
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    path = self._manual_file(dl_manager) or dl_manager.download(self.builder_config.url)
    time_limit = self._time_limit or self.builder_config.time_limit
    return {'train': progress.expect(self._generate_examples(epath.Path(path)),
                                     d4rl.expected_totals(path, time_limit))}

  def _manual_file(self, dl_manager: tfds.download.DownloadManager) -> Optional[epath.Path]:
    try:
      manual_dir = dl_manager.manual_dir
    except AssertionError:  # No manual dir, or an empty one: download instead.
      return None
    path = manual_dir / self.builder_config.file_name
    if not path.is_file():
      # A manual_dir given for this build must hold the file: no silent fall-back to downloading.
      raise errors.EmptyInputError(f'no {self.builder_config.file_name} here',
                                   path=os.fspath(manual_dir))
    return path

  def _generate_examples(self, path: epath.Path):
    time_limit = self._time_limit or self.builder_config.time_limit
    trajectories = d4rl.read_trajectories(path, self.builder_config.layout, time_limit=time_limit)
    for index, trajectory in enumerate(trajectories):
      yield index, episodes.to_episode(trajectory).as_example()
