"""The restricted unpickler: known classes map to stand-ins, everything else is refused unrun."""

import collections
import gzip
import io
import os
import pickle
import struct
import subprocess
import sys
import tracemalloc
import types
from unittest import mock
import zipfile

import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.core import safe_pickle
from tests.fixtures import write_malicious_pickles as corpus


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


# What pickles may make, beyond which globals they name (see also test_adversarial_pickles).


def test_object_dtype_scalar_cannot_read_a_pointer():
  """numpy's scalar() with an object dtype pickled with flags 0 returned the object at an address
  the file gave (here os.system's)."""
  address = struct.pack('<Q', id(os.system))
  payload = corpus.PROTO + corpus.call(corpus.glob('numpy.core.multiarray', 'scalar'),
                                       corpus.dtype('O8', 0), corpus.raw(address)) + corpus.STOP
  result = corpus.run_isolated(lambda: repr(safe_pickle.loads(payload, source='evil.pkl')))
  assert result['outcome'] == 'error' and result['type'] == 'UnsafePickleError', result
  assert result['message'].startswith('evil.pkl: refusing dtype object pickled with flags 0')


def test_arrays_come_only_from_the_files_bytes():
  uninitialised = corpus.PROTO + corpus.glob('numpy', 'ndarray') + corpus.tup(
      corpus.tup(corpus.integer(1000)), corpus.text('f4')) + corpus.NEWOBJ + corpus.STOP
  with pytest.raises(errors.UnsafePickleError, match='x.pkl: refusing to create numpy.ndarray'):
    safe_pickle.loads(uninitialised, source='x.pkl')
  short = corpus.PROTO + corpus.array(corpus.dtype('f8', 0, '<'), (4,), corpus.raw(b'\0' * 8))
  with pytest.raises(errors.CorruptFileError, match='array data has 8 bytes, its shape and dtype '
                                                    'float64 need 32'):
    safe_pickle.loads(short + corpus.STOP)


def test_stand_ins_take_state_per_instance_only():
  data = pickle.dumps(collections.OrderedDict(a=1))  # An allowed global to aim BUILD at.
  attack = corpus.PROTO + corpus.glob('imitation.data.types', 'TrajectoryWithRew') + corpus.tup(
      corpus.NONE, corpus.EMPTY_DICT + corpus.text('rews') + corpus.floating(5.0) + b's'
  ) + corpus.BUILD + corpus.STOP
  result = corpus.run_isolated(lambda: (safe_pickle.loads(attack), None)[1])
  assert result['type'] == 'UnsafePickleError' and 'refusing to set the state of' in result['message']
  assert safe_pickle.loads(data) == {'a': 1}
  fields = corpus.PROTO + corpus.glob('imitation.data.types', 'TrajectoryWithRew') + b')' + (
      corpus.NEWOBJ + corpus.EMPTY_DICT + corpus.text('rews') + corpus.floating(5.0) + b's' +
      corpus.BUILD + corpus.STOP)
  loaded = safe_pickle.loads(fields)
  assert loaded.rews == 5.0 and safe_pickle.ImitationTrajectory().rews is None


def test_byte_claims_are_refused_before_allocating(tmp_path):
  claim = corpus.PROTO + b'\x8e' + struct.pack('<Q', 1 << 40) + b'abc'
  path = tmp_path / 'bomb.pkl'
  path.write_bytes(claim)
  with open(path, 'rb') as f, pytest.raises(
      errors.CorruptFileError, match=r'bomb.pkl: BINBYTES8 claims 1099511627776 bytes, more than '
                                     r'the 14 the pickle stream can hold'):
    safe_pickle.load(f, source=str(path))

  class Stream(io.RawIOBase):  # Size unknown, as a decompressing stream's.
    def __init__(self, data):
      self._data = io.BytesIO(data)

    def readable(self):
      return True

    def readinto(self, buffer):
      return self._data.readinto(buffer)

  tracemalloc.start()
  try:
    with pytest.raises(errors.CorruptFileError, match='truncated: BINBYTES8 claims'):
      safe_pickle.load(io.BufferedReader(Stream(corpus.PROTO + b'\x8e' + struct.pack('<Q', 1 << 34)
                                                + b'x' * 1000)), source='s.pkl')
    peak = tracemalloc.get_traced_memory()[1]
  finally:
    tracemalloc.stop()
  assert peak < 64 << 20, peak  # Read in chunks, not a 16 GiB buffer up front.


def test_stop_must_end_a_finished_pickle():
  data = pickle.dumps({'trajectory': [1, 2, 3], 'score': 1.0}, protocol=2)
  early = data[:data.index(b'trajectory') + len(b'trajectory')] + b'.'  # A byte became STOP.
  with pytest.raises(errors.CorruptFileError, match='stops inside an unfinished value'):
    safe_pickle.loads(early)
  with pytest.raises(errors.CorruptFileError, match='data follows the end of the pickle'):
    safe_pickle.loads(data + b'junk')


def test_booleans_are_0_or_1():
  data = pickle.dumps(np.array([True, False, True]), protocol=2)
  assert safe_pickle.loads(data).tolist() == [True, False, True]
  with pytest.raises(errors.CorruptFileError, match='bytes other than 0 and 1'):
    safe_pickle.loads(data.replace(b'\x01\x00\x01', b'\x02\x00\x01'))


