"""The episode model: native per-episode arrays -> RLDS steps, and RLDS steps -> transitions.

This module is the only place that knows episode-boundary rules.

RLDS alignment (as RLDS/EnvLogger define it): step t holds observation o_t, the action a_t taken at
it, the reward r_t that action earned and the discount d_t that came with it. The observation after
the last action becomes one extra last step whose action and reward are zero-filled placeholders,
so that every real action and reward is on a step that is not `is_last` (RLDS's own tools, e.g.
`sar_fields_mask`, ignore the action and reward of `is_last` steps). Formats that did not keep that
observation (FinalObservation.NOT_STORED) get the same placeholder step with the last real
observation repeated, and the step mask `fields.OBSERVATION_IS_COPY` (True on that step only) says
so.

Endings:
  * TERMINATED (the environment reached an absorbing state): the last step has `is_terminal=True`,
    and the discount of the action that led there, and of the last step, is 0.
  * TRUNCATED (time limit, end of a recording): the last step has `is_last=True` only; every
    discount stays 1.

Each native format declares how its rows map onto that model with a `BoundaryPolicy`; readers call
`BoundaryPolicy.trajectory` and `to_episode` and never set boundary flags themselves.
"""

from __future__ import annotations

import dataclasses
import enum
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import nested

Nested = nested.Nested


class Ending(enum.Enum):
  TERMINATED = 'terminated'
  TRUNCATED = 'truncated'


@dataclasses.dataclass(frozen=True)
class Trajectory:
  """One episode in standard alignment: row t is (o_t, a_t, r_t earned by a_t).

  `final_observation` is the observation after the last action, when the format kept it.
  `step_metadata` leaves have one row per action; `final_step_metadata` is the row of the final
  observation's step when the format recorded one (zeros otherwise). `discounts`, one per action,
  are the environment's own discounts when it reports them (1 otherwise). `metadata` is per episode.
  """
  observations: Nested
  actions: Nested
  rewards: np.ndarray
  ending: Ending
  final_observation: Optional[Nested] = None
  step_metadata: Mapping[str, Nested] = dataclasses.field(default_factory=dict)
  metadata: Mapping[str, Any] = dataclasses.field(default_factory=dict)
  discounts: Optional[np.ndarray] = None
  final_step_metadata: Optional[Mapping[str, Nested]] = None
  # True: `final_observation` repeats the last real one (the format did not keep it); None: the
  # format never repeats one, and its steps have no OBSERVATION_IS_COPY mask.
  final_observation_is_copy: Optional[bool] = None


@dataclasses.dataclass(frozen=True)
class Episode:
  """An RLDS episode: `steps` maps step field names to (nested) arrays with one row per step."""
  steps: dict[str, Nested]
  metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

  @property
  def num_steps(self) -> int:
    return len(self.steps[fields.IS_FIRST])

  @property
  def num_transitions(self) -> int:
    """Number of (o_t, a_t, r_t, o_t+1) transitions: every step but the last has a successor."""
    return self.num_steps - 1

  def as_example(self) -> dict[str, Any]:
    """The TFDS example of this episode: {'steps': ..., **episode metadata}."""
    return {fields.STEPS: self.steps, **self.metadata}


class FinalObservation(enum.Enum):
  """Where a native format keeps the observation that follows the last action."""
  EXTRA_ROW = 'extra_row'  # T+1 observations, T actions and rewards (imitation, MAGICAL).
  LAST_ROW = 'last_row'  # T+1 rows of every field; the last row's action is never taken (d4rl-pybullet).
  NEXT_OBSERVATIONS = 'next_observations'  # T rows and a next_observations column (D4RL v2).
  # T rows; the observation after the last action was not kept: the placeholder last step repeats
  # the last real one, marked by the step mask OBSERVATION_IS_COPY.
  NOT_STORED = 'not_stored'
  # A terminated episode's last row holds only the terminal observation (its action and reward were
  # never taken, LAST_ROW); any other episode's rows are all actions (NOT_STORED). RL Unplugged Atari.
  LAST_ROW_WHEN_TERMINATED = 'last_row_when_terminated'


