"""The validator reports every violation with its episode and step index."""

import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import spaces
from rlds_suite.core import validation


def _steps(n=4, **overrides):
  steps = {
      fields.OBSERVATION: np.zeros((n, 2), np.float32),
      fields.ACTION: np.zeros(n, np.int64),
      fields.REWARD: np.ones(n, np.float32),
      fields.DISCOUNT: np.ones(n, np.float32),
      fields.IS_FIRST: np.eye(1, n, 0, dtype=bool)[0],
      fields.IS_LAST: np.eye(1, n, n - 1, dtype=bool)[0],
      fields.IS_TERMINAL: np.zeros(n, bool),
  }
  steps.update(overrides)
  return {fields.STEPS: steps}


def test_valid_episodes_pass_and_summarise():
  report = validation.validate_episodes([_steps(3), _steps(5)], name='toy')
  assert report.ok
  summary = report.summary()
  assert (summary['episodes'], summary['steps']) == (2, 8)
  assert (summary['return_min'], summary['return_max'], summary['return_mean']) == (3, 5, 4)
  assert summary['observation_spec'] == 'float32[2]'
  assert summary['action_spec'] == 'int64[]'


def test_every_violation_is_reported_with_indices():
  bad_first = _steps(4, **{fields.IS_FIRST: np.array([False, False, True, False])})
  bad_last = _steps(4, **{fields.IS_LAST: np.array([False, True, False, False])})
  terminal_not_last = _steps(4, **{fields.IS_TERMINAL: np.array([False, True, False, False])})
  nan_reward = _steps(4, **{fields.REWARD: np.array([0, np.inf, 0, np.nan], np.float32)})
  report = validation.validate_episodes(
      [_steps(), bad_first, bad_last, terminal_not_last, nan_reward])
  found = {(v.episode, v.step, v.field) for v in report.violations}
  assert found == {
      (1, 0, fields.IS_FIRST), (1, 2, fields.IS_FIRST),
      (2, 3, fields.IS_LAST), (2, 1, fields.IS_LAST),
      (3, 1, fields.IS_TERMINAL),
      (4, 1, fields.REWARD), (4, 3, fields.REWARD),
  }
  with pytest.raises(errors.ValidationError, match='is_first set after the start of the episode: '
                     '1 in 1 episode.s., first at episode 1, step 2'):
    report.raise_if_invalid()


def test_inconsistent_specs_and_lengths():
  other_dtype = _steps(3, **{fields.OBSERVATION: np.zeros((3, 2), np.float64)})
  ragged = _steps(3, **{fields.ACTION: np.zeros(2, np.int64)})
  report = validation.validate_episodes([_steps(3), other_dtype, ragged])
  messages = [str(v) for v in report.violations]
  assert any(m.startswith('episode 1: observation: spec') for m in messages)
  assert any(m.startswith('episode 2: steps: fields have different numbers') for m in messages)


def test_missing_fields_and_empty_episodes():
  steps = _steps(2)[fields.STEPS]
  del steps[fields.IS_TERMINAL]
  report = validation.validate_episodes([{fields.STEPS: steps}, _steps(0)])
  assert [(v.episode, v.field) for v in report.violations] == [(0, fields.IS_TERMINAL),
                                                               (1, fields.STEPS)]


def _terminated(n=4, **overrides):
  """A terminated episode: discount 0 on the last action (step n-2) and the final step."""
  discount = np.ones(n, np.float32)
  discount[-2:] = 0
  return _steps(n, **{fields.IS_TERMINAL: np.eye(1, n, n - 1, dtype=bool)[0],
                      fields.DISCOUNT: discount, **overrides})


def test_discount_rules_of_termination_and_truncation():
  terminal_discount_one = _terminated(4, **{fields.DISCOUNT: np.array([1, 1, 1, 0], np.float32)})
  terminal_step_discount_one = _terminated(3, **{fields.DISCOUNT: np.array([1, 0, 1], np.float32)})
  truncated_discount_zero = _steps(3, **{fields.DISCOUNT: np.array([1, 0, 1], np.float32)})
  report = validation.validate_episodes(
      [_terminated(), terminal_discount_one, terminal_step_discount_one, truncated_discount_zero])
  assert [(v.episode, v.step, v.field) for v in report.violations] == [
      (1, 2, fields.DISCOUNT), (2, 2, fields.DISCOUNT), (3, 1, fields.DISCOUNT)]
  assert 'action reaching the terminal step has a non-zero discount' in str(report.violations[0])
  assert 'terminal step has a non-zero discount: 1' in str(report.violations[1])
  assert 'truncation keeps 1' in str(report.violations[2])
  assert not report.ok and not report.warnings


