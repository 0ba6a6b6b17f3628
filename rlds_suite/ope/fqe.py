"""Fitted Q evaluation (Le et al. 2019; google-research policy_eval, DOPE) in TensorFlow.

Q(s, a) is regressed on r + discount * bootstrap * E_{a' ~ pi} Q_target(s', a'), where
`bootstrap` comes from the RLDS flags (rlds_suite.ope.data.bootstrap_mask: 0 after a termination,
1 after a truncation) and Q_target is a copy of Q refreshed every `target_update_period` updates.
The policy's value is E_{a ~ pi} Q(s_0, a) averaged over the dataset's first steps.

Batches are dicts of numpy arrays (observation, action, reward, bootstrap, next_observation):
`array_batches` draws them from transitions in memory, `stream_batches` from rlds_suite.streams
(its first pass; later passes from a TransitionStore on disk).
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

import numpy as np
import tensorflow as tf

from rlds_suite.core import fields
from rlds_suite.core import read_ahead
from rlds_suite.ope import data as data_lib
from rlds_suite.ope import policies as policies_lib
from rlds_suite.ope import transition_store


@dataclasses.dataclass
class FQEConfig:
  """`hidden=()` makes Q linear in its inputs (a table on one-hot observations)."""
  discount: float = 0.99
  hidden: Sequence[int] = (256, 256)
  learning_rate: float = 3e-4
  batch_size: int = 256
  num_steps: int = 10_000
  target_update_period: int = 100
  action_samples: int = 1  # sampled next actions per transition (continuous policies)
  seed: int = 0


def _mlp(hidden: Sequence[int], outputs: int, seed: int) -> tf.keras.Sequential:
  init = lambda i: tf.keras.initializers.GlorotUniform(seed=seed + i)
  layers = [tf.keras.layers.Dense(h, activation='relu', kernel_initializer=init(i))
            for i, h in enumerate(hidden)]
  last = (tf.keras.initializers.Zeros() if not hidden else init(len(hidden)))
  return tf.keras.Sequential(layers + [tf.keras.layers.Dense(outputs, kernel_initializer=last)])


class FQE:
  """A Q-function of one target policy on one dataset's observation and action specs."""

  def __init__(self, observation_size: int, action_size: int, discrete: bool,
               config: FQEConfig = FQEConfig()):
    self.config = config
    self.discrete = discrete
    self.action_size = action_size  # number of actions when discrete
    outputs = action_size if discrete else 1
    inputs = observation_size + (0 if discrete else action_size)
    tf.keras.utils.set_random_seed(config.seed)
    self.q = _mlp(config.hidden, outputs, config.seed)
    self.target = _mlp(config.hidden, outputs, config.seed)
    self.q.build((None, inputs))
    self.target.build((None, inputs))
    self.target.set_weights(self.q.get_weights())
    self.optimizer = tf.keras.optimizers.Adam(config.learning_rate)
    self.steps = tf.Variable(0, dtype=tf.int64, trainable=False)
    self._update = tf.function(self._update_step, reduce_retracing=True)

  def _q_all(self, net: tf.keras.Model, obs: tf.Tensor, actions: Optional[tf.Tensor]) -> tf.Tensor:
    obs = tf.reshape(tf.cast(obs, tf.float32), [tf.shape(obs)[0], -1])
    if self.discrete:
      return net(obs)
    actions = tf.reshape(tf.cast(actions, tf.float32), [tf.shape(obs)[0], -1])
    return net(tf.concat([obs, actions], -1))[:, 0]

  def _update_step(self, obs, action, reward, bootstrap, next_obs, next_policy):
    """next_policy: [N, A] probabilities (discrete) or [K, N, action_size] sampled actions."""
    gamma = tf.constant(self.config.discount, tf.float32)
    if self.discrete:
      next_v = tf.reduce_sum(next_policy * self._q_all(self.target, next_obs, None), -1)
    else:
      k = tf.shape(next_policy)[0]
      tiled = tf.tile(next_obs[None], tf.concat([[k], tf.ones_like(tf.shape(next_obs))], 0))
      flat_obs = tf.reshape(tiled, tf.concat([[-1], tf.shape(next_obs)[1:]], 0))
      flat_act = tf.reshape(next_policy, [-1, tf.shape(next_policy)[-1]])
      next_v = tf.reduce_mean(tf.reshape(self._q_all(self.target, flat_obs, flat_act), [k, -1]), 0)
    y = tf.stop_gradient(tf.cast(reward, tf.float32) +
                         gamma * tf.cast(bootstrap, tf.float32) * next_v)
    with tf.GradientTape() as tape:
      if self.discrete:
        q = tf.gather(self._q_all(self.q, obs, None), tf.cast(tf.reshape(action, [-1]), tf.int32),
                      batch_dims=1)
      else:
        q = self._q_all(self.q, obs, action)
      loss = tf.reduce_mean(tf.square(q - y))
    grads = tape.gradient(loss, self.q.trainable_variables)
    self.optimizer.apply_gradients(zip(grads, self.q.trainable_variables))
    self.steps.assign_add(1)
    if self.steps % self.config.target_update_period == 0:
      for t, s in zip(self.target.variables, self.q.variables):
        t.assign(s)
    return loss

  def policy_input(self, policy: policies_lib.Policy, obs: np.ndarray,
                   rng: np.random.Generator) -> np.ndarray:
    """What the update reads of the policy at `obs`: probabilities, or sampled actions [K, N, A]."""
    if self.discrete:
      if hasattr(policy, 'probabilities') and getattr(policy, 'probabilities_fn', True):
        return np.asarray(policy.probabilities(obs), np.float32)
      picked = np.asarray(policy.sample(obs, rng), np.int64).reshape(-1)
      return np.eye(self.action_size, dtype=np.float32)[picked]
    return np.stack([np.asarray(policy.sample(obs, rng), np.float32).reshape(len(obs), -1)
                     for _ in range(self.config.action_samples)])

  def fit(self, policy: policies_lib.Policy, batches: Iterable[Mapping[str, np.ndarray]], *,
          num_steps: Optional[int] = None, progress: bool = False,
          checkpoint_dir: Optional[str] = None, checkpoint_every: int = 1000) -> list[float]:
    """Runs `num_steps` updates (config.num_steps by default) on `batches`; returns the losses.
    With `checkpoint_dir`, resumes from its latest checkpoint and saves every `checkpoint_every`."""
    from tqdm import auto  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    num_steps = self.config.num_steps if num_steps is None else num_steps
    rng = np.random.default_rng(self.config.seed + 1)
    manager = None
    if checkpoint_dir:
      ckpt = tf.train.Checkpoint(q=self.q, target=self.target, optimizer=self.optimizer,
                                 steps=self.steps)
      manager = tf.train.CheckpointManager(ckpt, os.fspath(checkpoint_dir), max_to_keep=2)
      if manager.latest_checkpoint:
        ckpt.restore(manager.latest_checkpoint)
    losses = []
    it = iter(batches)
    with auto.tqdm(total=num_steps, initial=min(int(self.steps), num_steps), desc='fqe',
                   unit=' updates', disable=None if progress else True) as bar:
      while int(self.steps) < num_steps:
        batch = next(it)
        loss = self._update(
            batch[fields.OBSERVATION], batch[fields.ACTION], batch[fields.REWARD],
            batch['bootstrap'], batch[fields.NEXT_OBSERVATION],
            self.policy_input(policy, batch[fields.NEXT_OBSERVATION], rng))
        losses.append(float(loss))
        bar.update(1)
        if manager and int(self.steps) % checkpoint_every == 0:
          manager.save(checkpoint_number=int(self.steps))
    if manager:
      manager.save(checkpoint_number=int(self.steps))
    return losses

  def q_values(self, obs: np.ndarray, actions: np.ndarray) -> np.ndarray:
    if self.discrete:
      q = self._q_all(self.q, obs, None).numpy()
      return q[np.arange(len(q)), np.asarray(actions, np.int64).reshape(-1)].astype(np.float64)
    return self._q_all(self.q, obs, actions).numpy().astype(np.float64)

  def state_values(self, policy: policies_lib.Policy, obs: np.ndarray, seed: int = 0,
                   samples: int = 16) -> np.ndarray:
    """E_{a ~ pi} Q(s, a) per row of `obs` (exact for discrete probabilities, else `samples`)."""
    rng = np.random.default_rng(seed)
    obs = np.asarray(obs)
    if self.discrete:
      return np.sum(self.policy_input(policy, obs, rng) *
                    self._q_all(self.q, obs, None).numpy(), -1).astype(np.float64)
    return np.mean([self.q_values(obs, policy.sample(obs, rng)) for _ in range(samples)], 0)


