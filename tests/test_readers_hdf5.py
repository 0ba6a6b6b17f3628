"""rlds_suite.readers.hdf5: array access with typed errors, declared sizes checked, bounded chunks."""

import h5py
import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.readers import hdf5


@pytest.fixture
def always_parallel(monkeypatch):
  monkeypatch.setattr(hdf5, 'PARALLEL_READ_BYTES', 0)


def write(path, **datasets):
  with h5py.File(path, 'w') as f:
    for key, (data, options) in datasets.items():
      f.create_dataset(key, data=data, **options)
  return path


ARRAYS = {
    'columns': np.arange(1003 * 7, dtype=np.float32).reshape(1003, 7) / 3,
    'flags': np.arange(1003) % 3 == 0,
    'doubles': np.linspace(-1, 1, 2005).reshape(401, 5),
    'ints': np.arange(-500, 503, dtype=np.int64),
}


@pytest.mark.parametrize('key', sorted(ARRAYS))
def test_parallel_gzip_read_equals_h5py(tmp_path, always_parallel, key):
  # Chunks that do not divide the shape: edge chunks are cropped.
  chunks = (100,) + ARRAYS[key].shape[1:2] if ARRAYS[key].ndim == 1 else (64, 2)
  path = write(tmp_path / 'a.hdf5', x=(ARRAYS[key], dict(compression='gzip', chunks=chunks)))
  with h5py.File(path, 'r') as f:
    assert hdf5._read_chunks(f['x']) is not None  # pylint: disable=protected-access
    array = hdf5.read_array(f, 'x', ranks=(1, 2))
  np.testing.assert_array_equal(array, ARRAYS[key])
  assert array.dtype == ARRAYS[key].dtype


@pytest.mark.parametrize('options', [
    dict(),  # Contiguous.
    dict(compression='lzf'),
])
def test_other_layouts_are_read_by_h5py(tmp_path, always_parallel, options):
  path = write(tmp_path / 'a.hdf5', x=(ARRAYS['columns'], options))
  with h5py.File(path, 'r') as f:
    assert hdf5._read_chunks(f['x']) is None  # pylint: disable=protected-access
    np.testing.assert_array_equal(hdf5.read_array(f, 'x', ranks=(2,)), ARRAYS['columns'])


@pytest.mark.parametrize('parallel', [True, False])
@pytest.mark.parametrize('options', [
    dict(compression='gzip', shuffle=True, chunks=(100, 3)),
    dict(shuffle=True, chunks=(64, 7)),
    dict(chunks=(10, 7)),  # Chunked without compression.
])
def test_shuffled_and_raw_chunks_are_read_chunk_by_chunk(tmp_path, monkeypatch, options, parallel):
  monkeypatch.setattr(hdf5, 'PARALLEL_READ_BYTES', 0 if parallel else 1 << 40)
  path = write(tmp_path / 'a.hdf5', x=(ARRAYS['columns'], options))
  with h5py.File(path, 'r') as f:
    assert hdf5._read_chunks(f['x']) is not None  # pylint: disable=protected-access
    np.testing.assert_array_equal(hdf5.read_array(f, 'x', ranks=(2,)), ARRAYS['columns'])


def test_unwritten_chunks_fall_back_to_fill_values(tmp_path, always_parallel):
  path = tmp_path / 'a.hdf5'
  with h5py.File(path, 'w') as f:
    f.create_dataset('x', shape=(100,), dtype=np.float32, chunks=(10,), compression='gzip',
                     fillvalue=7)
    f['x'][:10] = 1
  with h5py.File(path, 'r') as f:
    array = hdf5.read_array(f, 'x', ranks=(1,))
  np.testing.assert_array_equal(array, np.r_[np.ones(10), np.full(90, 7)])


def test_damaged_chunk_data(tmp_path, always_parallel):
  big = np.random.default_rng(0).standard_normal((20000, 4))
  path = write(tmp_path / 'a.hdf5', x=(big, dict(compression='gzip', chunks=(1000, 4))))
  data = bytearray(path.read_bytes())
  with h5py.File(path, 'r') as f:
    chunks = []
    f['x'].id.chunk_iter(chunks.append)
  middle = chunks[-1].byte_offset + chunks[-1].size // 2
  data[middle:middle + 64] = bytes(64)  # The file keeps its size; one chunk's stream is broken.
  path.write_bytes(bytes(data))
  with pytest.raises(errors.CorruptFileError) as raised:
    with hdf5.open_file(path) as f:
      hdf5.read_array(f, 'x', ranks=(2,))
  assert raised.value.field == 'x' and raised.value.path == str(path)


