"""Stream units (TensorFlow, vectorised) against their numpy references, on random episodes."""

import hypothesis
from hypothesis import strategies as st
import numpy as np
import pytest
import tensorflow as tf

from rlds_suite.core import episodes
from rlds_suite.core import fields
from rlds_suite.streams import reference_units as reference
from rlds_suite.streams import units


def make_steps(num_actions: int, terminated: bool, final: bool, seed: int = 0) -> dict:
  rng = np.random.default_rng(seed)
  trajectory = episodes.Trajectory(
      observations={'pos': rng.normal(size=(num_actions, 3)).astype(np.float32),
                    'frame': rng.integers(0, 255, size=(num_actions, 2, 2), dtype=np.uint8)},
      actions=rng.normal(size=(num_actions, 2)).astype(np.float32),
      rewards=rng.normal(size=num_actions).astype(np.float32),
      ending=episodes.Ending.TERMINATED if terminated else episodes.Ending.TRUNCATED,
      final_observation=({'pos': np.ones(3, np.float32), 'frame': np.ones((2, 2), np.uint8)}
                         if final else None))
  return episodes.to_episode(trajectory).steps


def assert_same(actual, expected):
  assert set(actual) == set(expected)
  for key in expected:
    if isinstance(expected[key], dict):
      assert_same(actual[key], expected[key])
    else:
      np.testing.assert_allclose(np.asarray(actual[key]), expected[key], rtol=1e-5, atol=1e-6,
                                 err_msg=key)
      assert np.asarray(actual[key]).dtype == np.asarray(expected[key]).dtype, key


ALL_UNITS = [
    units.StepUnit(),
    units.Transitions(),
    units.NStepTransitions(n=1),
    units.NStepTransitions(n=3, gamma=0.9),
    units.Windows(length=4),
    units.Windows(length=3, stride=2, pad=False),
    units.TargetPairs(offset=0),
    units.TargetPairs(offset=2),
]


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(num_actions=st.integers(1, 9), terminated=st.booleans(), final=st.booleans(),
                  seed=st.integers(0, 1000), which=st.sampled_from(range(len(ALL_UNITS))))
def test_units_match_numpy_reference(num_actions, terminated, final, seed, which):
  unit = ALL_UNITS[which]
  steps = make_steps(num_actions, terminated, final, seed)
  expected = unit.reference(steps)
  actual = unit.from_steps(tf.nest.map_structure(tf.constant, steps))
  assert_same(actual, expected)
  num_units = len(tf.nest.flatten(expected)[0])
  assert unit.count(np.array([num_actions + final]))[0] == num_units


def test_transitions_keep_truncation_distinct_from_termination():
  terminated = units.Transitions().from_steps(make_steps(3, terminated=True, final=True))
  truncated = units.Transitions().from_steps(make_steps(3, terminated=False, final=True))
  np.testing.assert_array_equal(terminated[fields.DISCOUNT], [1, 1, 0])
  np.testing.assert_array_equal(terminated[fields.IS_TERMINAL], [False, False, True])
  np.testing.assert_array_equal(truncated[fields.DISCOUNT], [1, 1, 1])
  np.testing.assert_array_equal(truncated[fields.IS_TERMINAL], [False, False, False])
  np.testing.assert_array_equal(terminated[fields.NEXT_OBSERVATION]['pos'][-1], np.ones(3))


def test_n_step_values():
  steps = {
      fields.OBSERVATION: np.arange(5, dtype=np.float32),
      fields.ACTION: np.zeros(5, np.float32),
      fields.REWARD: np.array([1, 2, 3, 4, 0], np.float32),
      fields.DISCOUNT: np.array([1, 1, 1, 0, 0], np.float32),
      fields.IS_FIRST: np.array([1, 0, 0, 0, 0], bool),
      fields.IS_LAST: np.array([0, 0, 0, 0, 1], bool),
      fields.IS_TERMINAL: np.array([0, 0, 0, 0, 1], bool),
  }
  expected = {
      fields.REWARD: [1 + .5 * 2, 2 + .5 * 3, 3 + .5 * 4, 4],
      fields.DISCOUNT: [.25, .25, 0, 0],  # The action reaching the absorbing state ends bootstrapping.
      fields.NEXT_OBSERVATION: [2, 3, 4, 4],
      fields.IS_TERMINAL: [False, False, True, True],
      reference.NUM_STEPS: [2, 2, 2, 1],
  }
  for result in (reference.to_n_step_transitions(steps, 2, 0.5),
                 units.NStepTransitions(2, 0.5).from_steps(steps)):
    for key, value in expected.items():
      np.testing.assert_allclose(np.asarray(result[key]), value, err_msg=key)


