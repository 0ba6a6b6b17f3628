"""Offline model selection: several policies estimated on one dataset by one estimator, with
bootstrapped intervals, the behaviour policy's average return as the baseline, and DOPE's metrics
against ground truth when it is known."""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from rlds_suite.core import errors
from rlds_suite.ope import data as data_lib
from rlds_suite.ope import fqe as fqe_lib
from rlds_suite.ope import importance
from rlds_suite.ope import metrics
from rlds_suite.ope import model_based
from rlds_suite.ope import policies as policies_lib

ESTIMATORS = ('fqe', 'wis', 'dr', 'mb')


@dataclasses.dataclass
class Row:
  policy: str
  estimate: float
  low: float
  high: float
  truth: Optional[float] = None


@dataclasses.dataclass
class Report:
  estimator: str
  rows: list[Row]
  baseline: Row  # the behaviour policy's average discounted return in the dataset
  metrics: dict[str, float] = dataclasses.field(default_factory=dict)
  interval_note: str = ''  # what the intervals resample (and what they leave out)

  def table(self) -> str:
    """The estimates with intervals, the baseline, and the metrics, as printed text."""
    width = max([len(r.policy) for r in self.rows + [self.baseline]] + [6])
    lines = [f'{"policy":<{width}}  {self.estimator:>10}  {"95% interval":>22}  {"truth":>10}']
    for r in self.rows + [self.baseline]:
      truth = '' if r.truth is None else f'{r.truth:10.3f}'
      lines.append(f'{r.policy:<{width}}  {r.estimate:10.3f}  '
                   f'[{r.low:9.3f}, {r.high:9.3f}]  {truth:>10}')
    if self.interval_note:
      lines.append(f'intervals: {self.interval_note}')
    for name, value in self.metrics.items():
      lines.append(f'{name}: {value:.3f}')
    return '\n'.join(lines)


def _interval(fn, n: int, resamples: int, seed: int) -> tuple[float, float]:
  return importance.bootstrap_interval(fn, n, resamples=resamples, seed=seed)


def interval_note(estimator: str, fqe_refits: int = 0) -> str:
  """What `estimate`'s 95% intervals resample, in words, for the printed table."""
  if estimator == 'wis':
    return 'episodes resampled'
  if estimator == 'mb':
    return ('initial states resampled with their rollouts, the model (the dataset\'s transitions) '
            'held fixed')
  if estimator == 'dr':
    return 'episodes resampled, the FQE model held fixed (its fitting error is not in them)'
  if fqe_refits:
    return f'FQE refit on each of {fqe_refits} resamples of the episodes (from memory)'
  return ('initial states resampled, Q held fixed: FQE\'s fitting error is not in them '
          '(--fqe_refits N refits FQE on N resamples of the episodes)')


def estimate(policy: policies_lib.Policy, data: data_lib.OPEData, estimator: str, *,
             config: fqe_lib.FQEConfig, behaviour: Optional[policies_lib.Policy] = None,
             batches: Any = None, resamples: int = 200, progress: bool = False,
             checkpoint_dir: Optional[str] = None, fqe_refits: int = 0) -> Row:
  """One policy's estimate and bootstrapped 95% interval (see `interval_note`). FQE's interval
  refits FQE on `fqe_refits` resamples of the episodes when > 0, else resamples the episodes'
  initial states with Q held fixed; WIS's and DR's resample whole episodes (DR's model fixed)."""
  name = getattr(policy, 'name', 'policy')
  n = data.num_episodes
  if estimator == 'wis':
    est = importance.Estimates(data, importance.log_ratios(policy, data, behaviour),
                               config.discount)
    return Row(name, est.wis(), *_interval(est.wis, n, resamples, config.seed))
  if estimator == 'mb':
    values = model_based.start_values(
        policy, data, model_based.ModelConfig(discount=config.discount, seed=config.seed))
    return Row(name, float(np.mean(values)),
               *_interval(lambda rows: float(np.mean(values[rows])), n, resamples, config.seed))
  if estimator not in ('fqe', 'dr'):
    raise errors.UsageError(f'unknown estimator {estimator!r}; one of {ESTIMATORS}',
                            field='estimator')
  ratios = importance.log_ratios(policy, data, behaviour) if estimator == 'dr' else None
  value, model = fqe_lib.evaluate(policy, data, config, batches=batches, progress=progress,
                                  checkpoint_dir=checkpoint_dir)
  if estimator == 'fqe' and fqe_refits:
    def refit(rows: np.ndarray) -> float:
      sample = data_lib.OPEData([data.episodes[i] for i in rows], data.name, data.discrete_actions)
      return fqe_lib.evaluate(policy, sample, config)[0]
    return Row(name, value, *_interval(refit, n, fqe_refits, config.seed))
  if estimator == 'fqe':
    initial = model.state_values(policy, data.initial_observations(), config.seed)
    return Row(name, value,
               *_interval(lambda rows: float(np.mean(initial[rows])), n, resamples, config.seed))
  q_hat, v_hat = fqe_lib.episode_predictions(model, policy, data, config.seed)
  est = importance.Estimates(data, ratios, config.discount, q_hat, v_hat)
  return Row(name, est.wdr(), *_interval(est.wdr, n, resamples, config.seed))


