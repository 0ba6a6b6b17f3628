"""One registry from il-representations `dataset_configs` entries to TFDS datasets.

An entry is a dict such as `{}`, `{"type": "random"}` or
`{"type": "random", "env_cfg": {"task_name": "cheetah-run"}}`. `type` defaults to "demos";
`env_cfg` is merged recursively into the caller's default env_cfg (the current task). The pair
(type, benchmark_name, task_name) is looked up in a table whose rows name a TFDS builder/config
('magical_demos/move_to_region') or a recorded dataset directory. Rows for our builders are
declared below from the builders' own configs; users register directories (random rollouts,
their own recordings) with `register`.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, Union

from rlds_suite.core import errors

DEMOS = 'demos'
RANDOM = 'random'
ENTRY_KEYS = ('type', 'env_cfg')
BENCHMARK_NAME = 'benchmark_name'
TASK_NAME = 'task_name'

# The env_cfg an entry without one refers to, as in il-representations' env_cfg ingredient.
DEFAULT_ENV_CFG: Mapping[str, Any] = {BENCHMARK_NAME: 'magical', TASK_NAME: 'MoveToRegion'}

Key = tuple[str, str, str]  # (type, benchmark_name, task_name)


@dataclasses.dataclass(frozen=True)
class BuilderFamily:
  """A TFDS builder whose configs are tasks of one benchmark: one catalog row per config."""
  type: str
  benchmark_name: str
  builder_name: str
  task_of_config: Callable[[Any], str]


# The builders of rlds_suite.builders, declared as data. A family whose builder is not registered
# (not installed, or not written yet) contributes no rows.
BUILDER_FAMILIES: tuple[BuilderFamily, ...] = (
    BuilderFamily(DEMOS, 'magical', 'magical_demos', lambda config: config.task),
    BuilderFamily(DEMOS, 'gym', 'imitation_rollouts', lambda config: config.layout.env_id),
    # D4RL tasks are named by their dataset ids ('halfcheetah-medium-v2'), as in D4RL itself.
    BuilderFamily(DEMOS, 'd4rl', 'd4rl', lambda config: config.name),
    BuilderFamily(DEMOS, 'd4rl_pybullet', 'd4rl_pybullet', lambda config: config.name),
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


class Catalog:
  """(type, benchmark_name, task_name) -> TFDS name ('builder/config') or dataset directory."""

  def __init__(self, families: Iterable[BuilderFamily] = BUILDER_FAMILIES):
    self._families = tuple(families)
    self._rows: Optional[dict[Key, str]] = None
    self._registered: dict[Key, str] = {}

  def register(self, type: str, benchmark_name: str, task_name: str,  # pylint: disable=redefined-builtin
               source: Union[str, os.PathLike]) -> None:
    """Registers a dataset (TFDS name or directory) for an entry; replaces an earlier one."""
    self._registered[(type, benchmark_name, task_name)] = os.fspath(source)

  def rows(self) -> dict[Key, str]:
    """Every known key and its source: builder families first, then registered datasets."""
    if self._rows is None:
      self._rows = dict(_family_rows(self._families))
    return {**self._rows, **self._registered}

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
    rows = self.rows()
    if key not in rows:
      known = sorted(k[2] for k in rows if k[:2] == key[:2])
      hint = (f'known {key[0]} tasks of {key[1]!r}: {known}' if known else
              f'nothing is registered for type {key[0]!r} of benchmark {key[1]!r}')
      raise errors.UnresolvedDatasetError(
          f'dataset_configs entry {dict(entry)!r} resolves to type={key[0]!r}, '
          f'benchmark_name={key[1]!r}, task_name={key[2]!r}, which names no dataset ({hint}); '
          f'register one with rlds_suite.streams.register_dataset')
    return ResolvedDataset(entry=dict(entry), type=kind, env_cfg=merged, source=rows[key])

  def resolve_all(self, dataset_configs: Sequence[Mapping[str, Any]],
                  env_cfg: Optional[Mapping[str, Any]] = None) -> list[ResolvedDataset]:
    return [self.resolve(entry, env_cfg) for entry in dataset_configs]


def _family_rows(families: Iterable[BuilderFamily]) -> Iterable[tuple[Key, str]]:
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  for family in families:
    try:
      builder_cls = tfds.builder_cls(family.builder_name)
    except Exception:  # pylint: disable=broad-except  # Not registered: no rows.
      continue
    for config in builder_cls.BUILDER_CONFIGS:
      yield ((family.type, family.benchmark_name, family.task_of_config(config)),
             f'{family.builder_name}/{config.name}')


# The process-wide catalog that streams use unless given another.
CATALOG = Catalog()


def register_dataset(type: str, benchmark_name: str, task_name: str,  # pylint: disable=redefined-builtin
                     source: Union[str, os.PathLike]) -> None:
  """Registers a TFDS name or dataset directory in the process-wide catalog."""
  CATALOG.register(type, benchmark_name, task_name, source)
