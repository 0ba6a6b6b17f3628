"""The tasks il-representations (EIRLI) makes processed shards for, declared as data.

Each row says what a shard of that (benchmark, task) holds: the observation (channels-first frame
stack as il-representations' vec envs emit it), the action space, the colour space, the env_cfg
preprocessing keys the frames were made with, and the physics-state size kept in `infos`.
Builders declare features from it and exports rebuild the shard metadata's gym spaces from it.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Optional

import numpy as np

ATARI, DM_CONTROL, PROCGEN, MAGICAL = 'atari', 'dm_control', 'procgen', 'magical'

# env_cfg keys that change what a shard's frames hold, per benchmark.
PREPROCESSING_KEYS = {DM_CONTROL: ('dm_control_frame_stack',), PROCGEN: ('procgen_frame_stack',),
                      MAGICAL: ('magical_preproc',)}


@dataclasses.dataclass(frozen=True)
class TaskLayout:
  """What one (benchmark, task)'s shards hold."""
  benchmark: str
  task: str
  observation_shape: tuple[int, ...]
  num_actions: Optional[int] = None  # Discrete action space of n actions...
  action_dim: Optional[int] = None  # ...or a Box of this many float32 values in [-1, 1].
  color_space: str = 'RGB'  # il-representations' ColorSpace: 'RGB' or 'GRAY'.
  preprocessing: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  has_internal_state: bool = False  # infos carry the physics state and the env discount.
  # dtype of the shards' `rews` members (exports write it back): procgen's loader stores float32,
  # dm_control's float64 (the authors' reacher shard).
  reward_dtype: np.dtype = np.dtype(np.float64)

  @property
  def observation_dtype(self) -> np.dtype:
    return np.dtype(np.uint8)

  @property
  def discrete(self) -> bool:
    return self.num_actions is not None


# il-representations' env_cfg defaults: Atari frames are 4 stacked 84x84 grayscale frames
# (AtariWrapper + VecFrameStack(4)); dm_control 3 stacked 100x100 RGB frames
# (dm_control_frame_stack=3); procgen 4 stacked 64x64 RGB frames (procgen_frame_stack=4), 15
# actions in every game; MAGICAL LoResCHW4E (magical_preproc) 4 stacked egocentric 96x96 RGB
# frames, 18 actions in every task.
_ATARI_GAMES = {'PongNoFrameskip-v4': 6, 'BreakoutNoFrameskip-v4': 4}
_DM_CONTROL_TASKS = {'finger-spin': 2, 'cheetah-run': 6, 'walker-walk': 6, 'cartpole-swingup': 1,
                     'reacher-easy': 2, 'ball-in-cup-catch': 2}
PROCGEN_GAMES = ('bigfish', 'bossfight', 'caveflyer', 'chaser', 'climber', 'coinrun', 'dodgeball',
                 'fruitbot', 'heist', 'jumper', 'leaper', 'maze', 'miner', 'ninja', 'plunder',
                 'starpilot')

MAGICAL_TASKS = ('MoveToCorner', 'MoveToRegion', 'MatchRegions', 'MakeLine', 'FixColour', 'FindDupe',
                 'ClusterColour', 'ClusterShape')

LAYOUTS: dict[tuple[str, str], TaskLayout] = {}
for _game, _n in _ATARI_GAMES.items():
  LAYOUTS[(ATARI, _game)] = TaskLayout(ATARI, _game, (4, 84, 84), num_actions=_n,
                                      color_space='GRAY')
for _task, _dim in _DM_CONTROL_TASKS.items():
  LAYOUTS[(DM_CONTROL, _task)] = TaskLayout(
      DM_CONTROL, _task, (9, 100, 100), action_dim=_dim,
      preprocessing={'dm_control_frame_stack': 3}, has_internal_state=True)
for _game in PROCGEN_GAMES:
  LAYOUTS[(PROCGEN, _game)] = TaskLayout(PROCGEN, _game, (12, 64, 64), num_actions=15,
                                        preprocessing={'procgen_frame_stack': 4},
                                        reward_dtype=np.dtype(np.float32))


for _task in MAGICAL_TASKS:
  LAYOUTS[(MAGICAL, _task)] = TaskLayout(MAGICAL, _task, (12, 96, 96), num_actions=18,
                                        preprocessing={'magical_preproc': 'LoResCHW4E'})


def layout(benchmark: str, task: str) -> Optional[TaskLayout]:
  return LAYOUTS.get((benchmark, task))
