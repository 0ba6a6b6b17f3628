"""OPE on a small MDP whose true value is computed exactly: episodes end by termination (an absorbing
state) and by a time limit (truncation). FQE (a table: linear Q on one-hot states), per-decision WIS
and weighted DR recover the exact value; FQE fed transitions that treat truncation as termination
does not."""

import dataclasses

import numpy as np
import pytest

from rlds_suite.core import episodes as episodes_lib
from rlds_suite.ope import data as data_lib
from rlds_suite.ope import fqe
from rlds_suite.ope import importance
from rlds_suite.ope import metrics
from rlds_suite.ope import policies

DISCOUNT = 0.8
TIME_LIMIT = 30
START = np.array([0.6, 0.3, 0.1])
# P[s, a] over next states, hazard H[s, a] of termination, reward R[s, a].
P = np.array([[[0.1, 0.8, 0.1], [0.7, 0.2, 0.1]],
              [[0.2, 0.2, 0.6], [0.5, 0.4, 0.1]],
              [[0.3, 0.3, 0.4], [0.9, 0.05, 0.05]]])
HAZARD = np.array([[0.0, 0.04], [0.02, 0.0], [0.06, 0.01]])
REWARD = np.array([[1.0, 0.0], [0.5, 2.0], [-1.0, 3.0]])
BEHAVIOUR = np.array([[0.5, 0.5], [0.5, 0.5], [0.5, 0.5]])
TARGET = np.array([[0.7, 0.3], [0.35, 0.65], [0.6, 0.4]])


def exact_value(pi: np.ndarray) -> float:
  """d0 . (I - gamma M_pi)^-1 r_pi for the infinite-horizon task (time limits are not in it)."""
  r_pi = np.sum(pi * REWARD, axis=1)
  m_pi = np.einsum('sa,sat->st', pi * (1 - HAZARD), P)
  return float(START @ np.linalg.solve(np.eye(3) - DISCOUNT * m_pi, r_pi))


def one_hot(states: np.ndarray) -> np.ndarray:
  return np.eye(3, dtype=np.float32)[states]


def record(num_episodes: int, seed: int) -> list[dict]:
  """RLDS steps of behaviour-policy episodes, through the project's episode model."""
  rng = np.random.default_rng(seed)
  found = []
  for _ in range(num_episodes):
    s = rng.choice(3, p=START)
    states, actions, rewards, log_probs = [], [], [], []
    terminated = False
    while len(actions) < TIME_LIMIT:
      a = rng.choice(2, p=BEHAVIOUR[s])
      states.append(s)
      actions.append(a)
      rewards.append(REWARD[s, a])
      log_probs.append(np.log(BEHAVIOUR[s, a]))
      if rng.random() < HAZARD[s, a]:
        terminated = True
        break
      s = rng.choice(3, p=P[s, a])
    final = np.zeros(3, np.float32) if terminated else one_hot(s)
    trajectory = episodes_lib.Trajectory(
        observations=one_hot(np.array(states)), actions=np.array(actions, np.int64),
        rewards=np.array(rewards, np.float32),
        ending=(episodes_lib.Ending.TERMINATED if terminated else episodes_lib.Ending.TRUNCATED),
        final_observation=final,
        step_metadata={'action_log_probs': np.array(log_probs, np.float64)})
    found.append(episodes_lib.to_episode(trajectory).steps)
  return found


def target_policy() -> policies.CallablePolicy:
  return policies.CallablePolicy(
      probabilities_fn=lambda obs: np.asarray(obs, np.float64) @ TARGET, discrete=True,
      name='target')


@pytest.fixture(scope='module')
def dataset():
  return data_lib.from_steps(record(1500, seed=0), name='tabular')


@pytest.fixture(scope='module')
def fitted(dataset):
  return fqe.evaluate(target_policy(), dataset, CONFIG)


CONFIG = fqe.FQEConfig(discount=DISCOUNT, hidden=(), learning_rate=0.05, batch_size=1 << 20,
                       num_steps=300, target_update_period=1, seed=0)


def test_dataset_has_both_endings(dataset):
  ended = [e.terminated for e in dataset.episodes]
  assert 0.3 < np.mean(ended) < 0.7
  assert all(e.bootstrap[-1] == (0 if e.terminated else 1) for e in dataset.episodes)