class RewardTiming(enum.Enum):
  EARNED = 'earned'  # row t holds the reward earned by row t's action.
  ON_ARRIVAL = 'on_arrival'  # row t holds the reward received on arriving at row t's observation.


class EndingRule(enum.Enum):
  """How a format tells termination from truncation."""
  TERMINAL_FLAG = 'terminal_flag'  # Terminated iff the native terminal flag is set.
  ALWAYS_TRUNCATED = 'always_truncated'  # Episodes only end by a step budget (MAGICAL).
  TIME_LIMIT = 'time_limit'  # One done flag for both: truncated iff the episode reached time_limit.


@dataclasses.dataclass(frozen=True)
class BoundaryPolicy:
  """A native format's declared episode-boundary semantics.

  `discount_timing` says how native per-row discounts (when a format stores them) line up, like
  `reward_timing` for rewards (the same when None). `padding_rows` are rows a format writes before
  each episode's first step (dopamine's replay buffer: stack_size - 1 all-zero rows); they hold no
  step and are dropped, after checking that they are zero. `marks_copies`: steps carry the
  OBSERVATION_IS_COPY mask; always so for formats that may not keep the final observation
  (NOT_STORED, LAST_ROW_WHEN_TERMINATED); set it for a format whose files may or may not keep it
  (D4RL with or without next_observations), so that every file gives the same step fields.
  """
  final_observation: FinalObservation
  reward_timing: RewardTiming = RewardTiming.EARNED
  ending_rule: EndingRule = EndingRule.TERMINAL_FLAG
  time_limit: Optional[int] = None
  discount_timing: Optional[RewardTiming] = None
  padding_rows: int = 0
  marks_copies: bool = False

  def __post_init__(self):
    final_row = (FinalObservation.LAST_ROW, FinalObservation.LAST_ROW_WHEN_TERMINATED)
    if self.reward_timing is RewardTiming.ON_ARRIVAL and self.final_observation not in final_row:
      raise ValueError('rewards on arrival are only defined for formats whose last row is final')
    if (self.discount_timing is RewardTiming.ON_ARRIVAL and
        self.final_observation not in final_row):
      raise ValueError('discounts on arrival are only defined for formats whose last row is final')
    if (self.ending_rule is EndingRule.TIME_LIMIT) != (self.time_limit is not None):
      raise ValueError('EndingRule.TIME_LIMIT needs time_limit, and only it uses one')
    if self.final_observation in (FinalObservation.NOT_STORED,
                                  FinalObservation.LAST_ROW_WHEN_TERMINATED):
      object.__setattr__(self, 'marks_copies', True)

  def ending(self, num_actions: int, terminal_flag: bool) -> Ending:
    if self.ending_rule is EndingRule.ALWAYS_TRUNCATED:
      return Ending.TRUNCATED
    if self.ending_rule is EndingRule.TIME_LIMIT and num_actions >= self.time_limit:
      return Ending.TRUNCATED
    return Ending.TERMINATED if terminal_flag else Ending.TRUNCATED

  def trajectory(self,
                 observations: Nested,
                 actions: Nested,
                 rewards: np.ndarray,
                 *,
                 terminal_flag: bool = False,
                 next_observations: Optional[Nested] = None,
                 step_metadata: Optional[Mapping[str, Nested]] = None,
                 metadata: Optional[Mapping[str, Any]] = None,
                 discounts: Optional[np.ndarray] = None) -> Trajectory:
    """Native rows of one episode -> a Trajectory in standard alignment.

    `terminal_flag` is the format's own end-of-episode terminal flag for this episode (False for
    rows that stop without one, e.g. the unfinished tail of a file). `step_metadata` has the same
    rows as `actions`; `discounts`, when the format stores them, one per row. Raises
    EpisodeBoundaryError when row counts do not fit the declared layout.
    """
    observations, actions = nested.as_arrays(observations), nested.as_arrays(actions)
    rewards = np.asarray(rewards)
    step_metadata = nested.as_arrays(dict(step_metadata or {}))
    if self.padding_rows:
      observations, actions, rewards, step_metadata, discounts = self._drop_padding(
          observations, actions, rewards, step_metadata, discounts)
    n_obs = _length(observations, fields.OBSERVATION)
    n_act = _length(actions, fields.ACTION)
    n_rew = _length(rewards, fields.REWARD)
    if discounts is not None:
      discounts = np.asarray(discounts, dtype=np.float32).reshape(-1)
      _expect(len(discounts) == n_rew, fields.DISCOUNT,
              f'expected {n_rew} discounts (one per row), got {len(discounts)}')
    layout = self.final_observation
    if layout is FinalObservation.LAST_ROW_WHEN_TERMINATED:
      layout = FinalObservation.LAST_ROW if terminal_flag else FinalObservation.NOT_STORED
    final = None
    copied = (layout is FinalObservation.NOT_STORED) if self.marks_copies else None
    if layout is FinalObservation.EXTRA_ROW:
      _expect(n_obs == n_act + 1, fields.OBSERVATION,
              f'expected one more observation than actions, got {n_obs} and {n_act}')
      _expect(n_rew == n_act, fields.REWARD, f'expected {n_act} rewards, got {n_rew}')
      final = nested.row(observations, -1)
      observations = nested.take_rows(observations, slice(0, n_act))
    elif layout is FinalObservation.LAST_ROW:
      _expect(n_obs == n_act == n_rew, fields.ACTION,
              f'expected equal row counts, got {n_obs} observations, {n_act} actions, {n_rew} rewards')
      final = nested.row(observations, -1)
      observations = nested.take_rows(observations, slice(0, n_obs - 1))
      actions = nested.take_rows(actions, slice(0, n_act - 1))
      step_metadata = nested.take_rows(step_metadata, slice(0, n_act - 1))
      rewards = rewards[1:] if self.reward_timing is RewardTiming.ON_ARRIVAL else rewards[:-1]
      if discounts is not None:
        discounts = discounts[1:] if self._discount_timing is RewardTiming.ON_ARRIVAL else discounts[:-1]
      n_act -= 1
    else:
      _expect(n_obs == n_act == n_rew, fields.ACTION,
              f'expected equal row counts, got {n_obs} observations, {n_act} actions, {n_rew} rewards')
      if layout is FinalObservation.NEXT_OBSERVATIONS:
        if next_observations is None:
          raise errors.SchemaError('format declares next_observations but none were given',
                                   field='next_observations')
        next_observations = nested.as_arrays(next_observations)
        _expect(_length(next_observations, 'next_observations') == n_act, 'next_observations',
                f'expected {n_act} rows')
        final = nested.row(next_observations, -1)
      else:  # NOT_STORED: the placeholder last step repeats the last real observation.
        _expect(n_act > 0, fields.ACTION, 'an episode needs at least one action')
        final = nested.row(observations, -1)
        if discounts is not None and self._discount_timing is RewardTiming.ON_ARRIVAL:
          # Row t + 1 holds the discount a_t earned; the last action's was not kept.
          discounts = np.append(discounts[1:], np.float32(1))
    if step_metadata:
      _expect(_length(step_metadata, 'step_metadata') == n_act, 'step_metadata',
              f'expected {n_act} rows (one per action)')
    return Trajectory(
        observations=observations,
        actions=actions,
        rewards=rewards,
        ending=self.ending(n_act, terminal_flag),
        final_observation=final,
        step_metadata=step_metadata,
        metadata=dict(metadata or {}),
        discounts=discounts,
        final_observation_is_copy=copied)

  @property
  def _discount_timing(self) -> RewardTiming:
    return self.discount_timing or self.reward_timing

  def _drop_padding(self, *columns: Any) -> tuple:
    """Drops the `padding_rows` leading rows of every column, which must be all zeros."""
    names = (fields.OBSERVATION, fields.ACTION, fields.REWARD, 'step_metadata', fields.DISCOUNT)
    kept = []
    for name, column in zip(names, columns):
      if column is None or (isinstance(column, dict) and not column):
        kept.append(column)
        continue
      _expect(_length(column, name) > self.padding_rows, name,
              f'expected {self.padding_rows} padding rows before the first step, got fewer rows')
      head = nested.take_rows(column, slice(0, self.padding_rows))
      _expect(all(not np.any(leaf) for leaf in nested.leaves(head)), name,
              f'expected the {self.padding_rows} rows before the first step to be zero padding')
      kept.append(nested.take_rows(column, slice(self.padding_rows, None)))
    return tuple(kept)


