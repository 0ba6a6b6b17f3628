"""MineRL v3 demonstration streams (rendered.npz + metadata.json + recording.mp4) as RLDS, one
config per environment, with or without the video's pov frames."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Mapping, Optional

import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import progress
from rlds_suite.readers import minerl
from rlds_suite.tfds import builder_base
from rlds_suite.tfds import features

_FEATURES = {
    minerl.Kind.FLAG: lambda: features.scalar(np.int64),
    minerl.Kind.COUNT: lambda: features.scalar(np.int64),
    minerl.Kind.SCALAR: lambda: features.scalar(np.float64),
    minerl.Kind.CAMERA: lambda: features.tensor((2,), np.float64, doc='Pitch, yaw (degrees).'),
    minerl.Kind.VECTOR: lambda: features.tensor((64,), np.float64, doc='Obfuscated vector.'),
    minerl.Kind.TEXT: lambda: features.text(doc='Enum value (e.g. "none").'),
}


@dataclasses.dataclass
class MineRLConfig(tfds.core.BuilderConfig):
  env: Optional[minerl.Env] = None
  with_video: bool = True


def _configs() -> list[MineRLConfig]:
  configs = []
  for name, env in minerl.ENVS.items():
    configs.append(MineRLConfig(name=name, env=env, description=f'{env.env_id} streams.'))
    configs.append(MineRLConfig(
        name=f'{name}_without_video', env=env, with_video=False,
        description=f'{env.env_id} streams without pov (recording.mp4 not read).'))
  return configs


def _declare(keys: Mapping[str, minerl.Kind]) -> dict[str, Any]:
  return minerl.unflatten({key: _FEATURES[kind]() for key, kind in keys.items()})


def _features_dict(nested: Mapping[str, Any]) -> tfds.features.FeaturesDict:
  return tfds.features.FeaturesDict({
      key: _features_dict(value) if isinstance(value, Mapping) else value
      for key, value in nested.items()})


class Builder(builder_base.RLDSBuilder):
  """MineRL v3 streams (minerllabs/minerl data, as il-representations' Minecraft loader reads)."""

  BUILDER_CONFIGS = _configs()
  MANUAL_DOWNLOAD_INSTRUCTIONS = """
  Put MineRL v3 data in --manual_dir as minerl.data.download lays it out:
  <Env>/<stream>/{rendered.npz, metadata.json, recording.mp4}, the <Env> folders at any depth
  (MineRLTreechopVectorObf-v0/v3_.../). Configs without '_without_video' decode recording.mp4
  (pip install rlds_suite[minerl]) and refuse streams without it.
  """

  def _info(self) -> tfds.core.DatasetInfo:
    config = self.builder_config
    observation = _declare(config.env.observations)
    if config.with_video:
      observation[minerl.POV] = features.image(minerl.POV_SHAPE,
                                               doc='Point of view, RGB, from recording.mp4.')
    return self.dataset_info_from_configs(
        features=features.rlds_features(
            observation=_features_dict(observation),
            action=_features_dict(_declare(config.env.actions)),
            reward=features.scalar(np.float32, doc='Reward earned by the action.'),
            episode_metadata={
                'stream_name': features.text(doc='Stream directory name.'),
                'success': features.scalar(np.bool_, doc='metadata.json success: the task was '
                                           'done (the episode ended by termination).'),
                'duration_ms': features.scalar(np.int64, doc='metadata.json duration_ms.'),
                'true_video_frame_count': features.scalar(np.int64),
                'total_reward': features.scalar(np.float64, doc='metadata.json total_reward.'),
            }),
        supervised_keys=None,
        homepage='https://minerl.io/dataset/',
    )

  def _split_generators(self, dl_manager: tfds.download.DownloadManager):
    root = pathlib.Path(dl_manager.manual_dir)
    streams = minerl.stream_dirs(root, self.builder_config.env)
    return {'train': progress.expect(self._generate_examples(streams),
                                     minerl.expected_totals(streams))}

  def _generate_examples(self, streams):
    config = self.builder_config
    for stream in streams:
      trajectory = minerl.read_stream(stream, config.env, with_video=config.with_video)
      with errors.located(stream):
        episode = episodes.to_episode(trajectory)
      yield stream.name, episode.as_example()
