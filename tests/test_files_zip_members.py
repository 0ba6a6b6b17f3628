"""readers.files reads deflated zip (npz) members with ISA-L: the same bytes as zipfile, and the
same refusals (CRC-32, declared size, local header) as typed errors naming the member."""

import struct
import zipfile

import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.readers import files


def _archive(path, data: bytes, method=zipfile.ZIP_DEFLATED):
  with zipfile.ZipFile(path, 'w', method) as archive:
    archive.writestr('obs.npy', data)
  return path


def _read(path) -> bytes:
  with files.open_zip(path) as archive, files.zip_member(archive, 'obs.npy', field='obs') as f:
    return f.read()


def _patch_central(path, offset: int, fmt: str, value: int) -> None:
  """Rewrites a field of the member's central directory record (offset from its signature)."""
  data = bytearray(path.read_bytes())
  at = data.rindex(b'PK\x01\x02') + offset
  struct.pack_into(fmt, data, at, value)
  path.write_bytes(bytes(data))


@pytest.mark.parametrize('size', [0, 1, 100_000, 3_000_000])
def test_deflated_member_reads_as_zipfile_reads_it(tmp_path, size):
  rng = np.random.default_rng(size)
  data = (rng.integers(0, 4, size, dtype=np.uint8) * 60).tobytes()
  path = _archive(tmp_path / 'a.npz', data)
  assert _read(path) == data
  with zipfile.ZipFile(path) as archive, archive.open('obs.npy') as f:
    assert f.read() == data


def test_stored_member_is_read_by_zipfile(tmp_path):
  path = _archive(tmp_path / 'stored.npz', b'abc' * 1000, zipfile.ZIP_STORED)
  assert _read(path) == b'abc' * 1000


def test_crc_mismatch_is_refused(tmp_path):
  path = _archive(tmp_path / 'crc.npz', bytes(range(256)) * 400)
  with zipfile.ZipFile(path) as archive:
    crc = archive.getinfo('obs.npy').CRC
  _patch_central(path, 16, '<I', crc ^ 1)
  with pytest.raises(errors.CorruptFileError, match=r'crc.npz: obs: .*Bad CRC-32'):
    _read(path)


@pytest.mark.parametrize('change', [-1, 1])
def test_declared_size_other_than_the_data_is_refused(tmp_path, change):
  data = bytes(range(256)) * 400
  path = _archive(tmp_path / 'size.npz', data)
  _patch_central(path, 24, '<I', len(data) + change)
  with pytest.raises(errors.CorruptFileError, match=r'size.npz: obs: damaged or truncated'):
    _read(path)


def test_local_header_of_another_name_is_refused(tmp_path):
  path = _archive(tmp_path / 'name.npz', b'x' * 5000)
  data = bytearray(path.read_bytes())
  data[30:30 + len('obs.npy')] = b'abc.npy'  # The local header's copy of the name.
  path.write_bytes(bytes(data))
  with pytest.raises(errors.CorruptFileError, match=r'name.npz: obs: .*local file header'):
    _read(path)