def test_large_boolean_arrays_are_0_or_1_too():
  """Small boolean data is checked byte by byte, large data with numpy: both refuse a 2."""
  for size in (1, 4095, 4096, 10000):
    values = np.zeros(size, bool)
    values[-1] = True
    data = pickle.dumps(values, protocol=3)
    assert safe_pickle.loads(data).tolist() == values.tolist()
    last = data.rindex(values.tobytes()) + size - 1
    with pytest.raises(errors.CorruptFileError, match='bytes other than 0 and 1'):
      safe_pickle.loads(data[:last] + b'\x02' + data[last + 1:])


def test_a_dtype_state_accepted_once_does_not_vouch_for_an_equal_state_of_other_types():
  """Dtypes are kept by their pickled state, so arrays pickled without a memo are cheap: a state
  equal in value but not in types (item size -1.0 for -1) is still refused."""
  data = pickle.dumps(np.zeros(3, 'u1'), protocol=3)
  minus_one = b'J\xff\xff\xff\xff'
  assert data.count(minus_one) == 2  # Item size and alignment, both -1.
  assert safe_pickle.loads(data).tolist() == [0, 0, 0]  # Now kept.
  crafted = data.replace(minus_one, b'G' + struct.pack('>d', -1.0), 1)
  with pytest.raises(errors.UnsafePickleError, match='item size -1.0'):
    safe_pickle.loads(crafted)


@pytest.mark.parametrize('protocol', range(6))
def test_numpy_values_round_trip_exactly(protocol):
  values = [np.arange(6, dtype='>i4').reshape(2, 3), np.asfortranarray(np.eye(3, dtype=np.float16)),
            np.array(['ab', 'c']), np.array([b'x', b'yz']), np.array([1 + 2j], np.complex64),
            np.array(['2020-01-01'], 'datetime64[ms]'), np.array([3], 'timedelta64[10s]'),
            np.zeros((0, 4), np.uint8), np.float64(1.5), np.int8(-3), np.bool_(True),
            np.str_('s'), np.datetime64('2021-02-03', 'D'), np.array([None, {'k': [1]}], object)]
  plain = [b'b', bytearray(b'ba'), b'', 2 + 3j, {1, 2}, frozenset({3}), (1, [2]),
           collections.OrderedDict(z=1, a=2)]
  data = pickle.dumps(values + plain, protocol=protocol)
  loaded = safe_pickle.loads(data)
  for got, want in zip(loaded, pickle.loads(data)):  # numpy's own unpickling.
    assert type(got) is type(want)
    if isinstance(want, (np.ndarray, np.generic)):
      assert got.dtype == want.dtype and np.shape(got) == np.shape(want)
      assert got.tolist() == want.tolist()
    if isinstance(want, np.ndarray):
      assert got.strides == want.strides and got.flags.writeable == want.flags.writeable
  assert loaded[len(values):] == plain and type(loaded[-1]) is collections.OrderedDict


def test_real_pickles_load_as_pickle_does(real_data):
  """Against the plain unpickler, with the authors' classes stood in by equivalent ones."""
  trajectory = collections.namedtuple('MILBenchTrajectory', 'acts obs rews infos')
  dataclass = type('TrajectoryWithRew', (), {})
  modules = {name: types.ModuleType(name) for name in (
      'milbench', 'milbench.baselines', 'milbench.baselines.saved_trajectories', 'imitation',
      'imitation.data', 'imitation.data.types')}
  modules['milbench.baselines.saved_trajectories'].MILBenchTrajectory = trajectory
  modules['imitation.data.types'].TrajectoryWithRew = dataclass
  native = real_data / 'il_representations' / 'native'
  with gzip.open(real_data / 'magical' / 'demo-MoveToRegion-Demo-v0-016.pkl.gz') as f:
    magical = f.read()
  with gzip.open(native / 'dm_control-reacher-easy-test.pkl.gz') as f:
    dm_control = f.read()
  atari = _npy_pickle(native / 'atari-pong.npz', 'arr_0.npy')
  infos = _npy_pickle(real_data / 'imitation' / 'cartpole_0_rollouts_final.npz', 'infos.npy')
  for data in (magical, dm_control, atari, infos):
    ours = safe_pickle.loads(data)
    with mock.patch.dict(sys.modules, modules):
      theirs = pickle.loads(data)
    _assert_same(ours, theirs)


def _npy_pickle(path, member):
  with zipfile.ZipFile(path) as archive, archive.open(member) as f:
    np.lib.format.read_magic(f)
    np.lib.format.read_array_header_1_0(f)
    return f.read()


def _assert_same(ours, theirs, where='$'):
  if isinstance(theirs, np.ndarray):
    assert type(ours) is np.ndarray and ours.dtype == theirs.dtype, where
    assert ours.shape == theirs.shape and ours.strides == theirs.strides, where
    if theirs.dtype.hasobject:
      for i, (a, b) in enumerate(zip(ours.ravel(), theirs.ravel())):
        _assert_same(a, b, f'{where}[{i}]')
    else:
      assert ours.tobytes() == theirs.tobytes() and ours.flags.writeable == theirs.flags.writeable
  elif isinstance(theirs, dict):
    assert list(ours) == list(theirs), where
    for key in theirs:
      _assert_same(ours[key], theirs[key], f'{where}.{key}')
  elif isinstance(theirs, (list, tuple)):
    assert len(ours) == len(theirs) and isinstance(ours, type(theirs).__mro__[-2]), where
    for i, (a, b) in enumerate(zip(ours, theirs)):
      _assert_same(a, b, f'{where}[{i}]')
  elif type(theirs).__name__ == 'TrajectoryWithRew':
    for name, value in vars(theirs).items():
      _assert_same(getattr(ours, name), value, f'{where}.{name}')
  else:
    assert type(ours) is type(theirs) and (ours == theirs or ours != ours), where