def baseline(data: data_lib.OPEData, discount: float, resamples: int = 200,
             seed: int = 0) -> Row:
  returns = data.returns(discount)
  return Row('(behaviour: dataset average)', float(np.mean(returns)),
             *_interval(lambda rows: float(np.mean(returns[rows])), len(returns), resamples, seed))


def evaluate(dataset: Any, policies: Sequence[Any], *, estimator: str = 'fqe',
             config: fqe_lib.FQEConfig = fqe_lib.FQEConfig(),
             behaviour: Any = None, ground_truth: Optional[Mapping[str, float]] = None,
             resamples: int = 200, use_stream: bool = True, progress: bool = False,
             log_prob_field: Optional[str] = None, names: Optional[Sequence[str]] = None,
             checkpoint_dir: Optional[str] = None, cache_dir: Optional[str] = None,
             store_dir: Optional[str] = None, fqe_refits: int = 0,
             data: Optional[data_lib.OPEData | data_lib.OPESummary] = None) -> Report:
  """Estimates each of `policies` (paths or Policy objects) on `dataset` (a directory or
  registered name). FQE reads shuffled transitions from rlds_suite.streams when `use_stream`
  (else from memory): its first pass through the stream's decoded-step cache in `cache_dir` when
  given, later passes from a transition store under `store_dir` (fqe.stream_batches);
  `ground_truth` maps a policy's name to its true value; `fqe_refits`: see `estimate`."""
  if estimator not in ESTIMATORS:
    raise errors.UsageError(f'unknown estimator {estimator!r}; one of {ESTIMATORS}',
                            field='estimator')
  if data is None:
    # FQE fed by the stream needs only each episode's first observation and return from memory;
    # the other estimators (and FQE's refits) read whole episodes.
    lean = use_stream and estimator == 'fqe' and not fqe_refits
    data = (data_lib.summarize(dataset, config.discount, log_prob_field=log_prob_field) if lean
            else data_lib.load(dataset, log_prob_field=log_prob_field))
  loaded = [policies_lib.load(p) for p in policies]
  names = list(names) if names else [getattr(p, 'name', str(i)) for i, p in enumerate(loaded)]
  behaviour_policy = None if behaviour is None else policies_lib.load(behaviour)
  if estimator in ('wis', 'dr') and behaviour_policy is None:
    data_lib.require_log_probs(data, (log_prob_field,) if log_prob_field else
                               data_lib.LOG_PROB_FIELDS)
  for policy in loaded + ([behaviour_policy] if behaviour_policy else []):
    policies_lib.check_compatible(policy, data.observation_size, data.action_shape,
                                  data.discrete_actions, data.name)
  rows = []
  batches = None  # one shuffled stream serves every policy's FQE in turn
  if use_stream and estimator in ('fqe', 'dr'):
    batches = fqe_lib.stream_batches(dataset, config.batch_size, seed=config.seed,
                                     cache_dir=cache_dir, store_dir=store_dir)
  for i, (name, policy) in enumerate(zip(names, loaded)):
    row = estimate(policy, data, estimator, config=config, behaviour=behaviour_policy,
                   batches=batches, resamples=resamples, progress=progress,
                   checkpoint_dir=None if checkpoint_dir is None else
                   os.path.join(checkpoint_dir, f'policy_{i}'), fqe_refits=fqe_refits)
    row.policy = name
    row.truth = (ground_truth or {}).get(name)
    rows.append(row)
  report = Report(estimator, rows, baseline(data, config.discount, resamples, config.seed),
                  interval_note=interval_note(estimator, fqe_refits))
  known = [r for r in rows if r.truth is not None]
  if len(known) >= 2:
    report.metrics = metrics.summary([r.estimate for r in known], [r.truth for r in known])
  return report


def plot(report: Report, path: str, title: str = '') -> None:
  """Estimate (with its interval) against the true value per policy, and the line y = x."""
  import matplotlib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  matplotlib.use('Agg')
  import matplotlib.pyplot as plt  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  known = [r for r in report.rows if r.truth is not None]
  if not known:
    raise errors.UsageError('no policy has a ground truth to plot against', field='ground_truth')
  truth = np.array([r.truth for r in known])
  est = np.array([r.estimate for r in known])
  errors_low = np.array([0 if math.isnan(r.low) else r.estimate - r.low for r in known])
  errors_high = np.array([0 if math.isnan(r.high) else r.high - r.estimate for r in known])
  figure, axis = plt.subplots(figsize=(6, 5.5))
  axis.errorbar(truth, est, yerr=[errors_low, errors_high], fmt='o', capsize=3,
                label=f'{report.estimator} (95% interval)')
  for r in known:
    axis.annotate(os.path.basename(r.policy), (r.truth, r.estimate), fontsize=7,
                  xytext=(4, 4), textcoords='offset points')
  low = min(truth.min(), est.min())
  high = max(truth.max(), est.max())
  axis.plot([low, high], [low, high], 'k--', linewidth=1, label='estimate = truth')
  axis.axhline(report.baseline.estimate, color='gray', linestyle=':', linewidth=1,
               label='behaviour average')
  axis.margins(0.1)  # room for the labels of the extreme points
  axis.set_xlabel('true value')
  axis.set_ylabel('estimated value')
  summary = ', '.join(f'{k} {v:.2f}' for k, v in report.metrics.items())
  axis.set_title((title + '\n' if title else '') + summary, fontsize=9)
  axis.legend(fontsize=8)
  figure.tight_layout()
  figure.savefig(path, dpi=110)
  plt.close(figure)
