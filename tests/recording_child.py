"""Child process for tests/test_recording_signals.py: records forever into argv[1].

Episodes of a counting environment terminate after 50 actions (discount 0); each step sleeps 1 ms
(or argv[4] seconds: slow episodes) so the parent can signal mid-episode. argv[2]: max episodes per
shard; argv[3] (optional): the writer's flush_seconds. Appends one line per started episode to
argv[1] + '.progress' once an episode's first action is recorded.
"""

import sys
import time

import dm_env
from dm_env import specs
import numpy as np

import rlds_suite


class Counter(dm_env.Environment):
  LENGTH = 50

  def __init__(self, step_seconds=0.001):
    self._t = 0
    self._step_seconds = step_seconds

  def reset(self):
    self._t = 0
    return dm_env.restart(np.float32(0))

  def step(self, action):
    self._t += 1
    time.sleep(self._step_seconds)
    if self._t >= self.LENGTH:
      return dm_env.termination(1.0, np.float32(self._t))
    return dm_env.transition(1.0, np.float32(self._t))

  def observation_spec(self):
    return specs.Array((), np.float32)

  def action_spec(self):
    return specs.DiscreteArray(2)


def main():
  directory, per_shard = sys.argv[1], int(sys.argv[2])
  options = {'flush_seconds': float(sys.argv[3])} if len(sys.argv) > 3 else {}
  step_seconds = float(sys.argv[4]) if len(sys.argv) > 4 else 0.001
  progress = open(directory + '.progress', 'a', buffering=1)

  def policy(timestep):
    # Marked once the episode's first action is recorded: a signal after the mark finds an episode
    # with an action to write (one of only a reset is not an episode RLDSWriter keeps).
    if timestep.step_type == dm_env.StepType.MID and timestep.observation == 1:
      progress.write('episode\n')
    return 0

  rlds_suite.record(Counter(step_seconds), policy, episodes=10**6, data_dir=directory,
                    name='counter', max_episodes_per_shard=per_shard, progress=False, **options)


if __name__ == '__main__':
  main()
