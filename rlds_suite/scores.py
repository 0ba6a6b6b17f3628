"""Normalised scores: the reference returns that offline-RL papers report scores against.

normalized = (return - low) / (high - low), so 0 is the low reference (a random policy) and 1 the
high one (an expert, or a human tester on Atari). References, from their authors' own tables:

* D4RL: `REF_MIN_SCORE` / `REF_MAX_SCORE` of D4RL's `d4rl/infos.py` (Farama-Foundation/D4RL),
  including the loops there that give gym-mujoco v1/v2 the v0 refs and Adroit v1 the human-v0 refs.
* Atari: random and human scores of the Atari-57 table (DeepMind's `dqn_zoo/atari_data.py`, the
  scores of Mnih et al. 2015 / Wang et al. 2016).
* Minari: `ref_min_score` / `ref_max_score` of each dataset's own metadata.json.

Builders store their reference in the dataset metadata (TFDS `metadata.json`, keys
`ref_min_score`, `ref_max_score`, `ref_source`); `reference(name, metadata)` prefers those, then
looks the name up in the tables. Pure Python and numpy.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from typing import Any, Mapping, Optional

import numpy as np

from rlds_suite.core import errors

MIN_KEY, MAX_KEY, SOURCE_KEY = 'ref_min_score', 'ref_max_score', 'ref_source'


@dataclasses.dataclass(frozen=True)
class Reference:
  """The returns that normalise to 0 (`low`) and 1 (`high`), and where they come from."""
  low: float
  high: float
  source: str

  def normalize(self, returns: Any) -> np.ndarray:
    return (np.asarray(returns, dtype=np.float64) - self.low) / (self.high - self.low)

  def as_metadata(self) -> dict[str, Any]:
    """The dataset-metadata entries a builder stores (read back by `reference`)."""
    return {MIN_KEY: self.low, MAX_KEY: self.high, SOURCE_KEY: self.source}


# D4RL d4rl/infos.py, REF_MIN_SCORE and REF_MAX_SCORE (name: (min, max)).
_D4RL = {
    'maze2d-open-v0': (0.01, 20.66),
    'maze2d-umaze-v1': (23.85, 161.86),
    'maze2d-medium-v1': (13.13, 277.39),
    'maze2d-large-v1': (6.7, 273.99),
    'maze2d-open-dense-v0': (11.17817, 27.166538620695782),
    'maze2d-umaze-dense-v1': (68.537689, 193.66285642381482),
    'maze2d-medium-dense-v1': (44.264742, 297.4552547777125),
    'maze2d-large-dense-v1': (30.569041, 303.4857382709002),
    'minigrid-fourrooms-v0': (0.01442, 2.89685),
    'minigrid-fourrooms-random-v0': (0.01442, 2.89685),
    'pen-human-v0': (96.262799, 3076.8331017826877),
    'pen-cloned-v0': (96.262799, 3076.8331017826877),
    'pen-expert-v0': (96.262799, 3076.8331017826877),
    'hammer-human-v0': (-274.856578, 12794.134825156867),
    'hammer-cloned-v0': (-274.856578, 12794.134825156867),
    'hammer-expert-v0': (-274.856578, 12794.134825156867),
    'relocate-human-v0': (-6.425911, 4233.877797728884),
    'relocate-cloned-v0': (-6.425911, 4233.877797728884),
    'relocate-expert-v0': (-6.425911, 4233.877797728884),
    'door-human-v0': (-56.512833, 2880.5693087298737),
    'door-cloned-v0': (-56.512833, 2880.5693087298737),
    'door-expert-v0': (-56.512833, 2880.5693087298737),
    'halfcheetah-random-v0': (-280.178953, 12135.0),
    'halfcheetah-medium-v0': (-280.178953, 12135.0),
    'halfcheetah-expert-v0': (-280.178953, 12135.0),
    'halfcheetah-medium-replay-v0': (-280.178953, 12135.0),
    'halfcheetah-medium-expert-v0': (-280.178953, 12135.0),
    'walker2d-random-v0': (1.629008, 4592.3),
    'walker2d-medium-v0': (1.629008, 4592.3),
    'walker2d-expert-v0': (1.629008, 4592.3),
    'walker2d-medium-replay-v0': (1.629008, 4592.3),
    'walker2d-medium-expert-v0': (1.629008, 4592.3),
    'hopper-random-v0': (-20.272305, 3234.3),
    'hopper-medium-v0': (-20.272305, 3234.3),
    'hopper-expert-v0': (-20.272305, 3234.3),
    'hopper-medium-replay-v0': (-20.272305, 3234.3),
    'hopper-medium-expert-v0': (-20.272305, 3234.3),
    'ant-random-v0': (-325.6, 3879.7),
    'ant-medium-v0': (-325.6, 3879.7),
    'ant-expert-v0': (-325.6, 3879.7),
    'ant-medium-replay-v0': (-325.6, 3879.7),
    'ant-medium-expert-v0': (-325.6, 3879.7),
    'antmaze-umaze-v0': (0.0, 1.0),
    'antmaze-umaze-diverse-v0': (0.0, 1.0),
    'antmaze-medium-play-v0': (0.0, 1.0),
    'antmaze-medium-diverse-v0': (0.0, 1.0),
    'antmaze-large-play-v0': (0.0, 1.0),
    'antmaze-large-diverse-v0': (0.0, 1.0),
    'antmaze-umaze-v2': (0.0, 1.0),
    'antmaze-umaze-diverse-v2': (0.0, 1.0),
    'antmaze-medium-play-v2': (0.0, 1.0),
    'antmaze-medium-diverse-v2': (0.0, 1.0),
    'antmaze-large-play-v2': (0.0, 1.0),
    'antmaze-large-diverse-v2': (0.0, 1.0),
    'kitchen-complete-v0': (0.0, 4.0),
    'kitchen-partial-v0': (0.0, 4.0),
    'kitchen-mixed-v0': (0.0, 4.0),
    'flow-ring-random-v0': (-165.22, 24.42),
    'flow-ring-controller-v0': (-165.22, 24.42),
    'flow-merge-random-v0': (118.67993, 330.03179),
    'flow-merge-controller-v0': (118.67993, 330.03179),
    'carla-lane-v0': (-0.8503839912088142, 1023.5784385429523),
    'carla-town-v0': (-114.81579500772153, 2440.1772022247314),
    'bullet-halfcheetah-random-v0': (-1275.766996, 2381.6725),
    'bullet-halfcheetah-medium-v0': (-1275.766996, 2381.6725),
    'bullet-halfcheetah-expert-v0': (-1275.766996, 2381.6725),
    'bullet-halfcheetah-medium-expert-v0': (-1275.766996, 2381.6725),
    'bullet-halfcheetah-medium-replay-v0': (-1275.766996, 2381.6725),
    'bullet-hopper-random-v0': (20.058972, 1441.8059623430963),
    'bullet-hopper-medium-v0': (20.058972, 1441.8059623430963),
    'bullet-hopper-expert-v0': (20.058972, 1441.8059623430963),
    'bullet-hopper-medium-expert-v0': (20.058972, 1441.8059623430963),
    'bullet-hopper-medium-replay-v0': (20.058972, 1441.8059623430963),
    'bullet-ant-random-v0': (373.705955, 2650.495),
    'bullet-ant-medium-v0': (373.705955, 2650.495),
    'bullet-ant-expert-v0': (373.705955, 2650.495),
    'bullet-ant-medium-expert-v0': (373.705955, 2650.495),
    'bullet-ant-medium-replay-v0': (373.705955, 2650.495),
    'bullet-walker2d-random-v0': (16.523877, 1623.6476303317536),
    'bullet-walker2d-medium-v0': (16.523877, 1623.6476303317536),
    'bullet-walker2d-expert-v0': (16.523877, 1623.6476303317536),
    'bullet-walker2d-medium-expert-v0': (16.523877, 1623.6476303317536),
    'bullet-walker2d-medium-replay-v0': (16.523877, 1623.6476303317536),
    'bullet-maze2d-open-v0': (8.75, 64.15),
    'bullet-maze2d-umaze-v0': (32.46, 153.99),
    'bullet-maze2d-medium-v0': (14.87, 238.05),
    'bullet-maze2d-large-v0': (1.82, 285.92),
}
# infos.py: gym-mujoco v1 and v2 take their task's random-v0 refs; Adroit v1 its human-v0 refs.
for _task in ('halfcheetah', 'hopper', 'walker2d', 'ant'):
  for _kind in ('random', 'medium', 'expert', 'medium-replay', 'full-replay', 'medium-expert'):
    for _version in ('v1', 'v2'):
      _D4RL[f'{_task}-{_kind}-{_version}'] = _D4RL[f'{_task}-random-v0']
for _task in ('hammer', 'pen', 'relocate', 'door'):
  for _kind in ('human', 'expert', 'cloned'):
    _D4RL[f'{_task}-{_kind}-v1'] = _D4RL[f'{_task}-human-v0']
D4RL_REFERENCES: Mapping[str, Reference] = {
    name: Reference(low, high, 'd4rl') for name, (low, high) in _D4RL.items()}

# dqn_zoo/atari_data.py (Atari-57): game: (random, human).
_ATARI = {
    'alien': (227.8, 7127.7), 'amidar': (5.8, 1719.5), 'assault': (222.4, 742.0),
    'asterix': (210.0, 8503.3), 'asteroids': (719.1, 47388.7), 'atlantis': (12850.0, 29028.1),
    'bank_heist': (14.2, 753.1), 'battle_zone': (2360.0, 37187.5), 'beam_rider': (363.9, 16926.5),
    'berzerk': (123.7, 2630.4), 'bowling': (23.1, 160.7), 'boxing': (0.1, 12.1),
    'breakout': (1.7, 30.5), 'centipede': (2090.9, 12017.0), 'chopper_command': (811.0, 7387.8),
    'crazy_climber': (10780.5, 35829.4), 'defender': (2874.5, 18688.9),
    'demon_attack': (152.1, 1971.0), 'double_dunk': (-18.6, -16.4), 'enduro': (0.0, 860.5),
    'fishing_derby': (-91.7, -38.7), 'freeway': (0.0, 29.6), 'frostbite': (65.2, 4334.7),
    'gopher': (257.6, 2412.5), 'gravitar': (173.0, 3351.4), 'hero': (1027.0, 30826.4),
    'ice_hockey': (-11.2, 0.9), 'jamesbond': (29.0, 302.8), 'kangaroo': (52.0, 3035.0),
    'krull': (1598.0, 2665.5), 'kung_fu_master': (258.5, 22736.3),
    'montezuma_revenge': (0.0, 4753.3), 'ms_pacman': (307.3, 6951.6),
    'name_this_game': (2292.3, 8049.0), 'phoenix': (761.4, 7242.6), 'pitfall': (-229.4, 6463.7),
    'pong': (-20.7, 14.6), 'private_eye': (24.9, 69571.3), 'qbert': (163.9, 13455.0),
    'riverraid': (1338.5, 17118.0), 'road_runner': (11.5, 7845.0), 'robotank': (2.2, 11.9),
    'seaquest': (68.4, 42054.7), 'skiing': (-17098.1, -4336.9), 'solaris': (1236.3, 12326.7),
    'space_invaders': (148.0, 1668.7), 'star_gunner': (664.0, 10250.0),
    'surround': (-10.0, 6.5), 'tennis': (-23.8, -8.3), 'time_pilot': (3568.0, 5229.2),
    'tutankham': (11.4, 167.6), 'up_n_down': (533.4, 11693.2), 'venture': (0.0, 1187.5),
    'video_pinball': (16256.9, 17667.9), 'wizard_of_wor': (563.5, 4756.5),
    'yars_revenge': (3092.9, 54576.9), 'zaxxon': (32.5, 9173.3),
}
ATARI_REFERENCES: Mapping[str, Reference] = {
    game: Reference(low, high, 'atari') for game, (low, high) in _ATARI.items()}


def atari_game(name: str) -> str:
  """The Atari-57 key of a game name: 'MsPacman', 'MsPacmanNoFrameskip-v4', 'atari:Pong',
  'rlu_atari/Pong_run_1' and 'ms_pacman' all name their game the same way."""
  name = re.split(r'[:/]', name)[-1]
  name = re.sub(r'(NoFrameskip)?-v\d+$', '', name)
  name = re.sub(r'_run_?\d+$', '', name)
  name = re.sub(r'(?<=[a-z0-9])([A-Z])', r'_\1', name).lower()
  return {'montezumas_revenge': 'montezuma_revenge', 'up_and_down': 'up_n_down',
          'james_bond': 'jamesbond'}.get(name, name)


def reference(name: str, metadata: Optional[Mapping[str, Any]] = None) -> Reference:
  """The reference of dataset `name` (a TFDS name such as 'd4rl/hopper-medium-v2', a D4RL or
  Minari id, or an Atari game): the dataset metadata's own refs when it has both (Minari, or what a
  builder stored), else D4RL's table, else the Atari table. Raises LookupError when none has it."""
  metadata = metadata or {}
  if metadata.get(MIN_KEY) is not None and metadata.get(MAX_KEY) is not None:
    return Reference(float(metadata[MIN_KEY]), float(metadata[MAX_KEY]),
                     str(metadata.get(SOURCE_KEY, 'metadata')))
  config = name.split('/')[-1] if '/' in name else name
  if config in D4RL_REFERENCES:
    return D4RL_REFERENCES[config]
  game = atari_game(name)
  if game in ATARI_REFERENCES:
    return ATARI_REFERENCES[game]
  raise LookupError(f'{name}: no reference scores in its metadata, D4RL\'s infos.py or the '
                    'Atari-57 table')