@dataclasses.dataclass(frozen=True)
class TrajectoryBatch:
  """Trajectories with their rows concatenated, converted in one numpy pass per field.

  Trajectory i owns `num_actions[i]` consecutive rows of observations, actions, rewards, discounts
  and step_metadata, and row i of `terminated`, `final_observations`, `final_step_metadata`,
  `metadata` and `final_observation_is_copy` (each as in `Trajectory`; final observations and copy
  flags are given for all or none).
  """
  observations: Nested
  actions: Nested
  rewards: np.ndarray
  num_actions: np.ndarray
  terminated: np.ndarray
  final_observations: Optional[Nested] = None
  step_metadata: Mapping[str, Nested] = dataclasses.field(default_factory=dict)
  final_step_metadata: Optional[Mapping[str, Nested]] = None
  metadata: Sequence[Mapping[str, Any]] = ()
  discounts: Optional[np.ndarray] = None
  final_observation_is_copy: Optional[np.ndarray] = None

  @classmethod
  def of(cls, trajectory: Trajectory) -> 'TrajectoryBatch':
    """A batch holding one trajectory."""
    final, final_metadata = trajectory.final_observation, trajectory.final_step_metadata
    step_metadata = dict(trajectory.step_metadata)
    if final is not None:  # (Final-step metadata without it is refused by to_episodes.)
      final = nested.as_one_row(trajectory.observations, final)
      if final_metadata is not None:
        final_metadata = nested.as_one_row(step_metadata, dict(final_metadata))
    return cls(observations=trajectory.observations, actions=trajectory.actions,
               rewards=np.asarray(trajectory.rewards),
               num_actions=np.array([_length(trajectory.actions, fields.ACTION)]),
               terminated=np.array([trajectory.ending is Ending.TERMINATED]),
               final_observations=final, step_metadata=step_metadata,
               final_step_metadata=final_metadata, metadata=[trajectory.metadata],
               discounts=trajectory.discounts,
               final_observation_is_copy=(None if trajectory.final_observation_is_copy is None
                                          else np.array([trajectory.final_observation_is_copy])))


