"""Off-policy evaluation: DOPE policies, metrics, Monte Carlo, the evaluate/policies commands on a
built D4RL-format dataset, and bad input."""

import collections
import json
import math
import os
import pathlib
import pickle
import sys

import numpy as np
import pytest

from rlds_suite import cli
from rlds_suite.core import errors
from rlds_suite.ope import data as data_lib
from rlds_suite.ope import evaluation
from rlds_suite.ope import fqe
from rlds_suite.ope import metrics
from rlds_suite.ope import monte_carlo
from rlds_suite.ope import policies
from rlds_suite.ope import registry

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / 'tests' / 'fixtures'))
import write_dope_policies  # pylint: disable=g-import-not-at-top,wrong-import-position


def deep_ope_act(weights, state, noise):
  """deep_ope's load_d4rl_policy_example.Policy.act, one observation at a time."""
  nl = np.tanh if weights['nonlinearity'] == 'tanh' else (lambda x: np.maximum(x, 0))
  out = np.tanh if weights['output_distribution'] == 'tanh_gaussian' else (lambda x: x)
  x = nl(np.dot(weights['fc0/weight'], state) + weights['fc0/bias'])
  x = nl(np.dot(weights['fc1/weight'], x) + weights['fc1/bias'])
  mean = np.dot(weights['last_fc/weight'], x) + weights['last_fc/bias']
  logstd = np.dot(weights['last_fc_log_std/weight'], x) + weights['last_fc_log_std/bias']
  return out(mean + np.exp(logstd) * noise), mean


@pytest.fixture(scope='module')
def dope(tmp_path_factory):
  return write_dope_policies.write_all(str(tmp_path_factory.mktemp('dope')))


