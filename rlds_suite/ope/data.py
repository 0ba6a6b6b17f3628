"""RLDS episodes -> what the OPE estimators read: per-episode arrays and the transitions between them.

Boundaries come from the RLDS flags (rlds_suite.core.episodes): a transition bootstraps unless its
action ended the episode in an absorbing state (discount 0 or the next step `is_terminal`); the
last transition of a truncated episode bootstraps.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from rlds_suite.core import episodes as episodes_lib
from rlds_suite.core import errors
from rlds_suite.core import fields

# Step fields (slash-separated paths) where datasets keep the behaviour policy's log-probability
# of the action taken: D4RL's infos/action_log_probs, and plain names a recorder may use.
LOG_PROB_FIELDS = ('infos/action_log_probs', 'action_log_probs', 'behaviour_log_prob', 'log_prob')


@dataclasses.dataclass
class OPEEpisode:
  """One episode: T actions, T + 1 observations (the last is the final observation)."""
  observations: np.ndarray
  actions: np.ndarray
  rewards: np.ndarray
  bootstrap: np.ndarray  # [T] 1 where the transition's next state has a value, 0 where absorbing.
  terminated: bool
  behaviour_log_probs: Optional[np.ndarray] = None

  @property
  def length(self) -> int:
    return len(self.rewards)


@dataclasses.dataclass
class OPEData:
  """A dataset's episodes, with its name and action kind."""
  episodes: list[OPEEpisode]
  name: str = 'dataset'
  discrete_actions: bool = False

  @property
  def observation_size(self) -> int:
    return int(np.prod(self.episodes[0].observations.shape[1:]))

  @property
  def action_shape(self) -> tuple:
    return tuple(self.episodes[0].actions.shape[1:])

  @property
  def has_behaviour_log_probs(self) -> bool:
    return all(e.behaviour_log_probs is not None for e in self.episodes)

  @property
  def num_episodes(self) -> int:
    return len(self.episodes)

  def action_count(self) -> int:
    """Discrete actions: the largest action taken + 1 (0 for continuous actions)."""
    return int(max(e.actions.max() for e in self.episodes)) + 1 if self.discrete_actions else 0

  def initial_observations(self) -> np.ndarray:
    return np.stack([e.observations[0] for e in self.episodes])

  def transitions(self) -> dict[str, np.ndarray]:
    """All transitions as flat numpy arrays (observation, action, reward, bootstrap,
    next_observation)."""
    parts = [e for e in self.episodes if e.length]
    return {
        fields.OBSERVATION: np.concatenate([e.observations[:-1] for e in parts]),
        fields.ACTION: np.concatenate([e.actions for e in parts]),
        fields.REWARD: np.concatenate([e.rewards for e in parts]).astype(np.float32),
        'bootstrap': np.concatenate([e.bootstrap for e in parts]).astype(np.float32),
        fields.NEXT_OBSERVATION: np.concatenate([e.observations[1:] for e in parts]),
    }

  def returns(self, discount: float) -> np.ndarray:
    """Each episode's discounted return (the behaviour policy's value, the baseline)."""
    return np.array([np.sum(e.rewards * discount**np.arange(e.length)) for e in self.episodes])


@dataclasses.dataclass
class OPESummary:
  """What FQE fed by a stream needs of a dataset besides its transitions: each episode's first
  observation and discounted return, and the action specs; read one episode at a time, so memory
  grows with the number of episodes, not steps."""
  initial: np.ndarray  # [episodes, ...] each episode's first observation.
  discounted_returns: np.ndarray  # [episodes] at `discount`.
  discount: float
  action_shape: tuple
  actions_taken: int  # Discrete actions: the largest action taken + 1; else 0.
  has_behaviour_log_probs: bool
  name: str = 'dataset'
  discrete_actions: bool = False

  @property
  def num_episodes(self) -> int:
    return len(self.discounted_returns)

  @property
  def observation_size(self) -> int:
    return int(np.prod(self.initial.shape[1:]))

  def action_count(self) -> int:
    return self.actions_taken

  def initial_observations(self) -> np.ndarray:
    return self.initial

  def returns(self, discount: float) -> np.ndarray:
    if discount != self.discount:
      raise ValueError(f'summary of {self.name} holds returns at discount {self.discount}, '
                       f'not {discount}')
    return self.discounted_returns


def bootstrap_mask(discounts: np.ndarray, next_is_terminal: np.ndarray) -> np.ndarray:
  """1 where a transition's successor has a value: RLDS discount d_t, 0 when o_t+1 is terminal."""
  return (np.asarray(discounts, np.float32) *
          (1 - np.asarray(next_is_terminal, np.float32))).astype(np.float32)