@dataclasses.dataclass(frozen=True)
class EpisodeBatch:
  """RLDS episodes with their steps concatenated: episode i owns rows starts[i]:starts[i + 1]."""
  steps: dict[str, Nested]
  starts: np.ndarray
  metadata: list[dict[str, Any]]

  def __len__(self) -> int:
    return len(self.starts) - 1

  def episode(self, index: int) -> Episode:
    steps = self.steps if len(self) == 1 else nested.take_rows(
        self.steps, slice(self.starts[index], self.starts[index + 1]))
    return Episode(steps=steps, metadata=dict(self.metadata[index]))


def to_episode(trajectory: Trajectory) -> Episode:
  """A Trajectory -> RLDS steps with is_first/is_last/is_terminal and discounts set by its ending."""
  return to_episodes(TrajectoryBatch.of(trajectory)).episode(0)


def to_episodes(batch: TrajectoryBatch) -> EpisodeBatch:
  """Trajectories -> RLDS episodes; each as `to_episode` converts it, with numpy work per field
  rather than per episode."""
  counts = np.asarray(batch.num_actions, dtype=np.int64).reshape(-1)
  locate = _Locator(counts)
  # An episode without actions is only its final observation (a reset and nothing else, as
  # EnvLogger logs one): a single step, first and last, truncated.
  has_final = batch.final_observations is not None
  if not len(counts) or counts.min() < (0 if has_final else 1):
    raise locate.error(int(np.argmin(counts)) if len(counts) else 0, fields.ACTION,
                       'an episode needs at least one action, or a final observation')
  num_actions = int(counts.sum())
  for field, structure, problem in (
      (fields.OBSERVATION, batch.observations, 'observations (one per action)'),
      (fields.REWARD, batch.rewards, 'rewards')):
    locate.expect_rows(_length(structure, field), field, problem)
  rewards = np.asarray(batch.rewards)
  locate.check_finite(rewards, fields.REWARD)
  step_metadata = dict(batch.step_metadata)
  if step_metadata:
    locate.expect_rows(_length(step_metadata, 'step_metadata'), 'step_metadata',
                       'rows of step metadata (one per action)')
  if batch.final_step_metadata is not None and batch.final_observations is None:
    raise errors.EpisodeBoundaryError('final-step metadata without a final observation',
                                      field='step_metadata')
  copies = batch.final_observation_is_copy
  if copies is not None:
    copies = np.asarray(copies, dtype=bool).reshape(-1)
    if batch.final_observations is None or len(copies) != len(counts):
      raise errors.EpisodeBoundaryError(
          f'expected a copy flag per episode ({len(counts)}), with final observations',
          field=fields.OBSERVATION_IS_COPY)

  lengths = counts + has_final
  ends = np.cumsum(lengths)
  starts = ends - lengths
  num_steps = int(ends[-1])
  if len(counts) == 1:  # One episode: its actions are steps [0, n), its final step (if any) n.
    action_rows: np.ndarray | slice = slice(0, num_actions)
    final_rows: np.ndarray | slice = slice(num_actions, num_steps)
  else:
    action_rows = np.arange(num_actions) + (
        np.repeat(np.arange(len(counts)), counts) if has_final else 0)
    final_rows = ends - 1
  last_actions = starts + counts - 1
  observations, actions = batch.observations, batch.actions
  if has_final:
    observations = (_continued(observations, batch.final_observations, num_steps)
                    if len(counts) == 1 else None)
    if observations is None:
      observations = nested.interleave_rows(batch.observations, action_rows,
                                            batch.final_observations, final_rows, num_steps)
    actions = nested.interleave_rows(actions, action_rows, None, final_rows, num_steps)
    rewards = nested.interleave_rows(rewards, action_rows, None, final_rows, num_steps)
    step_metadata = nested.interleave_rows(step_metadata, action_rows, batch.final_step_metadata,
                                           final_rows, num_steps)

  terminated = np.asarray(batch.terminated, dtype=bool).reshape(-1)
  if (terminated & (counts == 0)).any():
    raise locate.error(int(np.argmax(terminated & (counts == 0))), fields.IS_TERMINAL,
                       'an episode without actions cannot be terminated')
  is_first = np.zeros(num_steps, dtype=bool)
  is_first[starts] = True
  is_last = np.zeros(num_steps, dtype=bool)
  is_last[ends - 1] = True
  is_terminal = np.zeros(num_steps, dtype=bool)
  is_terminal[ends - 1] = terminated
  discount = np.ones(num_steps, dtype=np.float32)
  if batch.discounts is not None:
    native = np.asarray(batch.discounts, dtype=np.float32).reshape(-1)
    locate.expect_rows(len(native), fields.DISCOUNT, 'discounts')
    locate.check_finite(native, fields.DISCOUNT)
    discount[action_rows] = native
  discount[last_actions[terminated]] = 0.0  # The action that reached the absorbing state.
  discount[(ends - 1)[terminated]] = 0.0
  steps = {
      fields.OBSERVATION: observations,
      fields.ACTION: actions,
      fields.REWARD: rewards,
      fields.DISCOUNT: discount,
      fields.IS_FIRST: is_first,
      fields.IS_LAST: is_last,
      fields.IS_TERMINAL: is_terminal,
      **step_metadata,
  }
  if copies is not None:
    observation_is_copy = np.zeros(num_steps, dtype=bool)
    observation_is_copy[ends - 1] = copies
    steps[fields.OBSERVATION_IS_COPY] = observation_is_copy
  metadata = [dict(m) for m in batch.metadata] or [{} for _ in counts]
  if len(metadata) != len(counts):
    raise errors.SchemaError(f'expected episode metadata for {len(counts)} episodes, got '
                             f'{len(metadata)}', field='metadata')
  return EpisodeBatch(steps=steps, starts=np.append(starts, num_steps), metadata=metadata)