def test_windows_pad_or_drop():
  steps = make_steps(4, terminated=False, final=True)  # 5 steps
  padded = units.Windows(length=3, stride=2).from_steps(steps)
  np.testing.assert_array_equal(padded[reference.MASK],
                                [[1, 1, 1], [1, 1, 1], [1, 0, 0]])
  np.testing.assert_array_equal(padded[fields.ACTION][2, 1:], np.zeros((2, 2)))
  np.testing.assert_array_equal(padded[fields.ACTION][1], steps[fields.ACTION][2:5])
  dropped = units.Windows(length=3, stride=2, pad=False).from_steps(steps)
  assert dropped[reference.MASK].shape == (2, 3)
  too_short = units.Windows(length=9, pad=False).from_steps(steps)
  assert too_short[fields.REWARD].shape == (0, 9)


def test_target_pairs_stay_in_episode():
  steps = make_steps(5, terminated=True, final=True)  # 6 steps
  pairs = units.TargetPairs(offset=4).from_steps(steps)
  np.testing.assert_array_equal(pairs[reference.CONTEXT][fields.ACTION], steps[fields.ACTION][:2])
  np.testing.assert_array_equal(pairs[reference.TARGET][fields.ACTION], steps[fields.ACTION][4:])
  assert units.TargetPairs(offset=6).from_steps(steps)[reference.TARGET][fields.REWARD].shape == (0,)


@pytest.mark.parametrize('make', [lambda: units.NStepTransitions(0), lambda: units.Windows(0),
                                  lambda: units.TargetPairs(-1)])
def test_invalid_parameters(make):
  with pytest.raises(ValueError):
    make()


@hypothesis.settings(max_examples=25, deadline=None)
@hypothesis.given(lengths=st.lists(st.integers(1, 7), min_size=1, max_size=4),
                  final=st.booleans(), seed=st.integers(0, 1000),
                  which=st.sampled_from(range(len(ALL_UNITS))))
def test_units_of_concatenated_episodes_are_each_episodes_units(lengths, final, seed, which):
  unit = ALL_UNITS[which]
  steps = [make_steps(n, terminated=bool(i % 2), final=final, seed=seed + i)
           for i, n in enumerate(lengths)]
  row_splits = np.cumsum([0] + [len(s[fields.IS_FIRST]) for s in steps])
  concatenated = tf.nest.map_structure(lambda *a: tf.constant(np.concatenate(a)), *steps)
  actual, episode = unit.from_episodes(concatenated, tf.constant(row_splits))
  references = [unit.reference(s) for s in steps]
  expected = tf.nest.map_structure(lambda *a: np.concatenate(a), *references)
  assert_same(actual, expected)
  counts = [len(tf.nest.flatten(r)[0]) for r in references]
  np.testing.assert_array_equal(episode, np.repeat(np.arange(len(steps)), counts))


@pytest.mark.parametrize('lengths', [[3, 0, 2, 0, 0, 4], [0], [0, 5], [1], []])
def test_episode_of_rows_skips_empty_episodes(lengths):
  row_splits = np.cumsum([0] + lengths).astype(np.int64)
  got = units.episode_of_rows(tf.constant(row_splits)).numpy()
  np.testing.assert_array_equal(got, np.repeat(np.arange(len(lengths)), lengths))


@pytest.mark.parametrize('epochs, expected', [([2, 2], [2, 2, 2, 2, 2]), ([0, 1], [0, 0, 1, 1, 1]),
                                              ([], [])])
def test_tag_epochs_fills_one_pass_and_gathers_by_episode_across_passes(epochs, expected):
  group = {'x': tf.zeros([len(expected)])}
  episodes_of_units = tf.constant([0, 0, 1, 1, 1][:len(expected)], tf.int64)
  got = units.tag_epochs(group, tf.constant(epochs, tf.int64), lambda: episodes_of_units)
  np.testing.assert_array_equal(got.numpy(), expected)