def _leaf(steps: Mapping[str, Any], path: str) -> Optional[np.ndarray]:
  node: Any = steps
  for part in path.split('/'):
    if not isinstance(node, Mapping) or part not in node:
      return None
    node = node[part]
  return None if isinstance(node, Mapping) else np.asarray(node)


def episode_from_steps(steps: Mapping[str, Any], log_prob_field: Optional[str] = None,
                       name: str = 'dataset') -> OPEEpisode:
  """One RLDS episode's steps -> OPEEpisode (observations must be flat arrays)."""
  obs = steps[fields.OBSERVATION]
  if isinstance(obs, Mapping):
    raise errors.SpecMismatchError('OPE needs a flat observation array, not a dict of '
                                   f'{sorted(obs)}', path=name, field=fields.OBSERVATION)
  transitions = episodes_lib.to_transitions(steps)
  num = len(transitions[fields.REWARD])
  log_probs = None
  for path in ([log_prob_field] if log_prob_field else LOG_PROB_FIELDS):
    leaf = _leaf(steps, path)
    if leaf is not None:
      log_probs = leaf[:num].astype(np.float64)
      break
  if log_prob_field and log_probs is None:
    raise errors.SchemaError('no such step field (behaviour log-probabilities)', path=name,
                             field=log_prob_field)
  is_terminal = np.asarray(steps[fields.IS_TERMINAL], bool)
  return OPEEpisode(
      observations=np.asarray(obs)[:num + 1],
      actions=np.asarray(transitions[fields.ACTION]),
      rewards=np.asarray(transitions[fields.REWARD], np.float64).reshape(num),
      bootstrap=bootstrap_mask(transitions[fields.DISCOUNT], transitions[fields.IS_TERMINAL]),
      terminated=bool(is_terminal[-1]) if len(is_terminal) else False,
      behaviour_log_probs=log_probs)


def from_steps(all_steps: Iterable[Mapping[str, Any]], *, name: str = 'dataset',
               discrete_actions: Optional[bool] = None,
               log_prob_field: Optional[str] = None) -> OPEData:
  """OPEData from RLDS episodes' steps (numpy)."""
  found = [episode_from_steps(s, log_prob_field, name) for s in all_steps]
  found = [e for e in found if e.length]
  if not found:
    raise errors.EmptyInputError('no episode has a transition', path=name)
  if discrete_actions is None:
    discrete_actions = np.issubdtype(found[0].actions.dtype, np.integer)
  return OPEData(found, name=name, discrete_actions=bool(discrete_actions))


def load(source: Any, *, split: Optional[str] = None, data_dir: Optional[str] = None,
         take: Optional[int] = None, log_prob_field: Optional[str] = None) -> OPEData:
  """OPEData of a dataset (directory or registered name) read through rlds_suite.tfds."""
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  builder = datasets.load_builder(source, data_dir)
  name = str(source) if not hasattr(source, 'info') else builder.info.full_name
  found = datasets.read_episodes(builder, split, take=take)
  return from_steps((e[fields.STEPS] for e in found), name=name, log_prob_field=log_prob_field)


def summarize(source: Any, discount: float, *, split: Optional[str] = None,
              data_dir: Optional[str] = None, log_prob_field: Optional[str] = None) -> OPESummary:
  """OPESummary of a dataset (directory or registered name), reading one episode at a time."""
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  builder = datasets.load_builder(source, data_dir)
  name = str(source) if not hasattr(source, 'info') else builder.info.full_name
  initial, returns, actions_taken, log_probs, first = [], [], 0, True, None
  for found in datasets.read_episodes(builder, split):
    episode = episode_from_steps(found[fields.STEPS], log_prob_field, name)
    if not episode.length:
      continue
    first = first or episode
    initial.append(episode.observations[0])
    returns.append(np.sum(episode.rewards * discount**np.arange(episode.length)))
    if np.issubdtype(episode.actions.dtype, np.integer):
      actions_taken = max(actions_taken, int(episode.actions.max()) + 1)
    log_probs = log_probs and episode.behaviour_log_probs is not None
  if first is None:
    raise errors.EmptyInputError('no episode has a transition', path=name)
  discrete = bool(np.issubdtype(first.actions.dtype, np.integer))
  return OPESummary(np.stack(initial), np.asarray(returns, np.float64), discount,
                    tuple(first.actions.shape[1:]), actions_taken if discrete else 0, log_probs,
                    name=name, discrete_actions=discrete)


def require_log_probs(data: OPEData, fields_tried: Sequence[str] = LOG_PROB_FIELDS) -> None:
  if not data.has_behaviour_log_probs:
    raise errors.SchemaError(
        f'importance sampling needs the behaviour policy\'s log-probabilities: no step field '
        f'{"/".join(fields_tried[:1])} (or {", ".join(fields_tried[1:])}); give a behaviour '
        f'policy instead', path=data.name, field=fields_tried[0])