def _continued(columns: Nested, finals: Nested, num_rows: int) -> Optional[Nested]:
  """One episode's observation rows followed by its final row, as views of the arrays they
  were cut from when every final row is the row after its column in the same buffer (a format
  that stores the final observation as the last row: rlu_atari's 27,000-frame episodes are not
  copied; the episode then shares the trajectory's memory); None otherwise."""
  views = nested.map_arrays(lambda column, final: _view_through(column, final, num_rows),
                            columns, finals)
  return None if any(view is None for view in nested.leaves(views)) else views


def _view_through(column: Any, final: Any, num_rows: int) -> Optional[np.ndarray]:
  """`column`'s rows and then `final`'s one row as a view, when memory has them in that order."""
  if not (isinstance(column, np.ndarray) and isinstance(final, np.ndarray)
          and column.dtype != object and column.dtype == final.dtype
          and column.shape[1:] == final.shape[1:] and len(final) == 1
          and len(column) + 1 == num_rows and column.flags.c_contiguous
          and final.flags.c_contiguous and _root(column) is _root(final)
          and final.ctypes.data == column.ctypes.data + column.nbytes):
    return None
  return np.lib.stride_tricks.as_strided(column, shape=(num_rows,) + column.shape[1:],
                                         writeable=column.flags.writeable)


