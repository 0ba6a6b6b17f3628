"""One registry from il-representations `dataset_configs` entries to TFDS datasets.

An entry is a dict such as `{}`, `{"type": "random"}` or
`{"type": "random", "env_cfg": {"task_name": "cheetah-run"}}`. `type` defaults to "demos";
`env_cfg` is merged recursively into the caller's default env_cfg (the current task). The pair
(type, benchmark_name, task_name) is looked up in a table whose rows name a TFDS builder/config
('magical_demos/move_to_region') or a dataset directory, for all five il-representations
benchmarks (magical, atari, dm_control, procgen, minecraft) and D4RL/gym:

  * rows for our builders come from the builders' own configs (`BUILDER_FAMILIES`, data); a family
    whose builder is not registered contributes none;
  * each row declares the preprocessing keys its frames were made with (`dm_control_frame_stack`,
    `procgen_frame_stack`, `magical_preproc`, `magical_remove_null_actions`): an env_cfg that sets
    such a key resolves only to rows made that way (the native dm_control and procgen demos hold
    single frames, the processed shards stacks of 3 and 4, MAGICAL's demos are unpreprocessed);
    the catalog does not preprocess;
  * `{"type": "random"}` resolves to random rollouts recorded with `rlds-suite record` under
    `random_dir/<benchmark>/<task_name>/` (Atari, dm_control, procgen; `RANDOM_ENVS` says which
    environment to record), else to a prepared il-representations random shard dataset
    (`ilr_shards/random-...`); MAGICAL's simulator cannot be installed on a current stack, which
    the error for its random rollouts says;
  * users register their own directories with `register`, which take precedence.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from rlds_suite.core import errors
from rlds_suite.readers import il_representations_tasks

DEMOS = 'demos'
RANDOM = 'random'
ENTRY_KEYS = ('type', 'env_cfg')
BENCHMARK_NAME = 'benchmark_name'
TASK_NAME = 'task_name'

# The env_cfg an entry without one refers to, as in il-representations' env_cfg ingredient.
DEFAULT_ENV_CFG: Mapping[str, Any] = {BENCHMARK_NAME: 'magical', TASK_NAME: 'MoveToRegion'}

# env_cfg keys that change what a dataset holds, per benchmark (il-representations' env_cfg): the
# frame stacks of its shards, and MAGICAL's preprocessor.
PREPROCESSING_KEYS: Mapping[str, tuple[str, ...]] = {
    **il_representations_tasks.PREPROCESSING_KEYS,
    'magical': ('magical_preproc', 'magical_remove_null_actions'),
}

# Where recorded random rollouts live unless a Catalog is given another directory.
RANDOM_DIR_ENV = 'RLDS_SUITE_RANDOM_DIR'
DEFAULT_RANDOM_DIR = os.path.join('~', 'rlds_suite_data', 'random')

# il-representations task_name -> the `rlds-suite record --env` spec of its environment.
RANDOM_ENVS: Mapping[str, Callable[[str], str]] = {
    'atari': lambda task: f'atari:{task.removesuffix("NoFrameskip-v4")}',
    'dm_control': lambda task: f'dm_control:{task}',
    'procgen': lambda task: f'procgen:{task}',
}
NOT_RECORDABLE: Mapping[str, str] = {
    'magical': ("MAGICAL's simulator cannot be installed on a current stack (it is pinned to an old "
                'gym and Python), so rlds-suite record cannot make its random rollouts: record '
                'them where MAGICAL runs and register the directory with '
                'rlds_suite.streams.register_dataset'),
}

Key = tuple[str, str, str]  # (type, benchmark_name, task_name)


@dataclasses.dataclass(frozen=True)
class Row:
  """A dataset for a key: a TFDS name ('builder/config') or a directory, and the preprocessing
  key values its data was made with."""
  source: str
  preprocessing: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def describe(self) -> str:
    made = ', '.join(f'{k}={v}' for k, v in sorted(self.preprocessing.items()))
    return f'{self.source} ({made})' if made else self.source


@dataclasses.dataclass(frozen=True)
class BuilderFamily:
  """A TFDS builder whose configs are tasks: `key_of_config` gives a config's key (None: no row),
  `preprocessing_of_config` the preprocessing its data was made with."""
  builder_name: str
  key_of_config: Callable[[Any], Optional[Key]]
  preprocessing_of_config: Callable[[Any], Mapping[str, Any]] = lambda config: {}


def _tasks(type: str, benchmark: str, builder: str,  # pylint: disable=redefined-builtin
           task_of_config: Callable[[Any], Optional[str]],
           preprocessing: Optional[Mapping[str, Any]] = None) -> BuilderFamily:
  """A family whose configs are the tasks of one (type, benchmark)."""
  def key(config: Any) -> Optional[Key]:
    task = task_of_config(config)
    return None if task is None else (type, benchmark, task)
  return BuilderFamily(builder, key, lambda config: dict(preprocessing or {}))


# The builders of rlds_suite.builders, declared as data. Order matters where several rows share a
# key: the first row whose preprocessing fits wins.
BUILDER_FAMILIES: tuple[BuilderFamily, ...] = (
    # MAGICAL's reference demos as recorded: full-resolution views, no preprocessor (il-representations'
    # magical_preproc, e.g. LoRes4E, is applied by its loader), null actions kept.
    _tasks(DEMOS, 'magical', 'magical_demos', lambda config: config.task,
           {'magical_preproc': None, 'magical_remove_null_actions': False}),
    _tasks(DEMOS, 'atari', 'ilr_atari_demos', lambda config: config.game.env_id),
    # Native dm_control and procgen demos hold single frames; il-representations stacks them.
    _tasks(DEMOS, 'dm_control', 'ilr_dm_control_demos', lambda config: config.task.name,
           {'dm_control_frame_stack': 1}),
    _tasks(DEMOS, 'procgen', 'ilr_procgen_demos', lambda config: config.game,
           {'procgen_frame_stack': 1}),
    # MineRL streams with their point-of-view video (what il-representations trains on).
    _tasks(DEMOS, 'minecraft', 'minerl_streams',
           lambda config: config.env.env_id if config.with_video else None),
    # il-representations' processed shards: demos and random rollouts, frames stacked as declared.
    BuilderFamily('ilr_shards',
                  lambda config: (config.data_type, config.layout.benchmark, config.layout.task),
                  lambda config: dict(config.layout.preprocessing)),
    _tasks(DEMOS, 'gym', 'imitation_rollouts', lambda config: config.layout.env_id),
    # D4RL tasks are named by their dataset ids ('halfcheetah-medium-v2'), as in D4RL itself.
    _tasks(DEMOS, 'd4rl', 'd4rl', lambda config: config.name),
    _tasks(DEMOS, 'd4rl', 'd4rl_families', lambda config: config.name),
    _tasks(DEMOS, 'd4rl_pybullet', 'd4rl_pybullet', lambda config: config.name),
)


@dataclasses.dataclass(frozen=True)
class ResolvedDataset:
  """A dataset_configs entry with its merged env_cfg and the TFDS name or directory it names."""
  entry: Mapping[str, Any]
  type: str
  env_cfg: Mapping[str, Any]
  source: str

  @property
  def key(self) -> Key:
    return (self.type, self.env_cfg[BENCHMARK_NAME], self.env_cfg[TASK_NAME])


def merge_env_cfg(default: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
  """`override` merged recursively into a copy of `default` (nested dicts merge, values replace)."""
  merged = copy.deepcopy(dict(default))
  for key, value in override.items():
    if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
      merged[key] = merge_env_cfg(merged[key], value)
    else:
      merged[key] = copy.deepcopy(value)
  return merged


def random_rollouts_dir(random_dir: Union[str, os.PathLike], benchmark: str, task: str) -> str:
  """Where `rlds-suite record --out` puts the random rollouts of a task for the catalog."""
  return os.path.join(os.path.expanduser(os.fspath(random_dir)), benchmark, task)


def record_command(random_dir: Union[str, os.PathLike], benchmark: str, task: str) -> str:
  """The `rlds-suite record` command that makes a task's random rollouts where the catalog looks."""
  return (f'rlds-suite record --env {RANDOM_ENVS[benchmark](task)} --policy random --episodes N '
          f'--out {random_rollouts_dir(random_dir, benchmark, task)}')