def test_fqe_table_converges_to_exact_value(fitted):
  truth = exact_value(TARGET)
  estimate, _ = fitted
  assert estimate == pytest.approx(truth, rel=0.02)


def test_fqe_treating_truncation_as_termination_is_off(dataset):
  truth = exact_value(TARGET)
  transitions = dataset.transitions()
  ends = np.cumsum([e.length for e in dataset.episodes]) - 1
  wrong = dict(transitions, bootstrap=transitions['bootstrap'].copy())
  wrong['bootstrap'][ends] = 0  # every episode end as an absorbing state
  estimate, _ = fqe.evaluate(target_policy(), dataset, CONFIG,
                             batches=fqe.array_batches(wrong, CONFIG.batch_size))
  assert abs(estimate - truth) / abs(truth) > 0.05


def test_wis_and_wdr_converge_to_exact_value(dataset, fitted):
  truth = exact_value(TARGET)
  ratios = importance.log_ratios(target_policy(), dataset)
  q_hat, v_hat = fqe.episode_predictions(fitted[1], target_policy(), dataset)
  estimates = importance.Estimates(dataset, ratios, DISCOUNT, q_hat, v_hat)
  assert estimates.wis() == pytest.approx(truth, rel=0.04)
  assert estimates.wdr() == pytest.approx(truth, rel=0.02)
  low, high = importance.bootstrap_interval(estimates.wis, len(ratios), resamples=50)
  assert low < estimates.wis() < high


def test_recorded_and_given_behaviour_log_probs_agree(dataset):
  behaviour = policies.CallablePolicy(
      probabilities_fn=lambda obs: np.asarray(obs, np.float64) @ BEHAVIOUR, discrete=True)
  recorded = importance.log_ratios(target_policy(), dataset)
  given = importance.log_ratios(target_policy(), dataset, behaviour)
  np.testing.assert_allclose(np.concatenate(recorded), np.concatenate(given))


def test_behaviour_baseline_is_the_behaviour_value(dataset):
  baseline = float(np.mean(dataset.returns(DISCOUNT)))
  # Truncated at 30 steps: 0.8**30 of the value is missing at most.
  assert baseline == pytest.approx(exact_value(BEHAVIOUR), rel=0.04)
  assert metrics.regret_at_k([baseline, 0.0], [1.0, 0.0]) == 0.0


def test_fqe_interval_from_episode_refits_is_wider_and_covers_the_value():
  """Initial states resampled with Q fixed leave FQE's fitting error out; refitting FQE on
  resampled episodes puts it in."""
  from rlds_suite.ope import evaluation  # pylint: disable=g-import-not-at-top
  small = data_lib.from_steps(record(120, seed=3), name='tabular-small')
  config = fqe.FQEConfig(**{**CONFIG.__dict__, 'num_steps': 80, 'learning_rate': 0.1})
  fixed = evaluation.estimate(target_policy(), small, 'fqe', config=config, resamples=100)
  refit = evaluation.estimate(target_policy(), small, 'fqe', config=config, fqe_refits=8)
  assert fixed.estimate == refit.estimate
  assert refit.high - refit.low > 1.5 * (fixed.high - fixed.low)
  assert refit.low < exact_value(TARGET) < refit.high
  assert 'FQE refit on each of 8 resamples' in evaluation.interval_note('fqe', 8)
  assert 'Q held fixed' in evaluation.interval_note('fqe')


def test_model_based_converges_to_exact_value_and_truncation_is_not_an_end(dataset):
  """The dataset's transitions as the model (ope.model_based): its rollouts of the target policy
  recover the exact value; the same model with every time-limit end made absorbing does not."""
  from rlds_suite.ope import model_based  # pylint: disable=g-import-not-at-top
  truth = exact_value(TARGET)
  config = model_based.ModelConfig(discount=DISCOUNT, rollouts_per_start=4, seed=0)
  assert config.steps() == 31  # 0.8**31 < 1e-3
  assert model_based.evaluate(target_policy(), dataset, config) == pytest.approx(truth, rel=0.02)
  ended = [dataclasses.replace(e, bootstrap=np.concatenate([e.bootstrap[:-1], [0.0]]))
           for e in dataset.episodes]
  wrong = data_lib.OPEData(ended, dataset.name, dataset.discrete_actions)
  assert abs(model_based.evaluate(target_policy(), wrong, config) - truth) / truth > 0.05
