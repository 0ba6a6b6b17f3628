"""The validator reports every violation with its episode and step index."""

import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.core import fields
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
  with pytest.raises(errors.ValidationError, match='episode 1, step 2: is_first'):
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
