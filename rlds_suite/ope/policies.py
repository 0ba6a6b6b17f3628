"""Target policies for off-policy evaluation, all batched over observations (numpy in, numpy out).

A policy has `sample(obs, rng)` (a stochastic action per row), `mean(obs)` (its deterministic
action) and, where it can, `log_prob(obs, actions)` (needed by importance sampling). Discrete
policies also have `probabilities(obs)` ([N, num_actions]), which FQE uses for an exact expectation.

Kinds: DOPE's D4RL pickles (`D4RLPolicy`, read through the restricted unpickler exactly as
deep_ope's load_d4rl_policy_example.py reads them), DOPE's RL Unplugged SavedModels
(`SavedModelPolicy`), Keras models (`KerasPolicy`) and any Python callable (`CallablePolicy`).
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any, Callable, Mapping, Optional, Protocol, Union

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import safe_pickle

# The keys deep_ope's load_d4rl_policy_example.py reads from a policy pickle.
D4RL_WEIGHTS = ('fc0/weight', 'fc0/bias', 'fc1/weight', 'fc1/bias', 'last_fc/weight',
                'last_fc/bias', 'last_fc_log_std/weight', 'last_fc_log_std/bias')
D4RL_OPTIONS = ('nonlinearity', 'output_distribution')
# How far inside (-1, 1) a tanh-squashed action is clipped before its atanh (log_prob).
_TANH_EDGE = 1e-6


class Policy(Protocol):
  """What the estimators call. `discrete`: actions are integer indices (then `num_actions`)."""
  name: str
  discrete: bool

  def sample(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray: ...

  def mean(self, obs: np.ndarray) -> np.ndarray: ...

  def log_prob(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray: ...


def _no_log_prob(name: str) -> errors.UsageError:
  return errors.UsageError('this policy gives no log_prob of an action; importance sampling '
                           'needs one', path=name, field='log_prob')


@dataclasses.dataclass
class D4RLPolicy:
  """A DOPE D4RL policy: a 2-hidden-layer MLP giving a (tanh-)Gaussian over actions."""
  weights: Mapping[str, np.ndarray]
  nonlinearity: str = 'relu'
  output_distribution: str = 'tanh_gaussian'
  name: str = 'd4rl_policy'
  discrete: bool = False

  @classmethod
  def load(cls, path: Union[str, os.PathLike]) -> 'D4RLPolicy':
    """Reads a DOPE policy pickle (a dict of arrays and two strings) without running its code."""
    path = os.fspath(path)
    try:
      with open(path, 'rb') as f:
        content = safe_pickle.load(f, source=path)
    except OSError as e:
      raise errors.SchemaError(f'cannot read policy: {e.strerror}', path=path) from None
    return cls.from_dict(content, name=path)

  @classmethod
  def from_dict(cls, content: Any, name: str = 'd4rl_policy') -> 'D4RLPolicy':
    if not isinstance(content, Mapping):
      raise errors.SchemaError(f'a DOPE policy is a dict of weights, not {type(content).__name__}',
                               path=name)
    missing = [k for k in D4RL_WEIGHTS + D4RL_OPTIONS if k not in content]
    if missing:
      raise errors.SchemaError(f'missing keys {missing} (deep_ope D4RL policy)', path=name,
                               field=missing[0])
    weights = {k: np.asarray(content[k], dtype=np.float64) for k in D4RL_WEIGHTS}
    layers = [('fc0', None), ('fc1', 'fc0'), ('last_fc', 'fc1'), ('last_fc_log_std', 'fc1')]
    for layer, previous in layers:
      w, b = weights[f'{layer}/weight'], weights[f'{layer}/bias']
      if w.ndim != 2 or b.shape != (w.shape[0],):
        raise errors.SchemaError(f'weight {w.shape} and bias {b.shape} are not a layer (out, in)',
                                 path=name, field=f'{layer}/weight')
      if previous is not None and w.shape[1] != weights[f'{previous}/weight'].shape[0]:
        raise errors.SchemaError(f'takes {w.shape[1]} inputs, {previous} gives '
                                 f'{weights[f"{previous}/weight"].shape[0]}', path=name,
                                 field=f'{layer}/weight')
    return cls(weights, nonlinearity=str(content['nonlinearity']),
               output_distribution=str(content['output_distribution']), name=name)

  @property
  def observation_size(self) -> int:
    return self.weights['fc0/weight'].shape[1]

  @property
  def action_size(self) -> int:
    return self.weights['last_fc/weight'].shape[0]

  @property
  def squashed(self) -> bool:
    return self.output_distribution == 'tanh_gaussian'

  def _gaussian(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(mean, log_std) of the pre-squash Gaussian, [N, action_size] each."""
    w = self.weights
    act = np.tanh if self.nonlinearity == 'tanh' else (lambda x: np.maximum(x, 0))
    x = np.asarray(obs, dtype=np.float64).reshape(-1, self.observation_size)
    x = act(x @ w['fc0/weight'].T + w['fc0/bias'])
    x = act(x @ w['fc1/weight'].T + w['fc1/bias'])
    return (x @ w['last_fc/weight'].T + w['last_fc/bias'],
            x @ w['last_fc_log_std/weight'].T + w['last_fc_log_std/bias'])

  def _out(self, x: np.ndarray) -> np.ndarray:
    return np.tanh(x) if self.squashed else x

  def act(self, obs: np.ndarray, noise: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """deep_ope's Policy.act, batched: (out(mean + exp(log_std) * noise), mean)."""
    mean, log_std = self._gaussian(obs)
    return self._out(mean + np.exp(log_std) * noise), mean

  def sample(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    mean, log_std = self._gaussian(obs)
    return self._out(mean + np.exp(log_std) * rng.standard_normal(mean.shape)).astype(np.float32)

  def mean(self, obs: np.ndarray) -> np.ndarray:
    return self._out(self._gaussian(obs)[0]).astype(np.float32)

  def log_prob(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    """log density of `actions`; for tanh_gaussian with the change of variables a = tanh(u)."""
    mean, log_std = self._gaussian(obs)
    a = np.asarray(actions, dtype=np.float64).reshape(mean.shape)
    if self.squashed:
      a = np.clip(a, -1 + _TANH_EDGE, 1 - _TANH_EDGE)
      u = np.arctanh(a)
      jacobian = np.sum(np.log1p(-a**2), axis=-1)
    else:
      u, jacobian = a, 0.0
    z = (u - mean) / np.exp(log_std)
    gaussian = np.sum(-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi), axis=-1)
    return gaussian - jacobian


@dataclasses.dataclass
class CallablePolicy:
  """Any `fn(obs_batch) -> actions` (deterministic unless `sampler` is given); optional
  `log_prob_fn(obs, actions)`, and for discrete actions `probabilities_fn(obs) -> [N, A]`."""
  fn: Optional[Callable[[np.ndarray], np.ndarray]] = None
  log_prob_fn: Optional[Callable[[np.ndarray, np.ndarray], np.ndarray]] = None
  probabilities_fn: Optional[Callable[[np.ndarray], np.ndarray]] = None
  sampler: Optional[Callable[[np.ndarray, np.random.Generator], np.ndarray]] = None
  discrete: bool = False
  name: str = 'callable'

  def __post_init__(self):
    if self.fn is None and self.probabilities_fn is None:
      raise errors.UsageError('a policy needs fn or probabilities_fn', path=self.name)

  def probabilities(self, obs: np.ndarray) -> np.ndarray:
    if self.probabilities_fn is None:
      raise _no_log_prob(self.name)
    return np.asarray(self.probabilities_fn(obs), dtype=np.float64)

  def sample(self, obs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    if self.sampler is not None:
      return np.asarray(self.sampler(obs, rng))
    if self.probabilities_fn is not None:
      probs = self.probabilities(obs)
      return (rng.random((len(probs), 1)) > np.cumsum(probs, axis=-1)).sum(-1).clip(
          0, probs.shape[-1] - 1)
    return self.mean(obs)

  def mean(self, obs: np.ndarray) -> np.ndarray:
    if self.fn is None:
      return np.argmax(self.probabilities(obs), axis=-1)
    return np.asarray(self.fn(obs))

  def log_prob(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    if self.log_prob_fn is not None:
      return np.asarray(self.log_prob_fn(obs, actions), dtype=np.float64)
    if self.probabilities_fn is not None:
      probs = self.probabilities(obs)
      picked = probs[np.arange(len(probs)), np.asarray(actions, dtype=np.int64).reshape(-1)]
      return np.log(np.maximum(picked, 1e-300))
    raise _no_log_prob(self.name)


def KerasPolicy(model: Any, *, discrete: bool = False, name: str = 'keras') -> CallablePolicy:
  """A Keras model as a policy: with `discrete`, its outputs are logits over actions (a softmax
  policy with log_prob); otherwise its output is the (deterministic) action."""
  if not discrete:
    return CallablePolicy(fn=lambda obs: np.asarray(model(np.asarray(obs, np.float32))),
                          name=name)

  def probabilities(obs: np.ndarray) -> np.ndarray:
    logits = np.asarray(model(np.asarray(obs, np.float32)), dtype=np.float64)
    logits = logits - logits.max(axis=-1, keepdims=True)
    exp = np.exp(logits)
    return exp / exp.sum(axis=-1, keepdims=True)

  return CallablePolicy(probabilities_fn=probabilities, discrete=True, name=name)


def SavedModelPolicy(path: Union[str, os.PathLike]) -> CallablePolicy:
  """A DOPE RL Unplugged policy: a SavedModel called on a batched observation, as deep_ope's
  load_rlunplugged_policy_example.py calls it (with `((),)` as the state of recurrent-API ones)."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  path = os.fspath(path)
  try:
    model = tf.saved_model.load(path)
  except (OSError, ValueError, tf.errors.OpError) as e:
    raise errors.SchemaError(f'not a SavedModel: {str(e).splitlines()[0]}', path=path) from None
  if not callable(model):
    raise errors.SchemaError('SavedModel has no __call__ (a DOPE policy is called on an '
                             'observation)', path=path, field='__call__')
  recurrent = hasattr(model, 'initial_state')

  def act(obs: Any) -> np.ndarray:
    try:
      out = model(obs, ((),))[0] if recurrent else model(obs)
    except (TypeError, ValueError) as e:
      raise errors.SpecMismatchError(
          f'SavedModel signature does not take these observations: {str(e).splitlines()[0]}',
          path=path, field='__call__') from None
    return np.asarray(out)

  return CallablePolicy(fn=act, name=path)


def load(spec: Union[str, os.PathLike, Policy, Callable[..., Any]]) -> Policy:
  """A policy from a .pkl (DOPE D4RL), a SavedModel directory, a Policy or a callable."""
  if hasattr(spec, 'sample') and hasattr(spec, 'mean'):
    return spec  # type: ignore[return-value]
  if callable(spec):
    return CallablePolicy(fn=spec, name=getattr(spec, '__qualname__', 'callable'))
  path = os.fspath(spec)
  if os.path.isdir(path):
    return SavedModelPolicy(path)
  if not os.path.exists(path):
    raise errors.SchemaError('no such policy file or SavedModel directory', path=path)
  return D4RLPolicy.load(path)


def check_compatible(policy: Policy, observation_size: Optional[int], action_shape: tuple,
                     discrete_actions: bool, dataset: str = '') -> None:
  """Refuses a policy whose shapes or action kind disagree with a dataset's specs."""
  name = getattr(policy, 'name', 'policy')
  if policy.discrete and not discrete_actions:
    raise errors.SpecMismatchError(f'a discrete-action policy on the continuous-action dataset '
                                   f'{dataset}', path=name, field='action')
  if not policy.discrete and discrete_actions:
    raise errors.SpecMismatchError(f'a continuous-action policy on the discrete-action dataset '
                                   f'{dataset}', path=name, field='action')
  if isinstance(policy, D4RLPolicy):
    if observation_size is not None and policy.observation_size != observation_size:
      raise errors.SpecMismatchError(
          f'fc0/weight takes {policy.observation_size} observation values; {dataset} has '
          f'{observation_size}', path=name, field='fc0/weight')
    size = int(np.prod(action_shape)) if action_shape else 1
    if policy.action_size != size:
      raise errors.SpecMismatchError(f'last_fc/weight gives {policy.action_size} action values; '
                                     f'{dataset} has {size}', path=name, field='last_fc/weight')