@pytest.mark.parametrize('name', ['policy_0.pkl', 'policy_2.pkl'])
def test_d4rl_policy_acts_as_deep_ope_does_batched(dope, name):
  policy = policies.load(dope[name])
  with open(dope[name], 'rb') as f:
    weights = pickle.load(f)
  rng = np.random.default_rng(0)
  obs = rng.standard_normal((5, 17)).astype(np.float32)
  noise = rng.standard_normal((5, 6)).astype(np.float32)
  actions, means = policy.act(obs, noise)
  for i in range(5):
    action, mean = deep_ope_act(weights, obs[i], noise[i])
    np.testing.assert_allclose(actions[i], action, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(means[i], mean, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(policy.mean(obs), np.tanh(means), rtol=1e-5, atol=1e-6)
  first = policy.sample(obs, np.random.default_rng(3))
  np.testing.assert_array_equal(first, policy.sample(obs, np.random.default_rng(3)))
  assert not np.array_equal(first, policy.sample(obs, np.random.default_rng(4)))


@pytest.mark.parametrize('distribution', ['tanh_gaussian', 'gaussian'])
def test_d4rl_log_prob_is_a_density(distribution):
  """One action dimension: the density integrates to 1 (the tanh change of variables included)."""
  weights = write_dope_policies.d4rl_weights(3, 1, seed=1, output_distribution=distribution)
  policy = policies.D4RLPolicy.from_dict(weights)
  obs = np.array([[0.3, -0.2, 0.5]])
  edge = 1 - 1e-7 if distribution == 'tanh_gaussian' else 10.0
  grid = np.linspace(-edge, edge, 400_001)
  density = np.exp(policy.log_prob(np.repeat(obs, len(grid), 0), grid[:, None]))
  assert np.trapezoid(density, grid) == pytest.approx(1.0, abs=2e-3)
  # Matches the density of the samples (a histogram check at the mode).
  samples = policy.sample(np.repeat(obs, 200_000, 0), np.random.default_rng(0))[:, 0]
  centre = float(np.median(samples))
  width = 0.02
  empirical = np.mean(np.abs(samples - centre) < width / 2) / width
  assert empirical == pytest.approx(float(np.exp(policy.log_prob(obs, [[centre]]))[0]), rel=0.05)


@pytest.mark.parametrize('protocol', [2, 4])
def test_d4rl_pickles_of_older_protocols_load(tmp_path, protocol):
  weights = write_dope_policies.d4rl_weights(17, 6, seed=5)
  path = tmp_path / 'policy.pkl'
  path.write_bytes(pickle.dumps(weights, protocol=protocol))
  obs = np.linspace(-1, 1, 17)
  np.testing.assert_allclose(policies.load(str(path)).act(obs, np.zeros(6))[1][0],
                             deep_ope_act(weights, obs, np.zeros(6))[1], rtol=1e-5)


def test_policy_pickle_errors_name_file_and_field(tmp_path):
  weights = write_dope_policies.d4rl_weights(17, 6)
  del weights['fc1/bias']
  path = write_dope_policies.write_pickle(str(tmp_path / 'broken.pkl'), weights)
  with pytest.raises(errors.SchemaError, match=r'broken.pkl: fc1/bias: missing keys'):
    policies.load(path)
  weights = write_dope_policies.d4rl_weights(17, 6)
  weights['fc1/weight'] = weights['fc1/weight'][:, :3]
  path = write_dope_policies.write_pickle(str(tmp_path / 'shapes.pkl'), weights)
  with pytest.raises(errors.SchemaError, match=r'shapes.pkl: fc1/weight: takes 3 inputs'):
    policies.load(path)


def test_policy_pickle_that_runs_code_is_refused(tmp_path):
  path = tmp_path / 'evil.pkl'
  marker = tmp_path / 'ran'
  path.write_bytes(b'cos\nsystem\n(S' + f"'touch {marker}'".encode() + b'\ntR.')
  with pytest.raises(errors.UnsafePickleError):
    policies.load(str(path))
  assert not marker.exists()


def test_policy_against_dataset_specs(dope):
  policy = policies.load(dope['policy_0.pkl'])
  policies.check_compatible(policy, 17, (6,), False, 'ds')
  with pytest.raises(errors.SpecMismatchError, match=r'fc0/weight: .*takes 17 .* ds has 11'):
    policies.check_compatible(policy, 11, (6,), False, 'ds')
  with pytest.raises(errors.SpecMismatchError, match=r'last_fc/weight: .*gives 6 .* ds has 3'):
    policies.check_compatible(policy, 17, (3,), False, 'ds')
  discrete = policies.CallablePolicy(probabilities_fn=lambda o: np.full((len(o), 2), 0.5),
                                     discrete=True, name='dqn')
  with pytest.raises(errors.SpecMismatchError, match=r'dqn: action: a discrete-action policy'):
    policies.check_compatible(discrete, 17, (6,), False, 'ds')


def test_saved_model_policy_and_its_signature(dope):
  policy = policies.load(dope['saved_model'])
  obs = np.ones((4, 17), np.float32)
  assert policy.mean(obs).shape == (4, 6)
  assert np.all(np.abs(policy.sample(obs, np.random.default_rng(0))) <= 1)
  with pytest.raises(errors.SpecMismatchError, match=r'saved_model: __call__: SavedModel signature'):
    policy.mean(np.ones((4, 5), np.float32))
  with pytest.raises(errors.UsageError, match='log_prob'):
    policy.log_prob(obs, policy.mean(obs))


def test_keras_discrete_policy_probabilities_and_log_prob():
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  model = tf.keras.Sequential([tf.keras.layers.Dense(3, kernel_initializer='ones')])
  model.build((None, 2))
  policy = policies.KerasPolicy(model, discrete=True)
  obs = np.array([[1.0, 0.0], [0.0, 2.0]], np.float32)
  probs = policy.probabilities(obs)
  np.testing.assert_allclose(probs.sum(-1), 1.0)
  np.testing.assert_allclose(policy.log_prob(obs, np.array([0, 2])),
                             np.log(probs[[0, 1], [0, 2]]))


def test_metrics_as_dope_defines_them():
  truth = [0.0, 1.0, 2.0, 10.0]
  assert metrics.regret_at_k([5, 1, 2, 0], truth, 1) == pytest.approx(1.0)
  assert metrics.regret_at_k([5, 1, 2, 0], truth, 5) == 0.0
  assert metrics.regret_at_k([0, 1, 3, 2], truth, 1) == pytest.approx(0.8)
  assert metrics.absolute_error([1, 1, 2, 10], truth) == pytest.approx(0.25 / 10)
  scipy_stats = pytest.importorskip('scipy.stats')
  est = [3.0, 1.0, 1.0, 7.0]
  assert metrics.rank_correlation(est, truth) == pytest.approx(
      scipy_stats.spearmanr(est, truth).statistic)


def test_monte_carlo_discounts_rollouts():
  pytest.importorskip('gymnasium')
  always_left = policies.CallablePolicy(fn=lambda obs: np.zeros(len(obs), np.int64),
                                        discrete=True)
  first, _ = monte_carlo.monte_carlo(always_left, 'gymnasium:CartPole-v1', 3, discount=0.0)
  assert first == 1.0  # CartPole pays 1 per step: only the first reward counts.
  mean, _ = monte_carlo.monte_carlo(always_left, 'gymnasium:CartPole-v1', 3, discount=1.0)
  assert 5 <= mean <= 15  # pushing left always falls within a few steps


@pytest.fixture(scope='module')
def halfcheetah(tmp_path_factory):
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top
  data_dir = tmp_path_factory.mktemp('d4rl_data')
  builder = datasets.build('d4rl/halfcheetah-medium-v2', data_dir=str(data_dir),
                           manual_dir=str(REPO / 'builders' / 'd4rl' / 'dummy_data'))
  return builder.data_dir


def test_dataset_transitions_follow_rlds_flags(halfcheetah):
  data = data_lib.load(halfcheetah)
  assert data.has_behaviour_log_probs  # D4RL's infos/action_log_probs
  for e in data.episodes:
    assert e.bootstrap[:-1].all()
    assert e.bootstrap[-1] == (0.0 if e.terminated else 1.0)
  assert {e.terminated for e in data.episodes} == {True, False}


@pytest.mark.parametrize('estimator', ['fqe', 'wis', 'dr', 'mb'])
def test_evaluate_command_end_to_end(halfcheetah, dope, tmp_path, capsys, estimator):
  truth = tmp_path / 'truth.json'
  truth.write_text(json.dumps([
      {'policy_path': 'policy_0.pkl', 'task.task_names': ['halfcheetah-medium-v0'],
       'agent_name': 'SAC', 'return_mean': 1.0, 'return_std:': 0.1},
      {'policy_path': 'policy_1.pkl', 'task.task_names': ['halfcheetah-medium-v0'],
       'agent_name': 'SAC', 'return_mean': 3.0, 'return_std:': 0.1}]))
  plot = tmp_path / 'scatter.png'
  policy_dir = os.path.dirname(dope['policy_0.pkl'])
  code = cli.main(['evaluate', halfcheetah, '--policies', 'policy_0.pkl', 'policy_1.pkl',
                   'policy_2.pkl', '--policy_dir', policy_dir, '--estimator', estimator,
                   '--ground_truth', str(truth), '--steps', '20', '--hidden', '8',
                   '--batch_size', '4', '--bootstraps', '20', '--plot', str(plot)] +
                  # The stream's start costs seconds: the fqe case reads it (through its cache),
                  # dr and mb read memory.
                  (['--in_memory'] if estimator in ('dr', 'mb') else
                   ['--cache_dir', str(tmp_path / 'cache')]))
  out = capsys.readouterr().out
  assert code == 0, out
  lines = out.splitlines()
  assert lines[0].split()[:2] == ['policy', estimator]
  rows = {line.split()[0]: line for line in lines[1:5]}
  assert set(rows) == {'policy_0.pkl', 'policy_1.pkl', 'policy_2.pkl', '(behaviour:'}
  assert rows['policy_0.pkl'].split()[-1] == '1.000' and rows['policy_2.pkl'].count('[') == 1
  assert any(line.startswith('rank_correlation: ') for line in lines)
  assert any(line.startswith('regret@1: ') for line in lines)
  assert plot.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def test_fqe_from_the_stream_reads_a_summary_not_every_episode(halfcheetah, dope, monkeypatch,
                                                              tmp_path):
  full = data_lib.load(halfcheetah)
  summary = data_lib.summarize(halfcheetah, 0.99)
  np.testing.assert_array_equal(summary.initial_observations(), full.initial_observations())
  np.testing.assert_allclose(summary.returns(0.99), full.returns(0.99))
  specs = lambda d: (d.num_episodes, d.observation_size, d.action_shape, d.discrete_actions,
                     d.has_behaviour_log_probs)
  assert specs(summary) == specs(full)
  with pytest.raises(ValueError, match='discount'):
    summary.returns(0.9)
  monkeypatch.setattr(data_lib, 'load',
                      lambda *a, **k: pytest.fail('FQE from the stream loaded every episode'))
  report = evaluation.evaluate(halfcheetah, [dope['policy_0.pkl']], estimator='fqe',
                               config=fqe.FQEConfig(hidden=(8,), batch_size=4, num_steps=5),
                               cache_dir=str(tmp_path / 'cache'), resamples=10)
  assert report.baseline.estimate == pytest.approx(float(np.mean(full.returns(0.99))))
  assert math.isfinite(report.rows[0].estimate)


def test_fqe_stream_and_memory_batches_agree_on_content(halfcheetah):
  data = data_lib.load(halfcheetah)
  memory = data.transitions()
  batch = next(fqe.stream_batches(halfcheetah, batch_size=len(memory['reward']), seed=0,
                                  shuffle=None))
  order = np.lexsort(memory['observation'].T)
  got = np.lexsort(batch['observation'].T)
  for key in memory:
    np.testing.assert_allclose(np.asarray(batch[key])[got], memory[key][order], rtol=1e-6)


def test_fqe_stream_is_parsed_once_and_later_passes_come_from_the_store(halfcheetah, monkeypatch,
                                                                          tmp_path):
  from rlds_suite import streams  # pylint: disable=g-import-not-at-top
  delivered = []
  as_numpy = streams.as_numpy

  def counting(stream):
    for batch in as_numpy(stream):
      delivered.append(len(batch['reward']))
      yield batch

  monkeypatch.setattr(streams, 'as_numpy', counting)
  memory = data_lib.load(halfcheetah).transitions()
  size = len(memory['reward'])
  assert size == 14  # batches of 7: two a pass
  batches = fqe.stream_batches(halfcheetah, batch_size=7, seed=0, prefetch=0,
                               store_dir=str(tmp_path))
  drawn = [next(batches) for _ in range(6)]  # three passes
  assert sum(delivered) == size  # the stream was read once
  assert len(os.listdir(tmp_path)) == 1  # the store
  ids = collections.Counter(np.concatenate([b['observation'] for b in drawn])[:, 0].tolist())
  assert ids == {v: 3 * n for v, n in collections.Counter(memory['observation'][:, 0]
                                                           .tolist()).items()}
  for b in drawn:
    assert set(b) == set(memory) and len(b['reward']) == 7
  batches.close()
  assert not os.listdir(tmp_path)  # removed with the iterator


def test_fqe_checkpoints_resume(halfcheetah, dope, tmp_path):
  data = data_lib.load(halfcheetah)
  policy = policies.load(dope['policy_0.pkl'])
  config = fqe.FQEConfig(hidden=(8,), batch_size=4, num_steps=5)
  first = fqe.FQE(17, 6, False, config)
  assert len(first.fit(policy, fqe.array_batches(data.transitions(), 4),
                       checkpoint_dir=str(tmp_path))) == 5
  again = fqe.FQE(17, 6, False, config)
  losses = again.fit(policy, fqe.array_batches(data.transitions(), 4), num_steps=8,
                     checkpoint_dir=str(tmp_path))
  assert len(losses) == 3 and int(again.steps) == 8
  obs = data.initial_observations()
  actions = policy.mean(obs)
  restored = fqe.FQE(17, 6, False, config)
  restored.fit(policy, iter(()), num_steps=8, checkpoint_dir=str(tmp_path))
  np.testing.assert_allclose(restored.q_values(obs, actions), again.q_values(obs, actions))


def test_importance_sampling_without_log_probs_is_refused(halfcheetah, dope):
  data = data_lib.load(halfcheetah)
  for e in data.episodes:
    e.behaviour_log_probs = None
  with pytest.raises(errors.SchemaError, match=r"infos/action_log_probs: importance sampling"):
    evaluation.evaluate(halfcheetah, [dope['policy_0.pkl']], estimator='wis', data=data)


def test_discrete_policy_on_continuous_dataset_from_the_command_line(halfcheetah, tmp_path,
                                                                      capsys):
  with pytest.raises(errors.SchemaError):
    policies.load(str(tmp_path / 'missing.pkl'))
  code = cli.main(['evaluate', halfcheetah, '--policies', str(tmp_path / 'missing.pkl')])
  assert code == 2
  assert 'missing.pkl: no such policy file' in capsys.readouterr().err


def test_policies_list_by_task(capsys):
  assert cli.main(['policies', 'list', '--task', 'halfcheetah-medium-v0']) == 0
  out = capsys.readouterr().out
  assert 'halfcheetah/halfcheetah_online_10.pkl' in out and '12695.70' in out
  assert '11 policies' in out
  entries = registry.entries('halfcheetah-random-v0', ['d4rl'])
  assert sorted(e.return_mean for e in entries)[0] == pytest.approx(-309.2417932614121)
  assert len(registry.entries(None, ['d4rl'])) == 154
  assert all(not math.isnan(e.return_std) for e in entries)


def test_rlunplugged_registry_is_deep_opes_whole_file(capsys):
  entries = registry.entries(None, ['rlunplugged'])
  assert len(entries) == 861 and len({e.policy_path for e in entries}) == 861
  assert {e.agent for e in entries} == {'D4PG', 'RABM', 'RCRR exp', 'BC'}
  assert len({t for e in entries for t in e.tasks}) == 9
  first, last = entries[0], entries[-1]
  assert (first.policy_path, first.return_mean) == ('13830900_1/step_000000025001', 29.358801241)
  assert (last.policy_path, last.return_std) == ('14022681_27/step_000005000001', 321.960982419)
  assert cli.main(['policies', 'list', '--task', 'humanoid_run', '--registry', 'rlunplugged']) == 0
  out = capsys.readouterr().out
  rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:-1]}
  assert rows['14022681_8/step_000002850001'] == ['BC', '372.80', '163.05', 'humanoid_run']
  assert len(rows) == 93 and out.splitlines()[-1].startswith('93 policies')
  assert 'partial' not in out
