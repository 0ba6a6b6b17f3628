"""The episode model: boundary rules, native layouts, and exact round trips to transitions/dicts."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite.core import episodes
from rlds_suite.core import validation
from rlds_suite.core.episodes import (BoundaryPolicy, EndingRule, Ending, FinalObservation,
                                 RewardTiming)

EXTRA_ROW = BoundaryPolicy(FinalObservation.EXTRA_ROW)


def _native_episode(rng, length, dict_obs):
  """T+1 observations (vector or dict with an image), T actions and rewards."""
  if dict_obs:
    obs = {'image': rng.integers(0, 255, (length + 1, 4, 4, 3), dtype=np.uint8),
           'state': rng.normal(size=(length + 1, 2)).astype(np.float32)}
  else:
    obs = rng.normal(size=(length + 1, 3)).astype(np.float32)
  acts = rng.integers(0, 5, length).astype(np.int64)
  rews = rng.normal(size=length)
  return obs, acts, rews


def test_terminated_episode_flags_and_discounts():
  obs = np.arange(4, dtype=np.float32)[:, None]  # o0..o3: three actions, final obs o3.
  trajectory = EXTRA_ROW.trajectory(obs, np.array([1, 2, 3]), np.array([.5, .25, 1.]),
                                    terminal_flag=True)
  episode = episodes.to_episode(trajectory)
  steps = episode.steps
  np.testing.assert_array_equal(steps[fields.OBSERVATION][:, 0], [0, 1, 2, 3])
  np.testing.assert_array_equal(steps[fields.ACTION], [1, 2, 3, 0])
  np.testing.assert_array_equal(steps[fields.REWARD], [.5, .25, 1., 0.])
  np.testing.assert_array_equal(steps[fields.DISCOUNT], [1, 1, 0, 0])
  np.testing.assert_array_equal(steps[fields.IS_FIRST], [True, False, False, False])
  np.testing.assert_array_equal(steps[fields.IS_LAST], [False, False, False, True])
  np.testing.assert_array_equal(steps[fields.IS_TERMINAL], [False, False, False, True])


def test_truncated_episode_sets_is_last_only():
  trajectory = EXTRA_ROW.trajectory(np.zeros((3, 1)), np.array([1, 2]), np.array([1., 1.]),
                                    terminal_flag=False)
  steps = episodes.to_episode(trajectory).steps
  np.testing.assert_array_equal(steps[fields.DISCOUNT], [1, 1, 1])
  np.testing.assert_array_equal(steps[fields.IS_LAST], [False, False, True])
  assert not steps[fields.IS_TERMINAL].any()


@pytest.mark.parametrize('terminal', [True, False])
def test_not_stored_final_observation_becomes_a_marked_copy(terminal):
  """Every real action and reward is on a step that is not is_last; the placeholder last step
  repeats the last real observation and is marked as a copy."""
  policy = BoundaryPolicy(FinalObservation.NOT_STORED)
  trajectory = policy.trajectory(np.arange(3.)[:, None], np.array([7, 8, 9]), np.array([1., 2., 3.]),
                                 terminal_flag=terminal, step_metadata={'q': np.array([4, 5, 6])})
  assert trajectory.final_observation_is_copy
  steps = episodes.to_episode(trajectory).steps
  np.testing.assert_array_equal(steps[fields.OBSERVATION], [[0], [1], [2], [2]])
  np.testing.assert_array_equal(steps[fields.OBSERVATION_IS_COPY], [False, False, False, True])
  np.testing.assert_array_equal(steps[fields.ACTION], [7, 8, 9, 0])
  np.testing.assert_array_equal(steps[fields.REWARD], [1, 2, 3, 0])
  np.testing.assert_array_equal(steps['q'], [4, 5, 6, 0])
  np.testing.assert_array_equal(steps[fields.IS_LAST], [False, False, False, True])
  np.testing.assert_array_equal(steps[fields.IS_TERMINAL], [False, False, False, terminal])
  np.testing.assert_array_equal(steps[fields.DISCOUNT], [1, 1, 0, 0] if terminal else [1, 1, 1, 1])
  assert validation.validate_episodes([episodes.to_episode(trajectory)]).ok
  transitions = episodes.to_transitions(steps)  # The last one leads to the copy.
  np.testing.assert_array_equal(transitions[fields.REWARD], [1, 2, 3])
  np.testing.assert_array_equal(transitions[fields.NEXT_OBSERVATION], [[1], [2], [2]])
  np.testing.assert_array_equal(transitions[fields.DISCOUNT], [1, 1, 0] if terminal else [1, 1, 1])


def test_an_episode_without_actions_is_its_final_observation_alone():
  batch = episodes.TrajectoryBatch(
      observations=np.zeros((2, 1)), actions=np.array([5, 6]), rewards=np.array([1., 2.]),
      num_actions=np.array([0, 2, 0]), terminated=np.array([False, True, False]),
      final_observations=np.array([[7.], [8.], [9.]]))
  converted = episodes.to_episodes(batch)
  assert [converted.episode(i).num_steps for i in range(3)] == [1, 3, 1]
  alone = converted.episode(0).steps
  np.testing.assert_array_equal(alone[fields.OBSERVATION], [[7.]])
  assert alone[fields.IS_FIRST].tolist() == alone[fields.IS_LAST].tolist() == [True]
  assert alone[fields.IS_TERMINAL].tolist() == [False] and alone[fields.DISCOUNT].tolist() == [1]
  np.testing.assert_array_equal(converted.episode(1).steps[fields.DISCOUNT], [1, 0, 0])
  assert validation.validate_episodes([converted.episode(i) for i in range(3)]).ok
  with pytest.raises(errors.EpisodeBoundaryError, match='episode 0: .*cannot be terminated'):
    episodes.to_episodes(dataclasses.replace(batch, terminated=np.array([True, True, False])))
  with pytest.raises(errors.EpisodeBoundaryError, match='at least one action'):
    episodes.to_episodes(dataclasses.replace(batch, final_observations=None))


def test_copy_mask_only_where_the_policy_marks_copies():
  obs, acts, rews = np.zeros((2, 1)), np.zeros(2), np.zeros(2)
  marked = BoundaryPolicy(FinalObservation.NEXT_OBSERVATIONS, marks_copies=True)
  kept = episodes.to_episode(marked.trajectory(obs, acts, rews, next_observations=obs + 1)).steps
  np.testing.assert_array_equal(kept[fields.OBSERVATION_IS_COPY], [False, False, False])
  plain = BoundaryPolicy(FinalObservation.NEXT_OBSERVATIONS)
  assert fields.OBSERVATION_IS_COPY not in episodes.to_episode(
      plain.trajectory(obs, acts, rews, next_observations=obs)).steps
  assert BoundaryPolicy(FinalObservation.NOT_STORED, marks_copies=False).marks_copies


def test_next_observations_give_final_step():
  policy = BoundaryPolicy(FinalObservation.NEXT_OBSERVATIONS)
  obs = np.array([[0.], [1.]])
  trajectory = policy.trajectory(obs, np.array([5, 6]), np.array([1., 1.]),
                                 next_observations=np.array([[1.], [2.]]))
  steps = episodes.to_episode(trajectory).steps
  np.testing.assert_array_equal(steps[fields.OBSERVATION][:, 0], [0, 1, 2])
  assert trajectory.ending is Ending.TRUNCATED


def test_on_arrival_rewards_and_time_limit():
  """d4rl-pybullet: row t holds the reward for arriving at o_t and the last row is final."""
  policy = BoundaryPolicy(FinalObservation.LAST_ROW, RewardTiming.ON_ARRIVAL,
                          EndingRule.TIME_LIMIT, time_limit=3)
  obs = np.arange(4.)[:, None]
  rows = dict(observations=obs, actions=np.array([1, 2, 3, 0]), rewards=np.array([0., 10., 20., 30.]))
  at_limit = policy.trajectory(**rows, terminal_flag=True)
  assert at_limit.ending is Ending.TRUNCATED
  np.testing.assert_array_equal(at_limit.rewards, [10., 20., 30.])
  np.testing.assert_array_equal(at_limit.actions, [1, 2, 3])
  np.testing.assert_array_equal(at_limit.final_observation, [3.])
  short = policy.trajectory(obs[:3], np.array([1, 2, 0]), np.array([0., 10., 20.]),
                            terminal_flag=True)
  assert short.ending is Ending.TERMINATED


def test_magical_rule_is_always_truncated():
  policy = BoundaryPolicy(FinalObservation.EXTRA_ROW, ending_rule=EndingRule.ALWAYS_TRUNCATED)
  assert policy.ending(5, terminal_flag=True) is Ending.TRUNCATED


@pytest.mark.parametrize('obs_rows, acts, rews, field', [
    (3, 3, 3, fields.OBSERVATION),  # EXTRA_ROW needs T+1 observations.
    (4, 3, 2, fields.REWARD),
])
def test_length_mismatch_is_typed_error(obs_rows, acts, rews, field):
  with pytest.raises(errors.EpisodeBoundaryError) as info:
    EXTRA_ROW.trajectory(np.zeros((obs_rows, 1)), np.zeros(acts), np.zeros(rews))
  assert info.value.field == field


def test_nan_reward_is_typed_error():
  trajectory = EXTRA_ROW.trajectory(np.zeros((3, 1)), np.zeros(2), np.array([0., np.nan]))
  with pytest.raises(errors.InvalidValueError, match=r'steps \[1\]'):
    episodes.to_episode(trajectory)


def test_episode_without_actions_is_refused_unless_it_has_a_final_observation():
  with pytest.raises(errors.EpisodeBoundaryError, match='at least one action'):
    episodes.to_episode(BoundaryPolicy(FinalObservation.NOT_STORED).trajectory(
        np.zeros((0, 1)), np.zeros(0), np.zeros(0)))
  alone = episodes.to_episode(EXTRA_ROW.trajectory(np.ones((1, 1)), np.zeros(0), np.zeros(0)))
  np.testing.assert_array_equal(alone.steps[fields.OBSERVATION], [[1]])
  assert alone.steps[fields.IS_LAST].tolist() == [True]


def test_episode_ends_and_split_rows_partition_every_row():
  terminals = np.array([0, 0, 1, 0, 0, 0, 0, 0], bool)
  timeouts = np.array([0, 0, 0, 0, 1, 0, 0, 0], bool)
  ends = episodes.episode_ends(terminals, timeouts)
  assert [(s.start, s.stop) for s in episodes.split_rows(ends)] == [(0, 3), (3, 5), (5, 8)]
  # Without timeouts, a time limit cuts each run between terminals from that run's start.
  ends = episodes.episode_ends(np.array([0, 1, 0, 0, 0, 0, 0], bool), time_limit=2)
  assert [(s.start, s.stop) for s in episodes.split_rows(ends)] == [(0, 2), (2, 4), (4, 6), (6, 7)]


def test_to_transitions_never_cross_and_keep_termination():
  trajectory = EXTRA_ROW.trajectory(np.arange(3.)[:, None], np.array([1, 2]), np.array([.1, .2]),
                                    terminal_flag=True)
  transitions = episodes.to_transitions(episodes.to_episode(trajectory).steps)
  np.testing.assert_array_equal(transitions[fields.NEXT_OBSERVATION][:, 0], [1, 2])
  np.testing.assert_array_equal(transitions[fields.IS_TERMINAL], [False, True])
  np.testing.assert_array_equal(transitions[fields.DISCOUNT], [1, 0])


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(1, 6), min_size=1, max_size=5),
       terminal=st.lists(st.booleans(), min_size=5, max_size=5),
       dict_obs=st.booleans(), seed=st.integers(0, 2**16))
def test_round_trip_native_to_rlds_to_dict_is_exact(lengths, terminal, dict_obs, seed):
  rng = np.random.default_rng(seed)
  natives = [_native_episode(rng, n, dict_obs) for n in lengths]
  eps = [episodes.to_episode(EXTRA_ROW.trajectory(o, a, r, terminal_flag=terminal[i]))
         for i, (o, a, r) in enumerate(natives)]
  report = validation.validate_episodes(eps)
  assert report.ok, report.violations
  assert report.num_steps == sum(lengths) + len(lengths)

  data = episodes.to_il_representations_dict(eps)
  assert len(data['dones']) == sum(lengths)
  ends = np.cumsum(lengths) - 1
  np.testing.assert_array_equal(np.flatnonzero(data['dones']), ends)
  starts = np.concatenate([[0], ends[:-1] + 1])
  for (o, a, r), start, n in zip(natives, starts, lengths):
    rows = slice(start, start + n)
    np.testing.assert_array_equal(data['acts'][rows], a)
    np.testing.assert_array_equal(data['rews'][rows], r)
    if dict_obs:
      for key in o:
        np.testing.assert_array_equal(data['obs'][key][rows], o[key][:-1])
        np.testing.assert_array_equal(data['next_obs'][key][rows], o[key][1:])
    else:
      np.testing.assert_array_equal(data['obs'][rows], o[:-1])
      np.testing.assert_array_equal(data['next_obs'][rows], o[1:])

  for episode, (o, a, r), was_terminal in zip(eps, natives, terminal):
    transitions = episodes.to_transitions(episode.steps)
    np.testing.assert_array_equal(transitions[fields.ACTION], a)
    np.testing.assert_array_equal(transitions[fields.REWARD], r)
    expected_terminal = np.zeros(len(a), bool)
    expected_terminal[-1] = was_terminal
    np.testing.assert_array_equal(transitions[fields.IS_TERMINAL], expected_terminal)
    np.testing.assert_array_equal(transitions[fields.DISCOUNT], 1.0 - expected_terminal)


def test_native_discounts_and_final_step_metadata_are_kept():
  trajectory = episodes.Trajectory(
      observations=np.zeros((2, 1)), actions=np.array([1, 2]), rewards=np.array([1., 1.]),
      ending=Ending.TRUNCATED, final_observation=np.ones(1), discounts=np.array([.5, .9]),
      step_metadata={'note': np.array(['a', 'bb'], dtype=object), 'x': np.array([1., 2.])},
      final_step_metadata={'note': 'ccc', 'x': 3.})
  steps = episodes.to_episode(trajectory).steps
  np.testing.assert_allclose(steps[fields.DISCOUNT], [.5, .9, 1.])
  assert list(steps['note']) == ['a', 'bb', 'ccc']
  np.testing.assert_array_equal(steps['x'], [1., 2., 3.])
  terminated = dataclasses.replace(trajectory, ending=Ending.TERMINATED)
  np.testing.assert_allclose(episodes.to_episode(terminated).steps[fields.DISCOUNT], [.5, 0., 0.])


def _concat_trajectories(trajectories):
  """The TrajectoryBatch of several trajectories that all keep their final observation."""
  def rows(name):
    return nested.concat_rows([getattr(t, name) for t in trajectories])

  return episodes.TrajectoryBatch(
      observations=rows('observations'), actions=rows('actions'), rewards=rows('rewards'),
      num_actions=np.array([len(t.rewards) for t in trajectories]),
      terminated=np.array([t.ending is Ending.TERMINATED for t in trajectories]),
      final_observations=nested.concat_rows(
          [nested.as_one_row(t.observations, t.final_observation) for t in trajectories]),
      step_metadata=rows('step_metadata'), discounts=rows('discounts'),
      final_step_metadata=nested.concat_rows(
          [nested.as_one_row(t.step_metadata, t.final_step_metadata) for t in trajectories]),
      metadata=[t.metadata for t in trajectories])


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(1, 5), min_size=1, max_size=5),
       terminal=st.lists(st.booleans(), min_size=5, max_size=5), seed=st.integers(0, 2**16))
def test_batch_conversion_equals_one_by_one(lengths, terminal, seed):
  rng = np.random.default_rng(seed)
  trajectories = []
  for i, length in enumerate(lengths):
    o, a, r = _native_episode(rng, length, dict_obs=True)
    tokens = np.empty(length, dtype=object)  # Variable-length step metadata.
    for t in range(length):
      tokens[t] = np.arange(t + i, dtype=np.int32)
    trajectories.append(episodes.Trajectory(
        observations=nested.take_rows(o, slice(0, length)), actions=a, rewards=r,
        ending=Ending.TERMINATED if terminal[i] else Ending.TRUNCATED,
        final_observation=nested.row(o, -1), discounts=rng.uniform(size=length),
        step_metadata={'tokens': tokens, 'x': rng.normal(size=length)},
        final_step_metadata={'tokens': np.arange(i, dtype=np.int32), 'x': 9.0},
        metadata={'index': i}))
  batch = episodes.to_episodes(_concat_trajectories(trajectories))
  assert len(batch) == len(trajectories)
  for index, trajectory in enumerate(trajectories):
    one, got = episodes.to_episode(trajectory), batch.episode(index)
    assert got.metadata == one.metadata == {'index': index}
    for (path, expected), (_, value) in zip(nested.flatten_with_paths(one.steps),
                                            nested.flatten_with_paths(got.steps)):
      if expected.dtype == object:
        assert [list(v) for v in value] == [list(v) for v in expected], path
      else:
        np.testing.assert_array_equal(value, expected, err_msg=path)


def test_batch_errors_name_the_episode_and_its_steps():
  good = EXTRA_ROW.trajectory(np.zeros((3, 1)), np.array([1, 2]), np.array([1., 1.]))
  bad = EXTRA_ROW.trajectory(np.zeros((4, 1)), np.array([1, 2, 3]), np.array([1., np.nan, 1.]))
  batch = _concat_trajectories([
      dataclasses.replace(t, discounts=np.ones(len(t.rewards)), step_metadata={},
                          final_step_metadata={}) for t in (good, bad)])
  with pytest.raises(errors.InvalidValueError, match=r'episode 1: non-finite values at steps \[1\]'):
    episodes.to_episodes(batch)
  with pytest.raises(errors.EpisodeBoundaryError, match='episode 1: an episode needs at least one'):
    episodes.to_episodes(dataclasses.replace(batch, num_actions=np.array([5, 0]),
                                             final_observations=None, final_step_metadata=None))


def test_interleave_rows_by_slices_equals_by_indices_and_zero_fills_placeholders():
  """One episode's rows are placed by slices (block copies), several episodes' by index arrays:
  the same columns; placeholder rows are zeros of the column's dtype (empty strings, not '0')."""
  columns = {'frame': np.arange(12, dtype=np.uint8).reshape(4, 3), 'name': np.array(list('abcd')),
             'ragged': np.array([np.zeros(1), np.zeros(2), np.zeros(3), np.zeros(1)], dtype=object)}
  finals = {'frame': np.full((1, 3), 9, np.uint8), 'name': np.array(['z']),
            'ragged': np.array([np.ones(5)], dtype=object)}
  for others in (finals, None):
    by_slices = nested.interleave_rows(columns, slice(0, 4), others, slice(4, 5), 5)
    by_indices = nested.interleave_rows(columns, np.arange(4), others, np.array([4]), 5)
    for key in columns:
      assert by_slices[key].dtype == by_indices[key].dtype == columns[key].dtype, key
      assert all(np.array_equal(a, b) for a, b in zip(by_slices[key], by_indices[key])), key
  assert by_slices['name'].tolist() == list('abcd') + ['']
  assert by_slices['frame'][-1].tolist() == [0, 0, 0]
  assert np.array_equal(by_slices['ragged'][-1], np.zeros(()))
  two = nested.interleave_rows(columns, np.array([0, 1, 3, 4]), None, np.array([2, 5]), 6)
  assert two['name'].tolist() == ['a', 'b', '', 'c', 'd', '']