def episode_predictions(model: FQE, policy: policies_lib.Policy, data: data_lib.OPEData,
                        seed: int = 0) -> tuple[list[np.ndarray], list[np.ndarray]]:
  """Per episode: Q(s_t, a_t) for its T actions and V(s_t) = E_pi Q(s_t, .) for its T + 1
  observations (the doubly robust estimator's model), computed in one batch."""
  obs = np.concatenate([e.observations for e in data.episodes])
  starts = np.cumsum([0] + [e.length + 1 for e in data.episodes])
  values = model.state_values(policy, obs, seed)
  actions = np.concatenate([e.actions for e in data.episodes])
  acted = np.concatenate([np.arange(a, b - 1) for a, b in zip(starts[:-1], starts[1:])])
  q = model.q_values(obs[acted], actions)
  action_starts = np.cumsum([0] + [e.length for e in data.episodes])
  return ([q[a:b] for a, b in zip(action_starts[:-1], action_starts[1:])],
          [values[a:b] for a, b in zip(starts[:-1], starts[1:])])


def array_batches(transitions: Mapping[str, np.ndarray], batch_size: int,
                  seed: int = 0) -> Iterator[dict[str, np.ndarray]]:
  """Uniform minibatches (with replacement) from transitions in memory, forever."""
  rng = np.random.default_rng(seed)
  size = len(transitions[fields.REWARD])
  while True:
    rows = rng.integers(0, size, batch_size) if batch_size < size else np.arange(size)
    yield {k: v[rows] for k, v in transitions.items()}


