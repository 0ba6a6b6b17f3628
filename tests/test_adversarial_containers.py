"""Hostile and damaged containers (issues #16 1b/1c, #20 5/6/8).

Decompression bombs (gzip, zstd, zip members, HDF5 chunks) that would expand to gigabytes are
refused early, in a child process whose peak memory is measured; crafted headers are typed
errors; a deleted TFRecord shard is one line naming it; and seeded truncations and byte
overwrites of every non-pickle fixture format end in a typed error or the same data, never a
crash or a hang, and never different data where the format has a checksum (zip and gzip CRC-32,
zstd's content checksum, TFRecord's CRC-32C).
"""

import gzip
import hashlib
import io
import json
import os
import pathlib
import pickle
import random
import resource
import shutil
import struct
import subprocess
import sys
import tarfile
import zipfile
import zlib

import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.core import limits
from rlds_suite.core import safe_pickle
from rlds_suite.readers import files

REPO = pathlib.Path(__file__).resolve().parent.parent
FIXTURES = REPO / 'tests' / 'fixtures'
GIB = 1 << 30
BLOCK = 16 << 20
# A refused bomb stays near the interpreter's own ~35-50 MiB (the child's own peak, see
# read_in_child); one that holds what the stream may expand to (~660 MiB here) does not.
PEAK_BOUND = 256 << 20


# ---- Bombs, made in a fraction of a second --------------------------------------------------------

def deflate_zeros(prefix: bytes, num_blocks: int, suffix: bytes = b'') -> bytes:
  """Raw deflate of `prefix`, num_blocks x 16 MiB of zeros and `suffix`: after a full flush
  deflate forgets its history, so every block compresses to the same bytes (~1030:1)."""
  compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
  head = compressor.compress(prefix) + compressor.flush(zlib.Z_FULL_FLUSH)
  block = compressor.compress(bytes(BLOCK)) + compressor.flush(zlib.Z_FULL_FLUSH)
  return head + block * num_blocks + compressor.compress(suffix) + compressor.flush()


def gzip_bomb(path: pathlib.Path, prefix: bytes, num_blocks: int, suffix: bytes = b'', *,
              crc: bool = False):
  """A gzip file of `prefix` + zeros + `suffix`. Its CRC-32 is left 0 unless `crc`: a reader that
  refuses the bomb never reaches it, one that inflates it all has already used the memory."""
  size = len(prefix) + num_blocks * BLOCK + len(suffix)
  checksum = 0
  if crc:
    checksum, zeros = zlib.crc32(prefix), bytes(BLOCK)
    for _ in range(num_blocks):
      checksum = zlib.crc32(zeros, checksum)
    checksum = zlib.crc32(suffix, checksum)
  path.write_bytes(b'\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff' + deflate_zeros(prefix, num_blocks,
                                                                            suffix)
                   + struct.pack('<II', checksum, size & 0xFFFFFFFF))
  return path