def test_schema_errors_name_the_dataset(tmp_path):
  path = write(tmp_path / 'a.hdf5', x=(ARRAYS['columns'], {}), s=(np.array([b'a', b'b']), {}))
  with hdf5.open_file(path) as f:
    with pytest.raises(errors.SchemaError, match='missing') as raised:
      hdf5.read_array(f, 'absent', ranks=(1,))
    assert raised.value.field == 'absent'
    with pytest.raises(errors.SchemaError, match='rank'):
      hdf5.read_array(f, 'x', ranks=(1,))
    with pytest.raises(errors.SchemaError, match='dtype'):
      hdf5.read_array(f, 's', ranks=(1,))
  assert sorted(hdf5.dataset_names(h5py.File(path, 'r'))) == ['s', 'x']


def test_open_file_errors(tmp_path):
  with pytest.raises(errors.EmptyInputError):
    with hdf5.open_file(tmp_path / 'absent.hdf5'):
      pass
  (tmp_path / 'text.hdf5').write_text('not hdf5')
  with pytest.raises(errors.CorruptFileError, match='HDF5'):
    with hdf5.open_file(tmp_path / 'text.hdf5'):
      pass


def test_a_missing_object_and_our_own_errors_are_not_called_damage(tmp_path):
  path = write(tmp_path / 'a.hdf5', x=(ARRAYS['ints'], {}))
  # h5py's KeyError for a name the file lacks: a missing field, named, not a damaged file.
  with pytest.raises(errors.SchemaError, match='missing from the file') as raised:
    with hdf5.open_file(path) as f:
      f['timeouts']  # pylint: disable=pointless-statement
  assert raised.value.field == 'timeouts' and raised.value.path == str(path)
  with pytest.raises(errors.SchemaError, match='missing from the file'):
    with hdf5.open_file(path) as f:
      f['infos/qpos']  # pylint: disable=pointless-statement
  # The same types raised by our own code are shown as they are (a bug is not the file's fault).
  for error in (KeyError('observations'), ValueError('bad reshape'), TypeError('not callable')):
    with pytest.raises(type(error)) as raised:
      with hdf5.open_file(path):
        raise error
    assert raised.value is error
  # What h5py itself raises on a damaged file still is a CorruptFileError naming it.
  with pytest.raises(errors.CorruptFileError, match='damaged HDF5') as raised:
    with hdf5.open_file(path) as f:
      f.id.close()  # A closed identifier: h5py raises from its own code, as on damaged metadata.
      f['x'].shape  # pylint: disable=pointless-statement
  assert raised.value.path == str(path)


def test_a_dataset_declared_larger_than_its_data_is_refused_before_reading(tmp_path):
  # 1e9 x 17 float32 declared, nothing written: h5py would allocate 63 GiB of fill values.
  path = tmp_path / 'declared.hdf5'
  with h5py.File(path, 'w') as f:
    f.create_dataset('observations', shape=(10**9, 17), dtype=np.float32, chunks=(1000, 17),
                     compression='gzip')
    f.create_dataset('contiguous', shape=(10**9, 17), dtype=np.float32)
  for key in ('observations', 'contiguous'):
    with pytest.raises(errors.SizeLimitError,
                       match=rf'declared.hdf5: {key}: declares float32\[1000000000, 17\] from 0 '
                       'stored bytes'):
      with hdf5.open_file(path) as f:
        hdf5.read_array(f, key, ranks=(2,))


def test_a_chunk_that_inflates_past_its_size_is_refused(tmp_path, always_parallel):
  import zlib  # pylint: disable=g-import-not-at-top
  path = tmp_path / 'chunk.hdf5'
  with h5py.File(path, 'w') as f:
    dataset = f.create_dataset('x', shape=(1000,), dtype=np.float32, chunks=(1000,),
                               compression='gzip')
    dataset.id.write_direct_chunk((0,), zlib.compress(bytes(64 << 20), 1))
  with pytest.raises(errors.CorruptFileError,
                     match='chunk.hdf5: x: .*does not inflate to its declared 4000 bytes'):
    with hdf5.open_file(path) as f:
      hdf5.read_array(f, 'x', ranks=(1,))


def test_a_chunk_that_inflates_short_of_its_size_is_refused(tmp_path, always_parallel):
  # HDF5 deflates whole chunks (edge chunks padded): a shorter stream is damage (h5py would fill
  # the missing tail with whatever its buffer held).
  import zlib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  path = tmp_path / 'short.hdf5'
  with h5py.File(path, 'w') as f:
    dataset = f.create_dataset('x', shape=(1000,), dtype=np.float32, chunks=(1000,),
                               compression='gzip')
    dataset.id.write_direct_chunk((0,), zlib.compress(np.arange(999, dtype=np.float32).tobytes()))
  with pytest.raises(errors.CorruptFileError,
                     match=r'short.hdf5: x: .*chunk at \(0,\) does not inflate to its declared '
                     r'4000 bytes: zlib data inflates to 3996 bytes, expected 4000'):
    with hdf5.open_file(path) as f:
      hdf5.read_array(f, 'x', ranks=(1,))