def _root(array: np.ndarray) -> Any:
  """The object that owns `array`'s memory."""
  while isinstance(array, np.ndarray) and array.base is not None:
    array = array.base
  return array


class _Locator:
  """Errors of a batch that name the episode (when there are several) and its own step indices."""

  def __init__(self, counts: np.ndarray):
    self._counts = counts
    self._ends = np.cumsum(counts)

  def _prefix(self, episode: int) -> str:
    return f'episode {episode}: ' if len(self._counts) > 1 else ''

  def error(self, episode: int, field: str, problem: str) -> errors.EpisodeBoundaryError:
    return errors.EpisodeBoundaryError(self._prefix(episode) + problem, field=field)

  def expect_rows(self, rows: int, field: str, what: str) -> None:
    expected = int(self._ends[-1])
    if rows != expected:
      raise errors.EpisodeBoundaryError(f'expected {expected} {what}, got {rows}', field=field)

  def check_finite(self, values: np.ndarray, field: str) -> None:
    # Kinds of np.number that can hold non-finite values (bools and integers never do).
    if values.dtype.kind not in 'fcm' or np.isfinite(values).all():
      return
    bad = np.flatnonzero(~np.isfinite(values).reshape(len(values), -1).all(axis=1))
    episode = int(np.searchsorted(self._ends, bad[0], side='right'))
    local = bad[bad < self._ends[episode]] - (self._ends[episode] - self._counts[episode])
    local = local[local >= 0]
    raise errors.InvalidValueError(
        f'{self._prefix(episode)}non-finite values at steps {local[:10].tolist()}'
        f'{" ..." if len(local) > 10 else ""}', field=field)


def episode_ends(terminals: np.ndarray,
                 timeouts: Optional[np.ndarray] = None,
                 time_limit: Optional[int] = None) -> np.ndarray:
  """Rows that close an episode in a flat table: terminal or timeout rows, or every `time_limit`-th
  row of a run without either (for files that never recorded timeouts)."""
  terminals = np.asarray(terminals, dtype=bool).reshape(-1)
  ends = terminals.copy()
  if timeouts is not None:
    ends |= np.asarray(timeouts, dtype=bool).reshape(-1)
  if time_limit is not None:
    rows = np.arange(len(ends))
    # Start row of the run each row belongs to: one past the latest end before it.
    previous_end = np.maximum.accumulate(np.where(ends, rows, -1))
    run_start = np.concatenate([[0], previous_end[:-1] + 1])
    # Time-limit cuts count from the start of each run between recorded ends.
    ends |= (rows - run_start + 1) % time_limit == 0
  return ends


