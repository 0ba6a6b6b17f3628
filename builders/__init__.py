"""rlds_suite's TFDS builders, one folder per dataset (installed as rlds_suite.builders).

Importing this package registers every builder with TFDS.
"""

from rlds_suite.builders.magical_demos import magical_demos_dataset_builder
from rlds_suite.builders.imitation_rollouts import imitation_rollouts_dataset_builder
from rlds_suite.builders.d4rl import d4rl_dataset_builder
from rlds_suite.builders.d4rl_pybullet import d4rl_pybullet_dataset_builder
from rlds_suite.builders.ilr_atari_demos import ilr_atari_demos_dataset_builder
from rlds_suite.builders.ilr_dm_control_demos import ilr_dm_control_demos_dataset_builder
from rlds_suite.builders.ilr_procgen_demos import ilr_procgen_demos_dataset_builder
from rlds_suite.builders.minerl_streams import minerl_streams_dataset_builder
from rlds_suite.builders.minari import minari_dataset_builder
from rlds_suite.builders.d4rl_families import d4rl_families_dataset_builder
from rlds_suite.builders.ilr_shards import ilr_shards_dataset_builder
