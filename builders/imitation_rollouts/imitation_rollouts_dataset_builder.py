"""HumanCompatibleAI/imitation expert rollouts as RLDS (one config per declared environment layout)."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Optional

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import progress
from rlds_suite.core import spaces
from rlds_suite.tfds import builder_base
from rlds_suite.tfds import features
from rlds_suite.readers import imitation


@dataclasses.dataclass
class ImitationConfig(tfds.core.BuilderConfig):
  layout: Optional[imitation.Layout] = None


class Builder(builder_base.RLDSBuilder):
  """imitation rollouts (npz of `types.save`, or the older pickle of TrajectoryWithRew)."""

  BUILDER_CONFIGS = [
      ImitationConfig(name=name, layout=layout,
                      description=f'{layout.env_id} rollouts ({layout.file_prefix}*.npz/.pkl).')
      for name, layout in imitation.LAYOUTS.items()
  ]
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Put imitation rollout files (.npz written by imitation.data.types.save, or the older .pkl) in
  --manual_dir. A config reads the files whose name, or a folder on the way to them, starts with
  its prefix: cartpole_*.npz, or imitation's own layout expert_models/cartpole_0/rollouts/final.npz.
  Example: imitation's tests/testdata/expert_models/cartpole_0/rollouts/final.npz at commit
  e5ef18806c449ca47153b494a02471c5e2ae3a14 on GitHub. The builder downloads nothing, so it keeps no
  checksums.
  """

  def _info(self) -> tfds.core.DatasetInfo:
    layout = self.builder_config.layout
    step_metadata = {}
    if layout.info_keys:
      step_metadata['infos'] = tfds.features.FeaturesDict({
          key: features.tensor(shape, dtype, doc=f'info[{key!r}]; 0 on the final step.')
          for key, (shape, dtype) in layout.info_keys.items()
      })
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation=features.tensor(layout.observation_shape, layout.observation_dtype,
                                        doc=f'{layout.env_id} observation.'),
            action=features.tensor(layout.action_shape, layout.action_dtype,
                                   doc=f'{layout.env_id} action; 0 on the final step.'),
            reward=features.scalar(layout.reward_dtype,  # float64 in imitation: kept exact.
                                   doc='Reward earned by the action; 0 when has_rewards is False.'),
            step_metadata=step_metadata,
            episode_metadata={
                'source_file': features.text(doc='Rollout file name.'),
                'trajectory_index': features.scalar(np.int64, doc='Index in the file.'),
                'native_terminal': features.scalar(
                    np.bool_, doc="imitation's terminal flag (True for every complete episode)."),
                'has_rewards': features.scalar(
                    np.bool_, doc='False for Trajectory (not TrajectoryWithRew) files.'),
            }),
        supervised_keys=None,
        metadata=tfds.core.MetadataDict(spaces.as_metadata(action=layout.action_space)
                                        if layout.action_space else {}),
        homepage='https://github.com/HumanCompatibleAI/imitation/blob/'
        'e5ef18806c449ca47153b494a02471c5e2ae3a14/tests/testdata/expert_models/cartpole_0/'
        'rollouts/final.npz',
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    root = pathlib.Path(dl_manager.manual_dir)
    paths = imitation.rollout_paths(root, self.builder_config.layout)
    return {'train': progress.expect(self._generate_examples(root, paths),
                                     imitation.expected_totals(paths))}

  def _generate_examples(self, root, paths):
    for path in progress.files(paths):
      for index, episode in enumerate(imitation.read_episodes(path, self.builder_config.layout)):
        yield f'{path.relative_to(root)}/{index}', episode.as_example()