def atari_metadata(game: str) -> dict[str, Any]:
  """Dataset metadata holding an Atari game's random and human scores (empty for games outside
  Atari-57, e.g. AirRaid or Pooyan of the DQN Replay Dataset), for builders of Atari datasets."""
  reference_of_game = ATARI_REFERENCES.get(atari_game(game))
  return reference_of_game.as_metadata() if reference_of_game else {}


def normalize(name: str, returns: Any, metadata: Optional[Mapping[str, Any]] = None) -> np.ndarray:
  """(returns - low) / (high - low) with `reference(name, metadata)`; float64, same shape."""
  return reference(name, metadata).normalize(returns)


def directory_metadata(dataset_dir: errors.PathLike) -> dict[str, Any]:
  """The dataset metadata a TFDS build stored (its metadata.json), {} when it stored none."""
  return _read_json(os.path.join(os.fspath(dataset_dir), 'metadata.json'))


def directory_reference(dataset_dir: errors.PathLike) -> Optional[Reference]:
  """The reference of a prepared dataset (its version directory, e.g. builder.data_dir): the refs
  its metadata.json stored, else the one its name names ('builder/config' from dataset_info.json).
  None when neither has one: not every dataset has a normalised score."""
  info = _read_json(os.path.join(os.fspath(dataset_dir), 'dataset_info.json'))
  name = '/'.join(part for part in (info.get('name'), info.get('configName')) if part)
  try:
    return reference(name or os.path.basename(os.fspath(dataset_dir)), directory_metadata(dataset_dir))
  except LookupError:
    return None


def _read_json(path: str) -> dict[str, Any]:
  """A JSON file's object, {} when the file does not exist."""
  if not os.path.isfile(path):
    return {}
  with open(path, encoding='utf-8') as f:
    try:
      return json.load(f)
    except json.JSONDecodeError as e:
      raise errors.CorruptFileError(f'not JSON ({e})', path=path) from e