def split_rows(ends: np.ndarray) -> list[slice]:
  """Partition N rows into episodes: each True row closes one; rows after the last end form a final,
  unfinished episode. Every row belongs to exactly one episode."""
  ends = np.asarray(ends, dtype=bool).reshape(-1)
  stops = np.flatnonzero(ends) + 1
  starts = np.concatenate([[0], stops])
  if len(stops) == 0 or stops[-1] != len(ends):
    stops = np.concatenate([stops, [len(ends)]])
  return [slice(int(a), int(b)) for a, b in zip(starts, stops) if b > a]


def jump_ends(positions: np.ndarray, threshold: float) -> np.ndarray:
  """Rows after which the position (N, d) moves by more than `threshold` to the next row: the trace
  an environment reset leaves in a flat table whose flags do not mark it (D4RL AntMaze). The last
  row is not an end (the file's tail is handled by `split_rows`)."""
  positions = np.asarray(positions, dtype=np.float64)
  ends = np.zeros(len(positions), dtype=bool)
  if len(positions) > 1:
    ends[:-1] = np.linalg.norm(np.diff(positions, axis=0), axis=-1) > threshold
  return ends


def real_action_rows(steps: Mapping[str, Nested]) -> np.ndarray:
  """Which steps carry a real action and reward: all but `is_last` ones, whose action and reward
  are placeholders after the final observation (rlds.transformations.sar_fields_mask)."""
  return ~np.asarray(steps[fields.IS_LAST], dtype=bool)


def to_transitions(steps: Mapping[str, Nested]) -> dict[str, Nested]:
  """RLDS steps of one episode -> transitions (o_t, a_t, r_t, d_t, o_t+1, is_terminal_t+1).

  Transitions never cross an episode. The last step has no successor and starts none. For formats
  that did not keep the final observation, the last transition leads to the placeholder step
  (OBSERVATION_IS_COPY): after a termination its discount is 0 and o_t+1 is never used (D4RL's own
  qlearning_dataset keeps this transition too); after a truncation o_t+1 repeats o_t.
  """
  num = len(steps[fields.IS_FIRST]) - 1
  head = slice(0, num)
  return {
      fields.OBSERVATION: nested.take_rows(steps[fields.OBSERVATION], head),
      fields.ACTION: nested.take_rows(steps[fields.ACTION], head),
      fields.REWARD: np.asarray(steps[fields.REWARD])[head],
      fields.DISCOUNT: np.asarray(steps[fields.DISCOUNT])[head],
      fields.NEXT_OBSERVATION: nested.take_rows(steps[fields.OBSERVATION], slice(1, num + 1)),
      fields.IS_TERMINAL: np.asarray(steps[fields.IS_TERMINAL])[1:num + 1],
  }


def to_il_representations_dict(episodes: Iterable[Episode | Mapping[str, Any]]) -> dict[str, Nested]:
  """RLDS episodes -> il-representations' dict {obs, next_obs, acts, dones, rews}.

  N rows = the sum of episode lengths (transitions); `next_obs` never crosses an episode; `dones`
  is True exactly on each episode's last transition.
  """
  parts = []
  for episode in episodes:
    steps = episode.steps if isinstance(episode, Episode) else episode[fields.STEPS]
    transitions = to_transitions(steps)
    num = len(transitions[fields.REWARD])
    if num == 0:
      continue
    dones = np.zeros(num, dtype=bool)
    dones[-1] = True
    parts.append({
        'obs': transitions[fields.OBSERVATION],
        'next_obs': transitions[fields.NEXT_OBSERVATION],
        'acts': transitions[fields.ACTION],
        'dones': dones,
        'rews': transitions[fields.REWARD],
    })
  if not parts:
    raise errors.EmptyInputError('no episode has a transition')
  return nested.concat_rows(parts)


def _length(structure: Nested, field: str) -> int:
  try:
    return nested.leading_length(structure)
  except (ValueError, TypeError) as e:
    raise errors.EpisodeBoundaryError(str(e), field=field) from None


def _expect(condition: bool, field: str, problem: str) -> None:
  if not condition:
    raise errors.EpisodeBoundaryError(problem, field=field)
