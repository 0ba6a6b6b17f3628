"""Hostile pickles against every reader that unpickles: a typed one-line error naming the file,
never code run, never a crash, never data from memory or another file.

Each read runs in a forked child (tests/fixtures/write_malicious_pickles.run_isolated), so a
pointer read that crashes numpy fails one case instead of killing pytest, and what one case does
to the process cannot reach the next.
"""

import collections
import dataclasses
import gzip
import io
import pathlib
import pickletools
import random
import zipfile
from typing import Any, Callable

import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.readers import il_representations
from rlds_suite.readers import ilr_atari
from rlds_suite.readers import ilr_dm_control
from rlds_suite.readers import ilr_procgen
from rlds_suite.readers import imitation
from rlds_suite.readers import magical
from tests.fixtures import write_malicious_pickles as corpus

FIXTURES = pathlib.Path(__file__).resolve().parent / 'fixtures'

READERS = {
    'magical': magical.read_demo,
    'imitation_pkl': lambda path: imitation.read_rollouts(path, imitation.LAYOUTS['cartpole']),
    'imitation_npz': lambda path: imitation.read_rollouts(path, imitation.LAYOUTS['cartpole']),
    'ilr_procgen': lambda path: list(ilr_procgen.read_trajectories(path)),
    'ilr_dm_control': lambda path: list(ilr_dm_control.read_trajectories(
        path, ilr_dm_control.TASKS['reacher-easy'])),
    'ilr_atari': lambda path: list(ilr_atari.read_trajectories(path)),
    'ilr_shard_metadata': il_representations.read,
    'ilr_shard_member': il_representations.read,
}
assert set(READERS) == set(corpus.FORMATS)


@pytest.mark.parametrize('format_name', sorted(READERS))
def test_every_malicious_pickle_is_refused_unrun(format_name, tmp_path):
  marker = tmp_path / 'pwned'
  read = READERS[format_name]
  failures = []
  for case in corpus.cases(str(marker)):
    path = corpus.write(tmp_path / case.name, format_name, corpus.wrap(case.fragment))
    result = corpus.run_isolated(lambda: repr(read(path))[:200])  # pylint: disable=cell-var-from-loop
    if (result['outcome'] != 'error' or result['type'] != case.expected or result['lines'] != 1 or
        str(path) not in result['message']):
      failures.append(f'{case.name}: expected a one-line {case.expected} naming the file, got '
                      f'{result}')
  assert not marker.exists(), 'a pickle ran code'
  assert not failures, '\n'.join(failures)


def test_one_file_cannot_change_another_files_data(tmp_path):
  """A demo whose BUILD targets the stand-in class, then a clean demo in the same process."""
  attack = next(case for case in corpus.cases('') if case.name == 'build_on_class_attribute')
  bad = corpus.write(tmp_path / 'bad', 'magical', corpus.wrap(attack.fragment))
  clean = FIXTURES / 'magical' / 'demo-MoveToCorner-Demo-v0-001.pkl.gz'
  expected = magical.read_demo(clean).rewards.tolist()

  def both():
    try:
      magical.read_demo(bad)
      first = 'loaded'
    except Exception as e:  # pylint: disable=broad-except
      first = type(e).__name__
    return first, magical.read_demo(clean).rewards.tolist()

  result = corpus.run_isolated(both)
  assert result['outcome'] == 'ok', result
  first, rewards = result['value']
  assert rewards == expected == [0.0]
  assert first == 'UnsafePickleError'


# Fuzz: seeded byte mutations of real pickles (of the fixtures where the real data is absent).
# Pickles carry no checksum: a byte overwritten inside a value (an array's raw data, a number, a
# string, or a memo index, which picks an earlier value) gives another value and no error, and
# nothing in the file can tell (`rlds-suite verify --manual_dir` compares the recorded sha256;
# readers then check types and shapes). Overwrites therefore hit only the rest: opcodes, length
# prefixes, protocol and frame sizes; insertions, deletions and truncations go anywhere.
# Every mutation must give a typed one-line error or the same data.


def _npy_parts(path: pathlib.Path, member: str) -> tuple[bytes, bytes]:
  """(.npy header, pickle) of an object-array member."""
  with zipfile.ZipFile(path) as archive:
    data = archive.read(member)
  f = io.BytesIO(data)
  np.lib.format.read_magic(f)
  np.lib.format.read_array_header_1_0(f)
  return data[:f.tell()], data[f.tell():]


def _npz_writer(source: pathlib.Path, member: str) -> Callable[[pathlib.Path, bytes], None]:
  """Writes `source` with `member`'s pickle replaced (members stored, so writing is fast)."""
  with zipfile.ZipFile(source) as archive:
    members = {name: archive.read(name) for name in archive.namelist()}
  header, _ = _npy_parts(source, member)

  def write(path: pathlib.Path, pickled: bytes) -> None:
    with zipfile.ZipFile(path, 'w') as archive:
      for name, data in members.items():
        archive.writestr(name, header + pickled if name == member else data)
  return write


def _write_gzip(path: pathlib.Path, pickled: bytes) -> None:
  path.write_bytes(gzip.compress(pickled, compresslevel=0, mtime=0))  # Stored blocks: fast.


@dataclasses.dataclass(frozen=True)
class _Subject:
  """A real (or fixture) file read by its reader, its pickle mutated `count` times."""
  name: str  # The file name the reader expects.
  pickled: bytes
  write: Callable[[pathlib.Path, bytes], None]
  read: Callable[[pathlib.Path], Any]
  count: int


