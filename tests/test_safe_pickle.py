"""The restricted unpickler: known classes map to stand-ins, everything else is refused unrun."""

import collections
import gzip
import os
import pickle
import subprocess

import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.core import safe_pickle


class _WritesFile:
  """A pickle that would create a file when loaded by a plain unpickler."""

  def __init__(self, path):
    self.path = path

  def __reduce__(self):
    return (os.system, (f'touch {self.path}',))


def test_malicious_reduce_is_refused_without_running(tmp_path):
  marker = tmp_path / 'pwned'
  payload = pickle.dumps(_WritesFile(marker))
  with pytest.raises(errors.UnsafePickleError, match=r'evil\.pkl: refusing to load global'):
    safe_pickle.loads(payload, source='evil.pkl')
  assert not marker.exists()
  # The payload is live: a plain unpickler would have run it.
  subprocess.run(['python3', '-c', 'import pickle,sys; pickle.loads(sys.stdin.buffer.read())'],
                 input=payload, check=True)
  assert marker.exists()


@pytest.mark.parametrize('payload', [
    b'cbuiltins\neval\n(S"1+1"\ntR.',
    b'csubprocess\ncheck_output\n(S"ls"\ntR.',
    b'cnumpy\nload\n(S"x"\ntR.',
])
def test_other_globals_are_refused(payload):
  with pytest.raises(errors.UnsafePickleError):
    safe_pickle.loads(payload)


def test_plain_data_round_trips():
  value = {'a': np.arange(6, dtype=np.float32).reshape(2, 3), 'b': [1, (2, 3)],
           'c': collections.OrderedDict(x=np.int64(4)), 'd': np.array([{'k': 1}], dtype=object)}
  for protocol in (2, 4, 5):
    loaded = safe_pickle.loads(pickle.dumps(value, protocol=protocol))
    np.testing.assert_array_equal(loaded['a'], value['a'])
    assert loaded['b'] == value['b'] and loaded['c'] == value['c']
    assert loaded['d'][0] == {'k': 1}


def test_truncated_pickle_is_corrupt_file_error():
  data = pickle.dumps({'a': np.zeros(100)})
  with pytest.raises(errors.CorruptFileError, match='x.pkl'):
    safe_pickle.loads(data[:len(data) // 2], source='x.pkl')


def test_real_magical_demo_uses_stand_in(real_data):
  path = real_data / 'magical' / 'demo-MoveToRegion-Demo-v0-016.pkl.gz'
  with gzip.open(path) as f:
    demo = safe_pickle.load(f, source=str(path))
  assert isinstance(demo['trajectory'], safe_pickle.MILBenchTrajectory)
  assert demo['env_name'] == 'MoveToRegion-Demo-v0'
