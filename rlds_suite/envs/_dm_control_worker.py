"""Runs one dm_control environment for `control_suite.SubprocessEnvironment`; executed as a script.

dm_control's EGL renderer (Mesa) and TensorFlow crash when loaded in one process (segfault or
`free(): invalid pointer`), so the environment lives here, in a process that never imports
TensorFlow (this file is run by path, not through the rlds_suite package). Protocol on stdin/stdout:
length-prefixed pickles, request (command, argument) -> reply ('ok', value) | ('error', text).
"""

import os
import pickle
import struct
import sys
import traceback


def _read(stream):
  header = stream.read(8)
  if len(header) < 8:
    return None
  (size,) = struct.unpack('<Q', header)
  return pickle.loads(stream.read(size))


def _write(stream, value):
  data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
  stream.write(struct.pack('<Q', len(data)) + data)
  stream.flush()


def _make(options):
  from dm_control import suite  # pylint: disable=g-import-not-at-top
  task_kwargs = {'random': options['seed']}
  if options.get('time_limit') is not None:
    task_kwargs['time_limit'] = options['time_limit']
  env = suite.load(options['domain'], options['task'], task_kwargs=task_kwargs)
  if options.get('pixels'):
    from dm_control.suite.wrappers import pixels  # pylint: disable=g-import-not-at-top
    env = pixels.Wrapper(env, pixels_only=options['pixels_only'],
                         render_kwargs=options['render_kwargs'])
  return env


def main():
  # Keep the protocol stream private: anything the libraries print goes to stderr.
  protocol_out = os.fdopen(os.dup(1), 'wb')
  os.dup2(2, 1)
  requests = sys.stdin.buffer
  env = None
  while True:
    request = _read(requests)
    if request is None:
      break
    command, argument = request
    try:
      if command == 'init':
        env = _make(argument)
        value = (env.observation_spec(), env.action_spec(), env.reward_spec(), env.discount_spec())
      elif command == 'reset':
        value = env.reset()
      elif command == 'step':
        value = env.step(argument)
      elif command == 'render':
        value = env.physics.render(**argument)
      elif command == 'close':
        env.close()
        _write(protocol_out, ('ok', None))
        break
      else:
        raise ValueError(f'unknown command {command!r}')
      _write(protocol_out, ('ok', value))
    except Exception:  # pylint: disable=broad-except
      _write(protocol_out, ('error', traceback.format_exc()))


if __name__ == '__main__':
  main()