def stream_batches(source: Any, batch_size: int, seed: int = 0, prefetch: int = 8,
                   store_dir: Optional[str] = None,
                   block_bytes: int = transition_store.DEFAULT_BLOCK_BYTES,
                   **stream_kwargs: Any) -> Iterator[dict[str, np.ndarray]]:
  """Shuffled transitions of a dataset (directory or registered name), with their bootstrap mask
  from the RLDS flags; repeats forever. The first pass comes from rlds_suite.streams (`prefetch`
  batches read ahead by a thread; 0: none) and is kept in a TransitionStore (a temporary
  directory under `store_dir`, the system's temporary directory by default, removed when the
  iterator is closed); every later pass is read back from the store in shuffled blocks of
  `block_bytes`, in the caller's thread (a batch is then a slice, cheaper than a hand-over), so
  the stream's parse is paid once, not on every pass, and memory stays bounded by the block."""
  from rlds_suite import streams  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  once = streams.Mix(exhaustion=streams.Exhaustion.STOP)
  stream = streams.stream([os.fspath(source)], unit=streams.Transitions(), batch_size=batch_size,
                          seed=seed, mix=once, drop_remainder=False, **stream_kwargs)
  first_pass = _with_bootstrap(streams.as_numpy(stream))
  if prefetch:
    first_pass = read_ahead.read_ahead(first_pass, prefetch, name='fqe-read-ahead')
  with tempfile.TemporaryDirectory(prefix='fqe_transitions_', dir=store_dir) as directory:
    store = transition_store.TransitionStore(directory)
    try:
      for batch in first_pass:
        store.append(batch)
        if len(batch[fields.REWARD]) == batch_size:  # the pass's short last batch comes later
          yield batch
    finally:
      first_pass.close()
    store.seal()
    yield from store.batches(batch_size, seed + 1, block_bytes)


def _with_bootstrap(batches: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, np.ndarray]]:
  for batch in batches:
    yield {
        fields.OBSERVATION: batch[fields.OBSERVATION],
        fields.ACTION: batch[fields.ACTION],
        fields.REWARD: np.asarray(batch[fields.REWARD], np.float32),
        'bootstrap': data_lib.bootstrap_mask(batch[fields.DISCOUNT], batch[fields.IS_TERMINAL]),
        fields.NEXT_OBSERVATION: batch[fields.NEXT_OBSERVATION],
    }


def evaluate(policy: policies_lib.Policy, data: data_lib.OPEData | data_lib.OPESummary,
             config: FQEConfig = FQEConfig(),
             batches: Optional[Iterable[Mapping[str, np.ndarray]]] = None,
             progress: bool = False, checkpoint_dir: Optional[str] = None) -> tuple[float, FQE]:
  """FQE's estimate of `policy`'s value on `data` (batches from `data`'s episodes in memory unless
  given; a summary needs them given) and the fitted model."""
  action_size = (data.action_count() if data.discrete_actions
                 else int(np.prod(data.action_shape) or 1))
  if data.discrete_actions and hasattr(policy, 'num_actions'):
    action_size = max(action_size, int(policy.num_actions))
  model = FQE(data.observation_size, action_size, data.discrete_actions, config)
  if batches is None:
    batches = array_batches(data.transitions(), config.batch_size, config.seed)
  model.fit(policy, batches, progress=progress, checkpoint_dir=checkpoint_dir)
  value = float(np.mean(model.state_values(policy, data.initial_observations(), config.seed)))
  return value, model