def _same(a: Any, b: Any) -> bool:
  if type(a) is not type(b):
    return False
  if isinstance(a, np.ndarray):
    if a.dtype != b.dtype or a.shape != b.shape:
      return False
    if a.dtype == object:
      return all(_same(x, y) for x, y in zip(a.ravel(), b.ravel()))
    return a.tobytes() == b.tobytes()
  if isinstance(a, np.generic):
    return a.tobytes() == b.tobytes()
  if isinstance(a, dict):
    return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
  if isinstance(a, (list, tuple)):
    return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
  if dataclasses.is_dataclass(a):
    return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
  return a == b


def _overwritable(data: bytes) -> np.ndarray:
  """Offsets of the bytes that are not part of a value: everything but the payload of byte and
  string arguments and the arguments of number and memo opcodes."""
  allowed = np.ones(len(data), bool)
  ops = list(pickletools.genops(data))
  for (op, arg, start), (_, _, end) in zip(ops, ops[1:]):
    if isinstance(arg, (bytes, bytearray)):
      allowed[end - len(arg):end] = False
    elif isinstance(arg, str) and op.name not in ('GLOBAL', 'INST'):
      allowed[end - len(arg.encode('utf-8', 'surrogatepass')):end] = False
    elif isinstance(arg, (int, float)) and op.name not in ('PROTO', 'FRAME'):
      allowed[start + 1:end] = False
  return np.flatnonzero(allowed)


def _fuzz(subjects: list[_Subject], directory: pathlib.Path, seed: int) -> dict[str, Any]:
  """Mutates each subject's pickle; returns counts per outcome and the failures."""
  rng = random.Random(seed)
  counts, failures = collections.Counter(), []
  for subject in subjects:
    data = subject.pickled
    path = directory / subject.name
    subject.write(path, data)
    reference = subject.read(path)
    overwritable = _overwritable(data)
    for k in range(subject.count):
      kind = ('overwrite', 'insert', 'delete', 'truncate')[k % 4]
      size = rng.randint(1, 4)
      junk = bytes(rng.randrange(256) for _ in range(size))
      at = (int(overwritable[rng.randrange(len(overwritable))]) if kind == 'overwrite' else
            rng.randrange(len(data) - 1))
      subject.write(path, {'overwrite': data[:at] + junk + data[at + size:],
                           'insert': data[:at] + junk + data[at:],
                           'delete': data[:at] + data[at + size:],
                           'truncate': data[:at]}[kind])
      try:
        outcome = 'same' if _same(subject.read(path), reference) else 'different data'
      except errors.RLDSSuiteError as e:
        outcome = ('typed error' if len(str(e).splitlines()) == 1 and str(path) in str(e) else
                   f'badly located error: {e}')
      except Exception as e:  # pylint: disable=broad-except
        outcome = f'untyped {type(e).__name__}: {e}'
      counts[outcome.split(':')[0]] += 1
      if outcome not in ('same', 'typed error'):
        failures.append(f'{subject.name}: {kind} of {junk!r} at {at}: {outcome[:300]}')
  return {'counts': dict(counts), 'failures': failures}


def _check_fuzz(subjects: list[_Subject], directory: pathlib.Path) -> None:
  result = corpus.run_isolated(lambda: _fuzz(subjects, directory, seed=20), timeout=300)
  assert result['outcome'] == 'ok', result  # A signal here is a crash of the interpreter.
  assert not result['value']['failures'], result['value']
  assert sum(result['value']['counts'].values()) == sum(s.count for s in subjects)


def test_fuzzed_real_pickles_give_typed_errors_or_the_same_data(real_data, tmp_path):
  native = real_data / 'il_representations' / 'native'
  imitation_npz = real_data / 'imitation' / 'cartpole_0_rollouts_final.npz'
  atari_npz = native / 'atari-pong.npz'
  _check_fuzz([
      _Subject('demo-MoveToRegion-Demo-v0-016.pkl.gz', gzip.decompress(
          (real_data / 'magical' / 'demo-MoveToRegion-Demo-v0-016.pkl.gz').read_bytes()),
               _write_gzip, READERS['magical'], 8),
      _Subject('reacher-easy-test.pkl.gz', gzip.decompress(
          (native / 'dm_control-reacher-easy-test.pkl.gz').read_bytes()), _write_gzip,
               READERS['ilr_dm_control'], 60),
      _Subject('cartpole_rollouts.npz', _npy_parts(imitation_npz, 'infos.npy')[1],
               _npz_writer(imitation_npz, 'infos.npy'), READERS['imitation_npz'], 100),
      _Subject('pong.npz', _npy_parts(atari_npz, 'arr_0.npy')[1],
               _npz_writer(atari_npz, 'arr_0.npy'), READERS['ilr_atari'], 8),
  ], tmp_path)


def test_fuzzed_fixture_pickles_give_typed_errors_or_the_same_data(tmp_path):
  imitation_npz = FIXTURES / 'imitation' / 'cartpole_rollouts.npz'
  _check_fuzz([
      _Subject('demo-MoveToCorner-Demo-v0-000.pkl.gz', gzip.decompress(
          (FIXTURES / 'magical' / 'demo-MoveToCorner-Demo-v0-000.pkl.gz').read_bytes()),
               _write_gzip, READERS['magical'], 40),
      _Subject('cartpole_rollouts.pkl', (FIXTURES / 'imitation' / 'cartpole_rollouts.pkl')
               .read_bytes(), lambda path, data: path.write_bytes(data), READERS['imitation_pkl'],
               60),
      _Subject('cartpole_rollouts.npz', _npy_parts(imitation_npz, 'infos.npy')[1],
               _npz_writer(imitation_npz, 'infos.npy'), READERS['imitation_npz'], 60),
  ], tmp_path)