def zstd_zeros(num_bytes: int) -> bytes:
  """A zstd frame of `num_bytes` zeros (a multiple of 128 KiB) in RLE blocks of 4 bytes each."""
  block = 128 << 10
  assert num_bytes % block == 0
  header = struct.pack('<I', 0xFD2FB528) + bytes([0x00, 7 << 3])  # 128 KiB window, no checksum.
  rle = lambda last: (last | 1 << 1 | block << 3).to_bytes(3, 'little') + b'\x00'
  return header + rle(0) * (num_bytes // block - 1) + rle(1)


def zstd(data: bytes) -> bytes:
  import zstandard  # pylint: disable=g-import-not-at-top
  return zstandard.ZstdCompressor(write_checksum=True).compress(data)


def tar_member(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
  info = tarfile.TarInfo(name)
  info.size = len(data)
  return info, data


def tar_bytes(members) -> bytes:
  buffer = io.BytesIO()
  with tarfile.open(fileobj=buffer, mode='w', format=tarfile.USTAR_FORMAT) as tar:
    for info, data in members:
      tar.addfile(info, io.BytesIO(data))
  return buffer.getvalue()


def shard_members(num_frames: int = 2):
  meta = {'env_cfg': {'benchmark_name': 'atari', 'task_name': 'PongNoFrameskip-v4'}}
  members = [tar_member('_metadata.meta.pickle', pickle.dumps(meta))]
  for t in range(num_frames):
    values = {'obs': np.full((4, 84, 84), t, np.uint8), 'next_obs': np.full((4, 84, 84), t + 1,
                                                                             np.uint8),
              'acts': np.int64(t % 6), 'dones': np.bool_(t == num_frames - 1)}
    members += [tar_member(f'frame_{t:03d}.{key}.pickle', pickle.dumps(value))
                for key, value in values.items()]
  return members


def shard_with_zeros_member(path: pathlib.Path, name: str, size: int) -> pathlib.Path:
  """A shard whose member `name` holds `size` zeros (an RLE frame between the rest's frames)."""
  members = shard_members()
  meta_info, meta = members[0]
  head = meta_info.tobuf(tarfile.USTAR_FORMAT) + meta + bytes(-len(meta) % 512)
  info = tarfile.TarInfo(name)
  info.size = size
  path.write_bytes(zstd(head + info.tobuf(tarfile.USTAR_FORMAT)) + zstd_zeros(size)
                   + zstd(tar_bytes(members[1:])))
  return path


def zip_bomb(path: pathlib.Path, member: str, num_blocks: int) -> pathlib.Path:
  """An .npz with one deflated .npy member of float64 zeros, num_blocks x 16 MiB (CRC left 0)."""
  header = io.BytesIO()
  np.lib.format.write_array_header_1_0(
      header, {'descr': '<f8', 'fortran_order': False, 'shape': (num_blocks * BLOCK // 8,)})
  data = deflate_zeros(header.getvalue(), num_blocks)
  size = len(header.getvalue()) + num_blocks * BLOCK
  name = member.encode()
  fields = struct.pack('<HHHHHIII', 20, 0, 8, 0, 0x21, 0, len(data), size)
  local = struct.pack('<I', 0x04034B50) + fields + struct.pack('<HH', len(name), 0) + name
  central = (struct.pack('<IH', 0x02014B50, 20) + fields
             + struct.pack('<HHHHHII', len(name), 0, 0, 0, 0, 0, 0) + name)
  end = struct.pack('<IHHHHIIH', 0x06054B50, 0, 0, 1, 1, len(central), len(local) + len(data), 0)
  path.write_bytes(local + data + central + end)
  return path


_CHILD = '''
import json, resource, sys
from rlds_suite.core import errors
kind, path = sys.argv[1], sys.argv[2]
try:
  if kind == 'gzip_pickle':
    from rlds_suite.readers import files
    files.load_gzip_pickle(path)
  elif kind == 'dm_control':
    from rlds_suite.readers import ilr_dm_control as reader
    list(reader.read_trajectories(path, reader.TASKS['reacher-easy']))
  elif kind == 'shard':
    from rlds_suite.readers import il_representations as reader
    reader.read(path)
  elif kind == 'npz':
    from rlds_suite.readers import files
    files.load_npz(path)
  elif kind == 'magical':
    from rlds_suite.readers import magical
    magical.read_demo(path)
  elif kind == 'imitation':
    from rlds_suite.readers import imitation
    imitation.load_pickle(path)
  elif kind == 'procgen':
    from rlds_suite.readers import ilr_procgen
    list(ilr_procgen.read_trajectories(path))
  elif kind == 'hdf5':
    from rlds_suite.readers import hdf5
    with hdf5.open_file(path) as f:
      hdf5.read_array(f, 'x', ranks=(1,))
  outcome = 'accepted'
except errors.RLDSSuiteError as e:
  outcome = f'{type(e).__name__}: {e}'
try:  # This image's own peak: ru_maxrss also counts what the parent held when it forked.
  with open('/proc/self/status') as status:
    peak = next(int(line.split()[1]) for line in status if line.startswith('VmHWM:')) * 1024
except OSError:  # No procfs: ru_maxrss (an upper bound).
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({'outcome': outcome, 'peak_bytes': peak}))
'''


def read_in_child(kind: str, path: pathlib.Path) -> tuple[str, int]:
  """(outcome, peak RSS bytes) of reading `path` in a fresh interpreter (its address space capped
  at 6 GiB, so that a reader which does inflate a bomb fails instead of taking the machine). The
  peak is the child's own (VmHWM): Linux carries ru_maxrss across exec, so a child forked from a
  pytest that imported TensorFlow (~0.8-1.3 GB) reported the parent's size, not the reader's."""
  def cap():
    resource.setrlimit(resource.RLIMIT_AS, (6 * GIB, 6 * GIB))
  result = subprocess.run([sys.executable, '-c', _CHILD, kind, str(path)], capture_output=True,
                          text=True, timeout=180, preexec_fn=cap, cwd=str(REPO), check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  report = json.loads(result.stdout.strip().splitlines()[-1])
  return report['outcome'], report['peak_bytes']


def pickle_of_bytes(num_blocks: int) -> tuple[bytes, bytes]:
  """(prefix, suffix) of protocol-4 pickle of a bytes object of num_blocks x 16 MiB zeros."""
  return b'\x80\x04\x8e' + struct.pack('<Q', num_blocks * BLOCK), b'.'


def test_the_peak_measured_is_the_readers_own(tmp_path):
  """The child's peak leaves out the test process's memory, whatever that holds when it forks."""
  held = bytearray(256 << 20)
  held[::4096] = b'\x01' * len(range(0, len(held), 4096))  # Resident, in the fork too.
  small = tmp_path / 'small.pkl.gz'
  small.write_bytes(gzip.compress(pickle.dumps({'a': 1})))
  outcome, peak = read_in_child('gzip_pickle', small)
  assert outcome == 'accepted'
  assert peak < len(held), peak


@pytest.mark.parametrize('kind', ['gzip_pickle', 'dm_control'])
@pytest.mark.parametrize('claim_blocks', [192, 48])
def test_gzip_pickle_bomb_is_refused_early(tmp_path, kind, claim_blocks):
  # 3 MiB of gzip that inflates to 3 GiB (one BINBYTES8): MAGICAL and dm_control *.pkl.gz. The
  # BINBYTES8 claims all of it, or 768 MiB: past the stream's ~660 MiB limit, but under the 1 GiB
  # the streaming unpickler holds at most when it is given no bound.
  prefix, suffix = pickle_of_bytes(claim_blocks)
  bomb = gzip_bomb(tmp_path / 'demo-bomb.pkl.gz', prefix, 192, suffix)
  assert bomb.stat().st_size < 4 << 20
  outcome, peak = read_in_child(kind, bomb)
  # Refused by the unpickler's claim check (bounded by the stream's limit) before any of it is
  # read, or by the stream once the claim's chunks pass its limit (which the streaming
  # unpickler reports as damage).
  assert outcome.startswith((f'SizeLimitError: {bomb}: ', f'CorruptFileError: {bomb}: ')), outcome
  assert peak < PEAK_BOUND, peak


@pytest.mark.parametrize('kind', ['gzip_pickle', 'dm_control'])
def test_a_claim_within_the_limit_is_held_once(tmp_path, kind):
  # A list of one tuple: 1 MiB of random bytes (so that the 1.1 MiB file's limit, ~290 MiB,
  # admits the rest) and a claim of 128 MiB of zeros, whose bytes were held twice: joined from
  # the streaming unpickler's first pass's reads, and read in chunks then joined.
  claim = 8 * BLOCK
  head = b'\x80\x04](' + b'(B' + struct.pack('<I', 1 << 20) + np.random.default_rng(0).bytes(1 << 20)
  path = gzip_bomb(tmp_path / 'large.pkl.gz', head + b'\x8e' + struct.pack('<Q', claim), 8, b'te.',
                   crc=True)
  assert claim < files.expansion_limit(path.stat().st_size, files.DEFLATE)
  outcome, peak = read_in_child(kind, path)
  assert outcome == ('accepted' if kind == 'gzip_pickle' else
                     f'SchemaError: {path}: trajectory 0: expected imitation.data.types.'
                     f'TrajectoryWithRew, got tuple'), outcome
  assert peak < claim + PEAK_BOUND // 2, (peak, claim)


class _EndlessZeros(io.RawIOBase):
  """`head`, then zeros without end: a stream of unknown size; fails the test once more than
  `most` bytes are read."""

  def __init__(self, head: bytes, most: int):
    super().__init__()
    self._head, self._most, self.position = head, most, 0

  def readable(self) -> bool:
    return True

  def readinto(self, buffer) -> int:
    view = memoryview(buffer).cast('B')
    assert self.position + len(view) <= self._most, f'read past {self._most} bytes'
    head = self._head[self.position:self.position + len(view)]
    view[:len(head)] = head
    view[len(head):] = bytes(len(view) - len(head))
    self.position += len(view)
    return len(view)


def test_a_claim_past_what_may_be_held_is_refused_before_it_is_read():
  # No bound given and the stream's size unknown: the streaming unpickler holds an item's bytes
  # until it runs them, at most 1 GiB, so a larger claim is refused at once, not once 1 GiB of
  # it is held.
  from rlds_suite.core import pickle_stream  # pylint: disable=g-import-not-at-top
  head = b'\x80\x04](\x8e' + struct.pack('<Q', 3 * GIB)
  with pytest.raises(errors.CorruptFileError, match='endless.pkl: opcode 3 claims 3221225472 '
                     'bytes, more than the 1073741824 '):
    list(pickle_stream.iter_list_items(lambda: io.BufferedReader(_EndlessZeros(head, 4 << 20)),
                                       source='endless.pkl'))


def test_an_item_running_too_many_opcodes_is_refused(monkeypatch):
  # Each opcode may make an object: 8 KiB of gzip'd EMPTY_LISTs in one item made 8M lists, ~1 GB
  # (the stream's limit counts bytes, not objects). The cap, 8M counts an item (~350 MiB), is
  # lowered here to keep the test fast; a file's items together may run more.
  from rlds_suite.core import pickle_stream  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(pickle_stream, '_MAX_ITEM_BUILT', 50_000)
  monkeypatch.setattr(safe_pickle, 'CHECK_EVERY', 1000)
  items = [list(range(start, start + 20_000)) for start in range(3)]
  data = pickle.dumps(items, protocol=4)
  assert list(pickle_stream.iter_list_items(lambda: io.BytesIO(data), source='ok.pkl')) == items
  bomb = b'\x80\x04](' + b'(' + b']' * 200_000 + b'le.'
  with pytest.raises(errors.CorruptFileError, match='bomb.pkl: item 0 builds more than 50000 '
                                                    'objects'):
    list(pickle_stream.iter_list_items(lambda: io.BytesIO(bomb), source='bomb.pkl'))


# Object bombs: one byte of pickle may make an object (and 8 KiB of gzip holds 8M such bytes), or
# one call copy a container the load already holds. Each accepted took 613 MiB or more.
_OBJECT_BOMBS = {
    # 8M empty lists in one list (613 MiB accepted through files.load_gzip_pickle).
    'lists': b'\x80\x04(' + b']' * (8 << 20) + b'l.',
    # 4M empty dicts, each in a 1-tuple.
    'dict_tuples': b'\x80\x04(' + b'}\x85' * (4 << 20) + b'l.',
    # 100k copies of a list of 100k Nones, list(x) each: 80 GB from 1 MiB.
    'copies': (b'\x80\x04(cbuiltins\nlist\n\x94](' + b'N' * 100_000 + b'e\x94' +
               b'h\x00h\x01\x85R' * 100_000 + b'l.'),
}


@pytest.mark.parametrize('bomb', ['lists', 'dict_tuples'])
@pytest.mark.parametrize('kind', ['magical', 'imitation', 'procgen'])
def test_whole_file_object_bomb_is_refused(tmp_path, kind, bomb):
  data = _OBJECT_BOMBS[bomb]
  if kind == 'magical':
    path = tmp_path / 'demo-Bomb-Demo-v0-000.pkl.gz'
    path.write_bytes(gzip.compress(data, 9))
    assert path.stat().st_size < 16 << 10
  else:
    path = tmp_path / ('demo_coinrun.pickle' if kind == 'procgen' else 'rollouts.pkl')
    path.write_bytes(data)
  outcome, peak = read_in_child(kind, path)
  assert outcome == (f'CorruptFileError: {path}: the pickle builds more than '
                     f'{safe_pickle.MAX_BUILT} objects (opcodes run, items copied; the most one '
                     f'load may build: each opcode may make an object; to allow it, set '
                     f'RLDS_SUITE_EXPANSION_FACTOR to a factor above 1)'), outcome
  assert peak < PEAK_BOUND, peak


def test_the_build_cap_is_raised_by_the_expansion_factor(monkeypatch):
  # A genuine big file past the cap (here a lowered one) loads once the user raises the factor.
  monkeypatch.setattr(safe_pickle, 'MAX_BUILT', 100_000)  # Counted every CHECK_EVERY opcodes.
  data = pickle.dumps([{} for _ in range(200_000)], protocol=4)
  with pytest.raises(errors.CorruptFileError, match='^big.pkl: the pickle builds more than 100000 '
                     r'objects .* set RLDS_SUITE_EXPANSION_FACTOR to a factor above 1\)$'):
    safe_pickle.load(io.BytesIO(data), source='big.pkl')
  monkeypatch.setenv(limits.EXPANSION_FACTOR_ENV, '8')
  assert safe_pickle.load(io.BytesIO(data), source='big.pkl') == [{}] * 200_000


def test_whole_file_copy_bomb_is_refused(tmp_path):
  path = tmp_path / 'demo_coinrun.pickle'
  path.write_bytes(_OBJECT_BOMBS['copies'])
  outcome, peak = read_in_child('procgen', path)
  assert outcome.startswith(f'CorruptFileError: {path}: the pickle builds more than '), outcome
  assert peak < PEAK_BOUND, peak


def test_copied_bytes_are_bounded_by_the_stream():
  # bytearray(x) of one memoized 1 MiB bytes, 64 times: copies past twice the stream's size.
  data = (b'\x80\x04(cbuiltins\nbytearray\n\x94\x8e' + struct.pack('<Q', 1 << 20) +
          bytes(1 << 20) + b'\x94' + b'h\x00h\x01\x85R' * 64 + b'l.')
  with pytest.raises(errors.CorruptFileError, match=r'^copies.pkl: the pickle copies more than '
                                                    f'{2 * len(data)} bytes'):
    safe_pickle.load(io.BytesIO(data), source='copies.pkl')


def test_gzip_pickle_followed_by_zeros_is_refused_early(tmp_path):
  bomb = gzip_bomb(tmp_path / 'trailing.pkl.gz', pickle.dumps({'a': 1}, protocol=4), 192)
  outcome, peak = read_in_child('gzip_pickle', bomb)
  # Refused by files.load_gzip_pickle or by the unpickler itself, before the zeros are read.
  assert outcome in (f'CorruptFileError: {bomb}: data after the end of the pickle',
                     f'CorruptFileError: {bomb}: data follows the end of the pickle'), outcome
  assert peak < PEAK_BOUND, peak


def test_zstd_bomb_frame_after_the_tar_is_refused_early(tmp_path):
  shard = tmp_path / 'bomb.tar.zst'
  shard.write_bytes(zstd(tar_bytes(shard_members())) + zstd_zeros(4 * GIB))
  assert shard.stat().st_size < 1 << 20
  outcome, peak = read_in_child('shard', shard)
  assert outcome.startswith(f'SizeLimitError: {shard}: expands to more than '), outcome
  assert peak < PEAK_BOUND, peak


def test_zstd_content_checksum_is_checked(tmp_path):
  from rlds_suite.readers import il_representations  # pylint: disable=g-import-not-at-top
  data = bytearray(zstd(tar_bytes(shard_members())))
  data[-1] ^= 0xFF  # The frame's content checksum (its last 4 bytes).
  shard = tmp_path / 'checksum.tar.zst'
  shard.write_bytes(bytes(data))
  with pytest.raises(errors.CorruptFileError, match='checksum.tar.zst: damaged or truncated '
                     'compressed data.*checksum'):
    il_representations.read(shard)


def test_junk_after_the_tar_is_refused(tmp_path):
  shard = tmp_path / 'junk.tar.zst'
  shard.write_bytes(zstd(tar_bytes(shard_members())) + zstd(b'junk' * 1000))
  with pytest.raises(errors.CorruptFileError, match='junk.tar.zst: data after the end of the tar'):
    from rlds_suite.readers import il_representations  # pylint: disable=g-import-not-at-top
    il_representations.read(shard)


@pytest.mark.parametrize('name', ['frame_000.rews.pickle', 'junk.bin'])
def test_zstd_bomb_member_is_refused_early(tmp_path, name):
  # A 4 GiB member in a 200 KiB shard: a wanted member is refused by its declared size before
  # any of it is read; an unwanted one is passed over, counted, until the limit.
  shard = shard_with_zeros_member(tmp_path / 'member.tar.zst', name, 4 * GIB)
  assert shard.stat().st_size < 1 << 20
  outcome, peak = read_in_child('shard', shard)
  assert outcome.startswith(f'SizeLimitError: {shard}: '), outcome
  if name != 'junk.bin':
    assert f'{name}: the tar member declares {4 * GIB} bytes' in outcome, outcome
  assert peak < PEAK_BOUND, peak


def test_zip_member_bomb_is_refused_by_its_declared_size(tmp_path):
  bomb = zip_bomb(tmp_path / 'bomb.npz', 'obs.npy', 224)  # 3.5 GiB from 3.5 MiB.
  outcome, peak = read_in_child('npz', bomb)
  assert outcome.startswith(f'SizeLimitError: {bomb}: obs: the zip member declares '), outcome
  assert peak < PEAK_BOUND, peak


def test_hdf5_chunk_bomb_is_refused_after_one_chunk(tmp_path):
  import h5py  # pylint: disable=g-import-not-at-top
  path = tmp_path / 'chunk.hdf5'
  with h5py.File(path, 'w') as f:
    dataset = f.create_dataset('x', shape=(1000,), dtype=np.float32, chunks=(1000,),
                               compression='gzip')
    # A zlib stream (header, deflate, Adler-32 left 0) of 3 GiB zeros for a 4000-byte chunk.
    dataset.id.write_direct_chunk((0,), b'\x78\xda' + deflate_zeros(b'', 192) + bytes(4))
  outcome, peak = read_in_child('hdf5', path)
  assert outcome.startswith(f'CorruptFileError: {path}: x: '), outcome
  assert 'does not inflate to its declared 4000 bytes' in outcome
  assert peak < PEAK_BOUND, peak


def test_expansion_limit_can_be_raised(tmp_path, monkeypatch):
  bomb = zip_bomb(tmp_path / 'small.npz', 'obs.npy', 1)  # 16 MiB from 16 KiB.
  monkeypatch.setattr(files, 'EXPANSION_FLOOR_BYTES', 1 << 20)
  with pytest.raises(errors.SizeLimitError, match='small.npz: obs: the zip member declares '
                     f'{BLOCK + 128} bytes, past the 4.* set RLDS_SUITE_EXPANSION_FACTOR to a '
                     'factor above 1'):
    files.load_npz(bomb)
  monkeypatch.setenv(limits.EXPANSION_FACTOR_ENV, '10')
  with pytest.raises(errors.CorruptFileError, match="small.npz: obs: .*Bad CRC-32 for file"):
    files.load_npz(bomb)  # Now read whole: the CRC-32 left 0 is what fails.
  monkeypatch.setenv(limits.EXPANSION_FACTOR_ENV, 'lots')
  with pytest.raises(errors.SchemaError, match='RLDS_SUITE_EXPANSION_FACTOR: expected a number'):
    files.load_npz(bomb)


def test_real_files_are_well_within_the_limits(real_data):
  for path in sorted(real_data.rglob('*')):
    if path.suffix in ('.gz', '.zst'):
      opener = files.gzip_stream if path.suffix == '.gz' else files.zstd_stream
      with opener(path) as stream:
        files.read_to_end(stream)
        assert stream.raw.position * 2 < stream.raw.limit, path
    elif path.suffix == '.npz':
      with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
          assert info.file_size * 2 < files.expansion_limit(info.compress_size, files.DEFLATE)


# ---- Crafted headers --------------------------------------------------------------------------------

def npz_with_header(path: pathlib.Path, header: dict, data: bytes) -> pathlib.Path:
  buffer = io.BytesIO()
  np.lib.format.write_array_header_1_0(buffer, header)
  with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as archive:
    archive.writestr('obs.npy', buffer.getvalue() + data)
  return path


@pytest.mark.parametrize('shape,problem', [
    ((4294967296, 4294967296), r'declares float32\[4294967296, 4294967296\] '
     r'\(73786976294838206464 bytes\), the data holds 16 bytes'),
    ((3,), r'declares float32\[3\] \(12 bytes\), the data holds 16 bytes'),
    ((5,), r'declares float32\[5\] \(20 bytes\), the data holds 16 bytes'),
    ((-1, 4), 'negative dimension'),
])
def test_npy_shapes_that_disagree_with_the_data(tmp_path, shape, problem):
  path = npz_with_header(tmp_path / 'crafted.npz',
                         {'descr': '<f4', 'fortran_order': False, 'shape': shape}, bytes(16))
  with pytest.raises(errors.CorruptFileError, match=f'crafted.npz: obs: .*{problem}') as raised:
    files.load_npz(path)
  assert len(str(raised.value).splitlines()) == 1


def test_npz_member_of_an_unsupported_zip_version_or_method(tmp_path):
  path = tmp_path / 'version.npz'
  np.savez(path, obs=np.arange(4))
  data = bytearray(path.read_bytes())
  central = data.find(b'PK\x01\x02')
  data[central + 6:central + 8] = struct.pack('<H', 177)  # "version needed to extract": 17.7.
  path.write_bytes(bytes(data))
  with pytest.raises(errors.CorruptFileError,
                     match='version.npz: damaged, truncated or unsupported zip .npz. archive: '
                     'NotImplementedError: zip file version 17.7'):
    files.load_npz(path)
  path = tmp_path / 'method.npz'
  np.savez(path, obs=np.arange(4))
  data = bytearray(path.read_bytes())
  for signature, offset in ((b'PK\x01\x02', 10), (b'PK\x03\x04', 8)):
    where = data.find(signature)
    data[where + offset:where + offset + 2] = struct.pack('<H', 99)  # Compression method 99.
  path.write_bytes(bytes(data))
  with pytest.raises(errors.CorruptFileError,
                     match='method.npz: obs: unsupported or damaged zip member: '
                     'NotImplementedError: .*compression'):
    files.load_npz(path)


def test_npz_member_stored_twice(tmp_path):
  path = tmp_path / 'twice.npz'
  with zipfile.ZipFile(path, 'w') as archive, pytest.warns(UserWarning, match='Duplicate name'):
    for value in (1, 2):
      with archive.open('obs.npy', 'w') as f:
        np.save(f, np.full(3, value))
  with pytest.raises(errors.CorruptFileError, match=r"twice.npz: members stored more than once: "
                     r"\['obs.npy'\]"):
    files.load_npz(path)


def test_npz_data_after_the_array_and_bad_crc(tmp_path):
  path = npz_with_header(tmp_path / 'extra.npz',
                         {'descr': '<f4', 'fortran_order': False, 'shape': (4,)}, bytes(20))
  with pytest.raises(errors.CorruptFileError, match='extra.npz: obs: .*holds 20 bytes'):
    files.load_npz(path)
  path = tmp_path / 'crc.npz'
  np.savez(path, obs=np.arange(1000))
  data = bytearray(path.read_bytes())
  central = data.find(b'PK\x01\x02')
  data[central + 16] ^= 0xFF  # The stored CRC-32 no longer matches the data.
  local = data.find(b'PK\x03\x04')
  data[local + 14] ^= 0xFF
  path.write_bytes(bytes(data))
  with pytest.raises(errors.CorruptFileError, match="crc.npz: obs: .*Bad CRC-32 for file 'obs.npy'"):
    files.load_npz(path)


def test_gzip_npy_header_declaring_more_than_the_file_can_hold(tmp_path):
  import gzip  # pylint: disable=g-import-not-at-top
  from rlds_suite.readers import gzip_npy  # pylint: disable=g-import-not-at-top
  header = io.BytesIO()
  np.lib.format.write_array_header_1_0(
      header, {'descr': '<u1', 'fortran_order': False, 'shape': (10**12, 84, 84)})
  path = tmp_path / '$store$_observation_ckpt.0.gz'
  path.write_bytes(gzip.compress(header.getvalue() + bytes(1000)))
  with pytest.raises(errors.SizeLimitError,
                     match=r'observation_ckpt.0.gz: observation: the .npy header declares '
                     r'7056000000000000 bytes'):
    gzip_npy.GzipNpyRows(path, field='observation')
  with pytest.raises(errors.SizeLimitError, match='observation_ckpt.0.gz: add_count: '):
    gzip_npy.load_small(path, field='add_count')


def test_gzip_npy_crc_is_checked_when_the_last_row_is_read(tmp_path):
  import gzip  # pylint: disable=g-import-not-at-top
  from rlds_suite.readers import gzip_npy  # pylint: disable=g-import-not-at-top
  buffer = io.BytesIO()
  rows = np.random.default_rng(0).integers(0, 2**31, 2_000_000, dtype=np.int32)  # 8 MB.
  np.save(buffer, rows)
  data = bytearray(gzip.compress(buffer.getvalue(), compresslevel=1, mtime=0))
  data[-8] ^= 0xFF  # The trailer's CRC-32.
  path = tmp_path / 'reward.gz'
  path.write_bytes(bytes(data))
  with gzip_npy.GzipNpyRows(path, field='reward') as stream:
    np.testing.assert_array_equal(stream.read(1_000_000), rows[:1_000_000])
    with pytest.raises(errors.CorruptFileError, match=r'reward.gz: reward: at row 1000000: .*CRC'):
      stream.read(1_000_000)


# ---- A deleted TFRecord shard -------------------------------------------------------------------------

@pytest.fixture(scope='module')
def dataset_dir(tmp_path_factory):
  sys.path.insert(0, str(REPO / 'tests'))
  import streams_data  # pylint: disable=g-import-not-at-top
  eps = streams_data.id_episodes(0, 40, min_len=5, max_len=9, seed=3)
  return streams_data.write(str(tmp_path_factory.mktemp('data')), 'deleted_shard', eps)


@pytest.fixture
def without_a_shard(dataset_dir, tmp_path):
  directory = tmp_path / 'copy'
  shutil.copytree(dataset_dir, directory)
  shard = sorted(directory.glob('*.tfrecord*'))[-1]
  shard.unlink()
  return directory, shard


@pytest.mark.parametrize('command', ['validate', 'stats', 'show', 'export'])
def test_deleted_shard_is_one_line_naming_it(without_a_shard, command, tmp_path, capsys):
  from rlds_suite import cli  # pylint: disable=g-import-not-at-top
  directory, shard = without_a_shard
  options = {'show': ['--episode', '39', '--out', str(tmp_path / 'x.png')],
             'export': ['--to', 'npz', str(tmp_path / 'x.npz')]}
  argv = [command, str(directory)] + options.get(command, [])
  assert cli.main(argv) == 2
  err = capsys.readouterr().err.strip().splitlines()
  assert err == [f'error: CorruptFileError: {shard}: missing TFRecord shard of '
                 f'deleted_shard/1.0.0 (deleted or moved?)'], err


def test_deleted_shard_in_the_numpy_stream_exit(without_a_shard):
  from rlds_suite import streams  # pylint: disable=g-import-not-at-top
  directory, shard = without_a_shard
  with pytest.raises(errors.CorruptFileError) as raised:  # Found when the stream is made.
    stream = streams.stream([str(directory)], batch_size=4, seed=0,
                            mix=streams.Mix(exhaustion=streams.Exhaustion.STOP))
    for _ in streams.as_numpy(stream):
      pass
  assert str(raised.value) == f'{shard}: missing TFRecord shard of deleted_shard/1.0.0 ' \
                              '(deleted or moved?)'


# ---- Seeded truncations and overwrites of every non-pickle fixture format ---------------------------

MUTATIONS = 60  # Per format: half truncations, half overwrites of 1-8 bytes.


def mutations(data: bytes, seed: int, count: int = MUTATIONS):
  """(label, bytes): `count` seeded truncations and byte overwrites of `data`."""
  rng = random.Random(seed)
  for i in range(count):
    if i % 2 == 0:
      cut = rng.randrange(len(data))
      yield f'truncated at {cut}', data[:cut]
    else:
      mutated = bytearray(data)
      where = []
      for _ in range(rng.randint(1, 8)):
        offset = rng.randrange(len(data))
        mutated[offset] = (mutated[offset] + rng.randrange(1, 256)) % 256
        where.append(offset)
      yield f'bytes {where} overwritten', bytes(mutated)


def digest(value) -> str:
  """A hash of nested arrays/dicts/lists/dataclasses, for 'the same data'."""
  h = hashlib.sha256()

  def add(v):
    if hasattr(v, '__dataclass_fields__'):
      v = {k: getattr(v, k) for k in v.__dataclass_fields__}
    if isinstance(v, dict):
      for k in sorted(v, key=str):
        h.update(str(k).encode())
        add(v[k])
    elif isinstance(v, (list, tuple)):
      h.update(f'[{len(v)}'.encode())
      for item in v:
        add(item)
    elif isinstance(v, np.ndarray) and v.dtype.kind != 'O':
      h.update(f'{v.dtype}{v.shape}'.encode())
      h.update(np.ascontiguousarray(v).tobytes())
    elif isinstance(v, np.ndarray):
      add(v.tolist())
    else:
      h.update(repr(v).encode())

  add(value)
  return h.hexdigest()


_CORPUS_CHILD = '''
import json, signal, sys
from rlds_suite.core import errors
sys.path.insert(0, sys.argv[2])
import test_adversarial_containers as t
reader = t.CORPUS_READERS[sys.argv[1]]

def hung(*_):
  raise TimeoutError('hung')

signal.signal(signal.SIGALRM, hung)
for path in sys.argv[3:]:
  print(json.dumps({'start': path}), flush=True)
  signal.alarm(20)
  try:
    outcome = 'data ' + t.digest(reader(path))
  except errors.RLDSSuiteError as e:
    lines = str(e).splitlines()
    outcome = f'typed {type(e).__name__}' if len(lines) == 1 and path in lines[0] else (
        'untyped: not one line naming the file: ' + str(e)[:300])
  except TimeoutError:
    outcome = 'hung'
  except Exception as e:  # pylint: disable=broad-except
    outcome = f'untyped {type(e).__name__}: {e}'[:300]
  signal.alarm(0)
  print(json.dumps({'path': path, 'outcome': outcome}), flush=True)
'''


def read_cases(kind: str, paths: list[str]) -> dict[str, str]:
  """path -> outcome of reading each of `paths` in child processes: a case that kills its child
  (a signal) is 'crashed', and the next child goes on from the case after it."""
  outcomes = {}
  while len(outcomes) < len(paths):
    todo = [p for p in paths if p not in outcomes]
    try:
      result = subprocess.run(
          [sys.executable, '-c', _CORPUS_CHILD, kind, str(REPO / 'tests')] + todo,
          capture_output=True, text=True, timeout=120, cwd=str(REPO), check=False)
      stdout, stderr = result.stdout, result.stderr
    except subprocess.TimeoutExpired as e:
      stdout, stderr = (e.stdout or b'').decode(), 'timed out'
    started = None
    for line in stdout.splitlines():
      report = json.loads(line)
      if 'start' in report:
        started = report['start']
      else:
        outcomes[report['path']] = report['outcome']
    if len(outcomes) < len(paths):
      outcomes[started or todo[0]] = f'crashed: {stderr[-300:]}'
  return outcomes


def _read_hdf5(path):
  from rlds_suite.readers import d4rl  # pylint: disable=g-import-not-at-top
  return list(d4rl.read_trajectories(path))


def _read_npz(path):
  from rlds_suite.readers import imitation  # pylint: disable=g-import-not-at-top
  return imitation.read_rollouts(path, imitation.LAYOUTS['cartpole'])


def _read_gzip_npy(path):
  from rlds_suite.readers import gzip_npy  # pylint: disable=g-import-not-at-top
  with gzip_npy.GzipNpyRows(path) as rows:
    return rows.read(rows.num_rows)


def _read_shard(path):
  from rlds_suite.readers import il_representations  # pylint: disable=g-import-not-at-top
  return il_representations.read(path).trajectories


def _read_mp4(path):
  from rlds_suite.readers import minerl  # pylint: disable=g-import-not-at-top
  return minerl.read_pov(pathlib.Path(path), 9, 6)


CORPUS_READERS = {'hdf5': _read_hdf5, 'npz': _read_npz, 'gzip_npy': _read_gzip_npy,
                  'tar.zst': _read_shard, 'mp4': _read_mp4}
# Formats whose every byte of data is under a checksum: a mutation that is accepted must give
# the same data. HDF5 (without fletcher32) and mp4 carry none.
CHECKSUMMED = {'npz', 'gzip_npy', 'tar.zst'}


def corpus_source(kind: str, tmp_path: pathlib.Path) -> pathlib.Path:
  if kind == 'hdf5':
    return FIXTURES / 'd4rl' / 'hopper_medium_replay-v2.hdf5'
  if kind == 'npz':
    return FIXTURES / 'imitation' / 'cartpole_rollouts.npz'
  if kind == 'mp4':
    return FIXTURES / 'minerl' / 'MineRLTreechopVectorObf-v0' / 'v3_fixture_a-1_0-5' / 'recording.mp4'
  if kind == 'gzip_npy':
    import gzip  # pylint: disable=g-import-not-at-top
    buffer = io.BytesIO()
    np.save(buffer, np.random.default_rng(0).integers(0, 255, (200, 8, 8), np.uint8))
    path = tmp_path / 'source.gz'
    path.write_bytes(gzip.compress(buffer.getvalue(), mtime=0))
    return path
  path = tmp_path / 'source.tar.zst'
  path.write_bytes(zstd(tar_bytes(shard_members(3))))
  return path


@pytest.mark.parametrize('kind', sorted(CORPUS_READERS))
def test_mutated_fixtures_give_a_typed_error_or_the_same_data(kind, tmp_path):
  source = corpus_source(kind, tmp_path)
  reference = digest(CORPUS_READERS[kind](str(source)))
  cases = {}
  for index, (label, mutated) in enumerate(mutations(source.read_bytes(), seed=len(kind))):
    path = tmp_path / f'm{index}{"".join(source.suffixes)}'
    path.write_bytes(mutated)
    cases[str(path)] = label
  results = {}
  for path, outcome in read_cases(kind, list(cases)).items():
    if outcome == f'data {reference}':
      outcome = 'same data'
    elif outcome.startswith('data ') and kind not in CHECKSUMMED:
      outcome = 'other data (no checksum in this format)'
    results[cases[path]] = outcome
  bad = {label: outcome for label, outcome in results.items()
         if not outcome.startswith(('typed ', 'same data', 'other data (no checksum'))}
  assert not bad, bad
  assert any(outcome.startswith('typed ') for outcome in results.values()), results


def test_mutated_tfrecord_shards_give_a_typed_error_or_the_same_data(dataset_dir, tmp_path):
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top
  reference = digest(list(datasets.read_episodes(dataset_dir)))
  shard = sorted(pathlib.Path(dataset_dir).glob('*.tfrecord*'))[0]
  outcomes = []
  for index, (label, mutated) in enumerate(mutations(shard.read_bytes(), seed=7, count=20)):
    directory = tmp_path / str(index)
    shutil.copytree(dataset_dir, directory)
    (directory / shard.name).write_bytes(mutated)
    try:
      outcome = digest(list(datasets.read_episodes(str(directory))))
      outcomes.append((label, 'same data' if outcome == reference else 'other data'))
    except errors.CorruptFileError as e:
      assert str(e).startswith(str(directory / shard.name)), (label, str(e))
      outcomes.append((label, 'typed'))
  assert all(outcome in ('typed', 'same data') for _, outcome in outcomes), outcomes
  assert sum(outcome == 'typed' for _, outcome in outcomes) >= 10, outcomes
