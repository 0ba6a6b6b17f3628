"""Ground truth by rollouts: a policy's discounted return in an `rlds_suite.envs.make` environment."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from rlds_suite.ope import policies as policies_lib


def monte_carlo(policy: Any, env_spec: str, episodes: int, discount: float = 1.0, *,
                seed: int = 0, max_episode_steps: Optional[int] = None,
                env_options: Optional[dict] = None) -> tuple[float, float]:
  """(mean, std) over `episodes` rollouts of sum_t discount^t r_t; the environment's own time
  limit ends an episode unless `max_episode_steps` comes first. Actions are sampled (seeded)."""
  from rlds_suite import envs  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  policy = policies_lib.load(policy)
  env = envs.make(env_spec, seed=seed, **(env_options or {}))
  rng = np.random.default_rng(seed)
  spec = env.action_spec()
  returns = []
  try:
    for _ in range(episodes):
      timestep = env.reset()
      total, scale, steps = 0.0, 1.0, 0
      while not timestep.last():
        if max_episode_steps is not None and steps >= max_episode_steps:
          break
        action = np.asarray(policy.sample(np.asarray(timestep.observation)[None], rng))[0]
        timestep = env.step(np.asarray(action, dtype=spec.dtype).reshape(spec.shape))
        total += scale * float(timestep.reward or 0.0)
        scale *= discount
        steps += 1
      returns.append(total)
  finally:
    env.close()
  return float(np.mean(returns)), float(np.std(returns))