def test_zero_discount_mid_episode_is_a_warning_with_its_reason():
  mid = _terminated(6, **{fields.DISCOUNT: np.array([1, 0, 1, 0, 0, 0], np.float32)})
  report = validation.validate_episodes([mid, _steps(3)])
  assert report.ok  # Warnings do not invalidate.
  assert [(v.episode, v.step) for v in report.warnings] == [(0, 1), (0, 3)]
  assert report.warnings[0].kind == validation.MID_EPISODE_ZERO_DISCOUNT
  assert 'lost life' in str(report.groups()[0])
  assert report.summary()['warnings'] == 2 and report.summary()['violations'] == 0


def test_violations_are_grouped_by_kind_with_counts_and_first_locations():
  bad_last = lambda: _steps(4, **{fields.IS_LAST: np.array([False, True, False, True])})
  nan_rewards = _steps(9, **{fields.REWARD: np.full(9, np.nan, np.float32)})
  report = validation.validate_episodes([bad_last() for _ in range(7)] + [nan_rewards])
  groups = report.groups()
  assert [(g.field, g.kind, g.count, g.episodes) for g in groups] == [
      (fields.IS_LAST, 'is_last set before the final step', 7, 7),
      (fields.REWARD, 'non-finite reward', 9, 1)]
  assert [v.location for v in groups[0].first] == [f'episode {i}, step 1' for i in range(5)]
  text = str(groups[1])
  assert text.startswith('error: reward: non-finite reward: 9 in 1 episode(s), first at '
                         'episode 7, step 0 (nan); episode 7, step 1 (nan)')
  assert text.endswith(', ...')
  assert report.summary()['by_kind'] == {
      'error: is_last: is_last set before the final step': 7, 'error: reward: non-finite reward': 9}
  with pytest.raises(errors.ValidationError,
                     match=r'16 violation\(s\):\n  error: is_last: .*: 7 in 7'):
    report.raise_if_invalid()


def test_values_outside_declared_spaces():
  declared = spaces.from_metadata(spaces.as_metadata(
      action=spaces.Discrete(2), observation=spaces.Box(-1.0, [1.0, 2.0])))
  outside_discrete = _steps(4, **{fields.ACTION: np.array([0, 7, -1, 9])})  # 9: the placeholder.
  nan_action = _steps(3, **{fields.ACTION: np.array([0.0, np.nan, 0.0])})
  inf_observation = _steps(3, **{fields.OBSERVATION: np.array([[0, 0], [0, np.inf], [0, 0]],
                                                              np.float32)})
  outside_box = _steps(4, **{fields.OBSERVATION: np.array([[0, 1.5], [1.5, 0], [0, 0], [0, 3]],
                                                          np.float32)})
  report = validation.validate_episodes(
      [_steps(), outside_discrete, _steps(), inf_observation, outside_box], declared=declared)
  errors_found = {(v.episode, v.step, v.field, v.kind) for v in report.violations}
  assert errors_found == {
      (1, 1, fields.ACTION, 'outside the declared Discrete(2) space'),
      (3, 1, fields.OBSERVATION, 'non-finite value (NaN or infinite)'),
  }
  (nan,) = validation.validate_episodes([nan_action]).violations
  assert (nan.step, nan.field, nan.kind) == (1, fields.ACTION, 'non-finite value (NaN or infinite)')
  assert [v.detail for v in report.violations if v.episode == 1] == ['2 step(s), e.g. 7']
  (warning,) = report.warnings  # Continuous values out of bounds: counted, not fatal.
  assert (warning.episode, warning.step, warning.field, warning.kind, warning.detail) == (
      4, 1, fields.OBSERVATION, 'outside the declared Box bounds', '2 step(s), e.g. [1.5 0. ]')
  assert ('warning: observation: outside the declared Box bounds: 1 in 1 episode(s), first at '
          'episode 4, step 1 (2 step(s), e.g. [1.5 0. ])') in [str(g) for g in report.groups()]


def test_nan_and_infinite_values_are_errors_without_declared_spaces():
  nested_nan = _steps(3, **{fields.OBSERVATION: {'pos': np.array([[0.0], [np.nan], [0.0]]),
                                                 'frame': np.zeros((3, 2, 2), np.uint8)}})
  report = validation.validate_episodes([nested_nan])
  assert [(v.episode, v.step, v.field) for v in report.violations] == [
      (0, 1, 'observation/pos')]


def test_nested_declared_spaces_round_trip():
  metadata = spaces.as_metadata(observation={'pos': spaces.Box([-1, -2], [1, 2])},
                                action=spaces.Discrete(3, start=-1))
  assert spaces.from_metadata(metadata) == {
      'observation': {'pos': spaces.Box([-1.0, -2.0], [1.0, 2.0])},
      'action': spaces.Discrete(3, start=-1)}
  assert spaces.from_metadata(None) == {} and spaces.from_metadata({'game': 'Pong'}) == {}
  report = validation.validate_episodes(
      [_steps(4, **{fields.ACTION: np.array([-1, 1, 2, 0])})], declared=spaces.from_metadata(metadata))
  assert [v.kind for v in report.violations] == ['outside the declared Discrete(3, start=-1) space']