class Catalog:
  """(type, benchmark_name, task_name) -> TFDS name ('builder/config') or dataset directory.

  `random_dir` holds recorded random rollouts as `<benchmark>/<task_name>/` (default: the
  RLDS_SUITE_RANDOM_DIR environment variable, else ~/rlds_suite_data/random); `data_dir` is the
  TFDS data dir in which il-representations random shard datasets count as prepared.
  """

  def __init__(self, families: Iterable[BuilderFamily] = BUILDER_FAMILIES, *,
               random_dir: Optional[Union[str, os.PathLike]] = None,
               data_dir: Optional[str] = None):
    self._families = tuple(families)
    self._rows: Optional[dict[Key, list[Row]]] = None
    self._registered: dict[Key, list[Row]] = {}
    self.random_dir = os.fspath(random_dir if random_dir is not None else
                                os.environ.get(RANDOM_DIR_ENV, DEFAULT_RANDOM_DIR))
    self.data_dir = data_dir

  def register(self, type: str, benchmark_name: str, task_name: str,  # pylint: disable=redefined-builtin
               source: Union[str, os.PathLike],
               preprocessing: Optional[Mapping[str, Any]] = None) -> None:
    """Registers a dataset (TFDS name or directory) for an entry, ahead of every other row for
    it; `preprocessing` gives the preprocessing key values its data was made with."""
    self._registered[(type, benchmark_name, task_name)] = [
        Row(os.fspath(source), dict(preprocessing or {}))]

  def _family_rows(self) -> dict[Key, list[Row]]:
    if self._rows is None:
      self._rows = {}
      for row_key, row in _family_rows(self._families):
        self._rows.setdefault(row_key, []).append(row)
    return self._rows

  def candidates(self, key: Key) -> list[Row]:
    """Every row for `key`, in order: registered, recorded random rollouts, builder families."""
    family_rows = self._family_rows().get(key, [])
    found = list(self._registered.get(key, []))
    if key[0] == RANDOM and key[1] in RANDOM_ENVS:
      directory = random_rollouts_dir(self.random_dir, key[1], key[2])
      if os.path.isdir(directory):
        found.append(Row(directory, {}))
      found += [row for row in family_rows if self._prepared(row.source)]
    else:
      found += family_rows
    return found

  def rows(self) -> dict[Key, str]:
    """Every key of the builder families and registered datasets, with its first source."""
    keys = {**self._family_rows(), **self._registered}
    return {key: rows[0].source for key, rows in keys.items() if rows}

  def resolve(self, entry: Mapping[str, Any],
              env_cfg: Optional[Mapping[str, Any]] = None) -> ResolvedDataset:
    """One dataset_configs entry -> ResolvedDataset; UnresolvedDatasetError names the entry."""
    if not isinstance(entry, Mapping):
      raise errors.UnresolvedDatasetError(f'dataset_configs entry {entry!r} is not a dict')
    unknown = sorted(set(entry) - set(ENTRY_KEYS))
    if unknown:
      raise errors.UnresolvedDatasetError(
          f'dataset_configs entry {dict(entry)!r} has unknown keys {unknown}; allowed: '
          f'{list(ENTRY_KEYS)}')
    merged = merge_env_cfg(DEFAULT_ENV_CFG if env_cfg is None else env_cfg,
                           entry.get('env_cfg') or {})
    kind = entry.get('type', DEMOS)
    missing = [k for k in (BENCHMARK_NAME, TASK_NAME) if k not in merged]
    if missing:
      raise errors.UnresolvedDatasetError(
          f'dataset_configs entry {dict(entry)!r}: env_cfg lacks {missing}')
    key = (kind, merged[BENCHMARK_NAME], merged[TASK_NAME])
    candidates = self.candidates(key)
    named = (f'dataset_configs entry {dict(entry)!r} resolves to type={key[0]!r}, '
             f'benchmark_name={key[1]!r}, task_name={key[2]!r}')
    if not candidates:
      raise errors.UnresolvedDatasetError(f'{named}, which names no dataset ({self._hint(key)})')
    requested = {k: merged[k] for k in PREPROCESSING_KEYS.get(key[1], ()) if k in merged}
    fitting = [row for row in candidates
               if all(row.preprocessing.get(k, v) == v for k, v in requested.items())]
    if not fitting:
      asked = ', '.join(f'{k}={v!r}' for k, v in requested.items())
      raise errors.UnresolvedDatasetError(
          f'{named} with {asked}, but its datasets were made otherwise: '
          f'{"; ".join(row.describe() for row in candidates)} (the catalog does not preprocess: '
          f'set the keys as one of these was made)')
    return ResolvedDataset(entry=dict(entry), type=kind, env_cfg=merged, source=fitting[0].source)

  def resolve_all(self, dataset_configs: Sequence[Mapping[str, Any]],
                  env_cfg: Optional[Mapping[str, Any]] = None) -> list[ResolvedDataset]:
    return [self.resolve(entry, env_cfg) for entry in dataset_configs]

  def _hint(self, key: Key) -> str:
    """What to do about a key that names nothing."""
    if key[0] == RANDOM and key[1] in NOT_RECORDABLE:
      return NOT_RECORDABLE[key[1]]
    if key[0] == RANDOM and key[1] in RANDOM_ENVS:
      return (f'no random rollouts in {random_rollouts_dir(self.random_dir, key[1], key[2])} and '
              f'no prepared ilr_shards random dataset; record them with: '
              f'{record_command(self.random_dir, key[1], key[2])}')
    known = sorted({k[2] for k in self.rows() if k[:2] == key[:2]})
    if known:
      return f'known {key[0]} tasks of {key[1]!r}: {known}; register one with register_dataset'
    return (f'nothing is registered for type {key[0]!r} of benchmark {key[1]!r}; register one '
            f'with rlds_suite.streams.register_dataset')

  def _prepared(self, source: str) -> bool:
    import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
    try:
      return tfds.builder(source, data_dir=self.data_dir).is_prepared()
    except Exception:  # pylint: disable=broad-except  # Not registered or not buildable here.
      return False


def _family_rows(families: Iterable[BuilderFamily]) -> Iterable[tuple[Key, Row]]:
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  for family in families:
    try:
      builder_cls = tfds.builder_cls(family.builder_name)
    except Exception:  # pylint: disable=broad-except  # Not registered: no rows.
      continue
    for config in builder_cls.BUILDER_CONFIGS:
      key = family.key_of_config(config)
      if key is not None:
        yield key, Row(f'{family.builder_name}/{config.name}',
                       dict(family.preprocessing_of_config(config)))


# The process-wide catalog that streams use unless given another.
CATALOG = Catalog()


def register_dataset(type: str, benchmark_name: str, task_name: str,  # pylint: disable=redefined-builtin
                     source: Union[str, os.PathLike],
                     preprocessing: Optional[Mapping[str, Any]] = None) -> None:
  """Registers a TFDS name or dataset directory in the process-wide catalog."""
  CATALOG.register(type, benchmark_name, task_name, source, preprocessing)
