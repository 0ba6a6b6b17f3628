"""A non-Beam build and its validation pass (what `rlds-suite build` runs) never import TensorFlow
(~0.8 GiB and ~6 s), and give the same shards, episodes and validation report as TensorFlow's own
writer and tf.data reader. So do the RL Unplugged builders, which read GZIP TFRecords of
tf.train.Example, with Beam (the DirectRunner `rlds-suite build` uses) and without.

The build runs in a subprocess whose import system refuses TensorFlow: this test process has
imported it already.
"""

import concurrent.futures
import io
import json
import os
import pathlib
import struct
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest
import tensorflow as tf

from rlds_suite.core import errors
from rlds_suite.core import validation
from rlds_suite.readers import bounded_inflate
from rlds_suite.tfds import compression
from rlds_suite.tfds import datasets
from rlds_suite.tfds import example_wire
from rlds_suite.tfds import png_deflate
from rlds_suite.tfds import provenance
from rlds_suite.tfds import shard_reader
from rlds_suite.tfds import tfrecord_files
from rlds_suite.tfds import writing

from tests import build_helpers

REPO = pathlib.Path(__file__).resolve().parents[1]

# Builds tests/build_helpers.Counting and validates it as `rlds-suite build` does; any attempt to
# import TensorFlow raises (importlib.util.find_spec, a mere look-up, is allowed).
CHILD = textwrap.dedent('''
    import importlib.abc, json, sys
    sys.path.insert(0, sys.argv[1])

    class NoTensorFlow(importlib.abc.MetaPathFinder):
      def find_spec(self, name, path, target=None):
        if name.split('.')[0] != 'tensorflow':
          return None
        frame = sys._getframe(1)
        while frame is not None:
          if 'importlib' in frame.f_code.co_filename and frame.f_code.co_name == 'find_spec':
            return None
          frame = frame.f_back
        raise ImportError('tensorflow imported during a build')

    sys.meta_path.insert(0, NoTensorFlow())
    from rlds_suite.cli import validate
    from rlds_suite.tfds import datasets
    from tests import build_helpers
    builder = build_helpers.Counting(data_dir=sys.argv[2], episodes=int(sys.argv[3]))
    builder.writer_workers = 2
    builder.download_and_prepare()
    report = datasets.validate(builder, progress_bar=True)
    print(json.dumps({'tensorflow': 'tensorflow' in sys.modules, 'summary': report.summary()}))
    ''')

EPISODES = 12

# The same for rlu_atari and rlu_control_suite over their dummy_data, as `rlds-suite build` runs
# them (cli/build.py: the direct runner's options, datasets.build, then datasets.validate).
RLU_CHILD = CHILD.split('from rlds_suite.cli import validate')[0] + textwrap.dedent('''
    from rlds_suite.tfds import beam, datasets
    results = []
    for name, manual_dir in json.loads(sys.argv[3]):
      for with_beam in (True, False):
        with beam.options_for('direct', 2) as options:
          builder = datasets.build(name, manual_dir=manual_dir,
                                   data_dir=f'{sys.argv[2]}/{with_beam}', beam_options=options,
                                   beam=with_beam, num_shards=2)
        report = datasets.validate(builder, progress_bar=True)
        results.append({'name': name, 'beam': with_beam, 'summary': report.summary()})
    print(json.dumps({'tensorflow': 'tensorflow' in sys.modules, 'builds': results}))
    ''')
RLU_BUILDS = {'rlds_suite_rlu_atari/Pong_run_1': ('builders/rlu_atari/dummy_data', 3),
              'rlds_suite_rlu_control_suite/cartpole_swingup': (
                  'builders/rlu_control_suite/dummy_data', 2)}


@pytest.fixture(scope='module')
def built(tmp_path_factory):
  """(version directory, the child's output) of a build without TensorFlow."""
  data_dir = tmp_path_factory.mktemp('no_tf')
  out = subprocess.run([sys.executable, '-c', CHILD, str(REPO), str(data_dir), str(EPISODES)],
                       capture_output=True, text=True, check=False, timeout=300,
                       env={**os.environ, 'PYTHONPATH': str(REPO)})
  assert out.returncode == 0, out.stderr[-3000:]
  return data_dir / 'counting' / '1.0.0', json.loads(out.stdout.strip().splitlines()[-1])


def test_build_and_validation_do_not_import_tensorflow(built):
  _, result = built
  assert result['tensorflow'] is False
  assert result['summary']['episodes'] == EPISODES


def test_rl_unplugged_builds_and_validation_do_not_import_tensorflow(tmp_path):
  sources = [(name, str(REPO / manual_dir)) for name, (manual_dir, _) in RLU_BUILDS.items()]
  out = subprocess.run([sys.executable, '-c', RLU_CHILD, str(REPO), str(tmp_path),
                        json.dumps(sources)], capture_output=True, text=True, check=False,
                       timeout=300, env={**os.environ, 'PYTHONPATH': str(REPO)})
  assert out.returncode == 0, out.stderr[-3000:]
  result = json.loads(out.stdout.strip().splitlines()[-1])
  assert result['tensorflow'] is False
  assert [(b['name'], b['beam']) for b in result['builds']] == [
      (name, beam) for name in RLU_BUILDS for beam in (True, False)]
  for build in result['builds']:
    assert build['summary']['valid'], build
    assert build['summary']['episodes'] == RLU_BUILDS[build['name']][1], build


def test_validation_without_tensorflow_equals_the_tf_data_one(built):
  version_dir, result = built
  builder = datasets.load_builder(str(version_dir))
  with_tf = validation.validate_episodes(datasets.read_episodes(builder),
                                         name=builder.info.full_name)
  assert with_tf.summary() == result['summary']
  assert with_tf.violations  # The fixture's terminal discounts: findings to compare.


def test_numpy_episodes_equal_tfds_ones_leaf_by_leaf(built):
  version_dir, _ = built
  builder = datasets.load_builder(str(version_dir))
  assert shard_reader.can_read(builder.info)
  got = list(shard_reader.read_episodes(builder.info))
  expected = build_helpers.built_episodes(str(version_dir))
  build_helpers.assert_same_episodes(got, expected)
  for a, b in zip(got, expected):
    flat_a = build_helpers.tfds.core.utils.flatten_nest_dict(a)
    flat_b = build_helpers.tfds.core.utils.flatten_nest_dict(b)
    assert {k: np.asarray(v).dtype for k, v in flat_a.items()} == {
        k: np.asarray(v).dtype for k, v in flat_b.items()}


def test_shards_equal_those_of_the_tensorflow_writer(built, tmp_path):
  version_dir, _ = built
  for shard in sorted(version_dir.glob('*.tfrecord*')):
    records = list(tfrecord_files.read_records(shard))
    rewritten = tmp_path / shard.name
    with tf.io.TFRecordWriter(str(rewritten)) as writer:
      for record in records:
        writer.write(record)
    assert rewritten.read_bytes() == shard.read_bytes()


@pytest.mark.parametrize('most_per_writev', [None, 1000])
def test_record_writer_frames_as_tensorflow_does(tmp_path, monkeypatch, most_per_writev):
  # Frames go out in writev batches (over 1024 pieces here: two batches); short writes (at most
  # `most_per_writev` bytes, as a full pipe or a signal may cut them) are written on.
  records = [b'', b'x', bytes(range(256)) * 300] + [bytes([i % 256]) * i for i in range(300)]
  if most_per_writev:
    writev = os.writev
    def short_writev(fd, pieces):
      head, left = [], most_per_writev
      for piece in pieces:
        head.append(memoryview(piece)[:left])
        left -= len(head[-1])
        if not left:
          break
      return writev(fd, head)
    monkeypatch.setattr(tfrecord_files.os, 'writev', short_writev)
  ours = tmp_path / 'ours.tfrecord'
  writer = tfrecord_files.RecordWriter(ours)
  for record in records:
    writer.write(record)
  writer.close()
  assert ours.read_bytes() == _tensorflow_file(tmp_path / 'tf.tfrecord', records)
  assert list(tfrecord_files.read_records(ours)) == records


def _tensorflow_file(path: pathlib.Path, records: list[bytes]) -> bytes:
  """The bytes of `records` written by tf.io.TFRecordWriter at `path`."""
  with tf.io.TFRecordWriter(str(path)) as writer:
    for record in records:
      writer.write(record)
  return path.read_bytes()


def test_frames_written_a_piece_at_a_time_are_the_file_and_digest_tensorflow_would_have(
    tmp_path, monkeypatch):
  # Framed records (a worker's, in shared memory) are hashed and written in pieces that cut
  # records anywhere: the file equals TensorFlow's and the digest remembered for it equals the
  # file's, records written one by one before and after included.
  monkeypatch.setattr(tfrecord_files, '_HASHED_BYTES', 7)
  records = [bytes([i % 256]) * i for i in range(40)]
  framed = bytearray()
  for record in records[5:30]:
    header, footer = tfrecord_files.frame_parts(record)
    framed += header + record + footer
  ours = tmp_path / 'ours.tfrecord'
  writer = tfrecord_files.RecordWriter(ours)
  for record in records[:5]:
    writer.write(record)
  writer.write_frames(tfrecord_files.Frames(memoryview(framed), [len(r) for r in records[5:30]]))
  for record in records[30:]:
    writer.write(record)
  writer.close()
  assert ours.read_bytes() == _tensorflow_file(tmp_path / 'tf.tfrecord', records)
  assert provenance.digest(ours, trust_written=True) == provenance.digest(ours)


@pytest.mark.parametrize('damage', ['flip', 'truncate'])
def test_a_damaged_shard_is_a_corrupt_file_error_naming_it(built, tmp_path, damage):
  version_dir, _ = built
  copy = tmp_path / 'copy'
  subprocess.run(['cp', '-r', str(version_dir), str(copy)], check=True)
  shard = sorted(copy.glob('*.tfrecord*'))[0]
  data = bytearray(shard.read_bytes())
  if damage == 'flip':
    data[len(data) // 2] ^= 0xFF
  else:
    del data[-7:]
  shard.write_bytes(bytes(data))
  with pytest.raises(errors.CorruptFileError) as raised:
    datasets.validate(str(copy))
  assert shard.name in str(raised.value)


def test_varints_decode_what_the_writer_encodes():
  values = np.array([0, 1, 127, 128, 300, 2**31 - 1, -1, -2**63, 2**63 - 1, 5], np.int64)
  encoded, _ = example_wire.varints(values)
  np.testing.assert_array_equal(shard_reader.decode_varints(encoded), values)
  with pytest.raises(ValueError):
    shard_reader.decode_varints(encoded[:-1] | 0x80)


def test_zlib_rows_and_png_scanlines_inflate_no_further_than_their_declared_size(monkeypatch):
  from isal import isal_zlib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  row = np.arange(84 * 84, dtype=np.uint8).reshape(84, 84)
  assert (bounded_inflate.inflate_exactly(isal_zlib.compress(row.tobytes()), row.nbytes) ==
          row.tobytes())
  bomb = isal_zlib.compress(bytes(256 << 20))  # 256 MiB of zeros in ~250 KiB.
  with pytest.raises(ValueError, match=f'more than {row.nbytes + 1} bytes, expected {row.nbytes}'):
    bounded_inflate.inflate_exactly(bomb, row.nbytes)
  with pytest.raises(ValueError, match='expected'):
    bounded_inflate.inflate_exactly(isal_zlib.compress(row.tobytes()[:-1]), row.nbytes)
  # A PNG whose header claims more rows than the feature declares is refused before inflating.
  tall = compression.png_bytes(np.zeros((4096, 84, 1), np.uint8))
  monkeypatch.setattr(bounded_inflate, 'inflate_exactly',
                      lambda *_: pytest.fail('inflated a wrong-sized PNG'))
  with pytest.raises(ValueError, match=r'PNG of shape \[4096, 84, 1\], expected \[84, 84, 1\]'):
    shard_reader.decode_png(tall, (84, 84, 1), np.dtype(np.uint8))


@pytest.mark.parametrize('dtype,channels', [(np.uint8, 1), (np.uint8, 3), (np.uint16, 1),
                                            (np.uint16, 4)])
def test_png_decodes_as_tensorflow_does_filtered_or_not(dtype, channels):
  rng = np.random.default_rng(channels)
  image = (rng.integers(0, 4, (9, 7, channels)) * 1000 % np.iinfo(dtype).max).astype(dtype)
  image[:, 3:] = image[:, :1]  # Rows whose filters (libpng's choice) differ.
  for png in (compression.png_bytes(image), tf.io.encode_png(image).numpy()):
    decoded = shard_reader.decode_png(png, image.shape, np.dtype(dtype))
    expected = tf.io.decode_png(png, channels=channels, dtype=tf.as_dtype(dtype)).numpy()
    np.testing.assert_array_equal(decoded, expected)
    assert decoded.dtype == dtype


def _png_with_filters(image: np.ndarray, filters: list[int]) -> bytes:
  """A PNG of `image` whose row i is filtered by PNG filter type filters[i % len(filters)] (0-4:
  None, Sub, Up, Average, Paeth, as the PNG specification defines them), one IDAT."""
  height, width, channels = image.shape
  raw = np.ascontiguousarray(image, image.dtype.newbyteorder('>')).view(np.uint8)
  raw = raw.reshape(height, -1).astype(np.int64)
  pixel_bytes = channels * image.dtype.itemsize
  left = np.pad(raw, ((0, 0), (pixel_bytes, 0)))[:, :-pixel_bytes]
  above = np.pad(raw, ((1, 0), (0, 0)))[:-1]
  above_left = np.pad(left, ((1, 0), (0, 0)))[:-1]
  guess = left + above - above_left
  near_left, near_above = abs(guess - left), abs(guess - above)
  paeth = np.where((near_left <= near_above) & (near_left <= abs(guess - above_left)), left,
                   np.where(near_above <= abs(guess - above_left), above, above_left))
  predictions = [0 * raw, left, above, (left + above) // 2, paeth]
  types = np.resize(np.array(filters, np.uint8), height)
  rows = np.empty((height, raw.shape[1] + 1), np.uint8)
  rows[:, 0] = types
  rows[:, 1:] = (raw - np.choose(types[:, None], predictions)) % 256
  return _png_file(image.shape, image.dtype, zlib.compress(rows))


def _png_file(shape: tuple[int, ...], dtype: np.dtype, idat: bytes) -> bytes:
  """A PNG file of one IDAT chunk holding `idat`, with the header of a `shape` `dtype` image."""
  chunk = lambda kind, body: (len(body).to_bytes(4, 'big') + kind + body +
                              zlib.crc32(kind + body).to_bytes(4, 'big'))
  colour = {1: 0, 2: 4, 3: 2, 4: 6}[shape[2]]
  header = struct.pack('>IIBBBBB', shape[1], shape[0], 8 * np.dtype(dtype).itemsize, colour, 0, 0,
                       0)
  return (b'\x89PNG\r\n\x1a\n' + chunk(b'IHDR', header) + chunk(b'IDAT', idat) +
          chunk(b'IEND', b''))


def _assert_decodes_as_decoders_do(png: bytes, image: np.ndarray) -> None:
  """decode_png == the image == TensorFlow's decode == Pillow's (8-bit)."""
  decoded = shard_reader.decode_png(png, image.shape, image.dtype)
  assert decoded.dtype == image.dtype
  np.testing.assert_array_equal(decoded, image)
  np.testing.assert_array_equal(decoded, tf.io.decode_png(  # channels=0: the file's (2: 0 only).
      png, channels=0, dtype=tf.as_dtype(image.dtype)).numpy())
  if image.dtype == np.uint8:
    from PIL import Image  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    with Image.open(io.BytesIO(png)) as pillow:
      np.testing.assert_array_equal(decoded, np.asarray(pillow).reshape(image.shape))


def _images() -> list[np.ndarray]:
  """Noise (every byte value) and smooth images, 8- and 16-bit, 1-4 channels."""
  rng = np.random.default_rng(7)
  images = []
  for dtype, channels in ((np.uint8, 1), (np.uint8, 2), (np.uint8, 3), (np.uint8, 4),
                          (np.uint16, 1), (np.uint16, 3)):
    top = np.iinfo(dtype).max
    images.append(rng.integers(0, top, (11, 9, channels), endpoint=True).astype(dtype))
    ramp = np.add.outer(np.arange(11), np.arange(9))[:, :, None] * 37 + np.arange(channels)
    images.append((ramp * (1 if dtype == np.uint8 else 251) % (top + 1)).astype(dtype))
  return images


@pytest.mark.parametrize('filters', [[0], [1], [2], [3], [4], [2, 2, 0, 1, 2, 4, 3, 2, 2, 1]],
                         ids=['none', 'sub', 'up', 'average', 'paeth', 'mixed'])
def test_png_rows_of_every_filter_type_decode_as_pillow_and_tensorflow_do(filters):
  for image in _images():
    _assert_decodes_as_decoders_do(_png_with_filters(image, filters), image)


def test_pngs_of_pillow_tensorflow_and_our_writer_decode_as_decoders_do():
  from PIL import Image  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  for image in _images():
    pngs = [tf.io.encode_png(image).numpy()]
    if image.dtype == np.uint8:  # Pillow writes adaptive filters: Sub/Up on ramps, Paeth, Average.
      mode = {1: 'L', 2: 'LA', 3: 'RGB', 4: 'RGBA'}[image.shape[2]]
      for options in ({}, {'optimize': True}, {'compress_level': 1}):
        out = io.BytesIO()
        Image.fromarray(image[:, :, 0] if mode == 'L' else image, mode).save(out, 'PNG', **options)
        pngs.append(out.getvalue())
    if image.shape[2] != 2:
      pngs += [compression.png_rows(image[None], compression.PngEncoder(scanline_filter=name))[0]
               for name in compression.FILTERS]
    for png in pngs:
      _assert_decodes_as_decoders_do(png, image)


def test_pngs_through_the_reused_scanline_buffer_are_each_columns_own(monkeypatch):
  # Columns of other shapes and sizes, one after another and from two threads at once, through
  # each thread's reused buffer (or a fresh one above its size): each PNG equals the one written
  # from a fresh buffer, and decodes to its image.
  rng = np.random.default_rng(4)
  columns = [rng.integers(0, 256, shape, endpoint=False).astype(dtype) for shape, dtype in (
      ((6, 12, 10, 3), np.uint8), ((2, 5, 7, 1), np.uint8), ((4, 12, 10, 3), np.uint8),
      ((3, 9, 4, 4), np.uint16), ((1, 12, 10, 3), np.uint8))]
  encoder = compression.PngEncoder(scanline_filter='up')
  monkeypatch.setattr(compression, '_REUSED_BYTES', 0)  # Every buffer fresh.
  expected = [compression.png_rows(column, encoder) for column in columns]
  monkeypatch.setattr(compression, '_REUSED_BYTES', 5 * 12 * 31)  # Column 0's is fresh.

  def encode_all(order):
    return [(i, compression.png_rows(columns[i], encoder)) for i in order]

  with concurrent.futures.ThreadPoolExecutor(2) as pool:
    runs = list(pool.map(encode_all, [range(5), range(4, -1, -1), [1, 0, 2, 0, 4, 3]]))
  for run in runs:
    for i, pngs in run:
      assert pngs == expected[i]
  for pngs, column in zip(expected, columns):
    for png, image in zip(pngs, column):
      _assert_decodes_as_decoders_do(png, image)


@pytest.mark.skipif(not png_deflate.available(), reason="ISA-L's C API cannot be called here")
def test_isal_table_pngs_decode_even_where_the_table_lacks_their_symbols():
  # The table is made from flat images; the column holds noise, ramps and 16-bit images: symbols
  # the table never saw still decode, in TensorFlow's and Pillow's decoders alike.
  encoder = compression.PngEncoder('isal-table', 0)
  for image in _images():
    if image.shape[2] == 2:  # Grey+alpha: not a channel count our writer takes.
      continue
    flat = np.zeros((2,) + image.shape, image.dtype)
    column = np.stack([image, image[::-1], np.zeros_like(image)])
    for table_images in (None, flat):
      for png, expected in zip(compression.png_rows(column, encoder, table_images), column):
        _assert_decodes_as_decoders_do(png, expected)


def _png_item_columns() -> list[np.ndarray]:
  """Columns whose PNGs are long and short: a 12x10 black frame's PNG is under 128 bytes, so its
  BytesList item header is a byte shorter than the room left for the longest (stored) stream."""
  rng = np.random.default_rng(5)
  noise = rng.integers(0, 256, (12, 10, 1), endpoint=False).astype(np.uint8)
  black = np.zeros((12, 10, 1), np.uint8)
  ramp = (np.add.outer(np.arange(12), np.arange(10)) * 9 % 256).astype(np.uint8)[:, :, None]
  return [np.stack([noise, black, ramp, black, noise]), np.stack([black]),
          rng.integers(0, 256, (3, 20, 30, 3), endpoint=False).astype(np.uint8)]


@pytest.mark.parametrize('encoder', [compression.BUILD, compression.RECORDING,
                                     compression.PngEncoder('zlib', 6, 'up')],
                         ids=['build', 'recording', 'zlib-up'])
def test_png_items_parse_as_a_bytes_list_of_the_png_files(encoder):
  # The items a record takes in one piece: a BytesList message of each image's PNG file, equal to
  # png_rows' files, short headers and long ones alike.
  for column in _png_item_columns():
    data, bounds = compression.png_items(column, encoder, None, example_wire.bytes_item_header)
    assert bounds[0] == 0 and bounds[-1] == len(data) and len(bounds) == len(column) + 1
    pngs = compression.png_rows(column, encoder)
    assert list(tf.train.BytesList.FromString(data).value) == pngs
    for png, image in zip(pngs, column):
      _assert_decodes_as_decoders_do(png, image)
  assert len(compression.png_rows(np.zeros((1, 12, 10, 1), np.uint8), compression.BUILD)[0]) < 128
  assert compression.png_items(np.zeros((0, 12, 10, 1), np.uint8)) == (b'', [0])


def test_png_items_make_room_for_streams_longer_than_stored_blocks(monkeypatch):
  # A compressor may return more than ISA-L's stored-block bound (a stored block per 8 bytes
  # here): the buffer grows and every file stays whole.
  def padded(data, level):
    stream = zlib.compressobj(level)
    data = bytes(data)
    return b''.join(stream.compress(data[i:i + 8]) + stream.flush(zlib.Z_FULL_FLUSH)
                    for i in range(0, len(data), 8)) + stream.flush()

  compressors = compression._COMPRESSORS  # pylint: disable=protected-access
  monkeypatch.setitem(compressors, 'zlib', lambda: padded)
  for column in _png_item_columns():
    data, bounds = compression.png_items(column, compression.PngEncoder('zlib', 0), None,
                                         example_wire.bytes_item_header)
    pngs = list(tf.train.BytesList.FromString(data).value)
    assert len(pngs) == len(column)
    for png, image in zip(pngs, column):
      assert len(png) > png_deflate.stored_bound(image[:, :, 0].size + len(image)) + 57
      _assert_decodes_as_decoders_do(png, image)


@pytest.mark.skipif(not png_deflate.available(), reason="ISA-L's C API cannot be called here")
def test_isal_table_frames_that_do_not_fit_are_deflated_at_level_1(monkeypatch):
  monkeypatch.setattr(png_deflate.TableDeflater, 'compress_into', lambda *args: -1)
  for column in _png_item_columns():
    expected = compression.png_rows(column, compression.PngEncoder('isal', 1))
    assert compression.png_rows(column, compression.PngEncoder('isal-table', 0)) == expected


def test_isal_table_is_refused_where_isa_l_cannot_be_called(monkeypatch):
  monkeypatch.setattr(png_deflate, 'available', lambda: False)
  with pytest.raises(errors.InvalidValueError, match='isal-table'):
    compression.PngEncoder('isal-table', 0)


@pytest.mark.parametrize('version', ['2.25.0', '3.0.0', 'unknown'])
def test_isa_l_is_not_called_outside_the_versions_whose_layout_is_declared(monkeypatch, version):
  # ctypes writes the stream's fields at the offsets declared for ISA-L 2.26-2.x: another layout
  # would have ISA-L read and write elsewhere, so no call is made there.
  monkeypatch.setattr(png_deflate.isal, 'ISAL_VERSION', version)
  png_deflate._library.cache_clear()  # pylint: disable=protected-access
  try:
    assert png_deflate._library() is None  # pylint: disable=protected-access
  finally:
    png_deflate._library.cache_clear()  # pylint: disable=protected-access


def test_a_filtered_png_is_inflated_once_and_not_decoded_again(monkeypatch):
  # libpng's rows (tf.io.encode_png: Paeth, Average, ...) as RL Unplugged's frames: ISA-L inflates
  # the IDAT once; no decoder reads the file a second time.
  image = np.random.default_rng(3).integers(0, 256, (30, 20, 3)).astype(np.uint8)
  image[10:] = image[:1]
  png = tf.io.encode_png(image).numpy()
  inflate = bounded_inflate.inflate_exactly
  calls = []
  monkeypatch.setattr(bounded_inflate, 'inflate_exactly', lambda *a: calls.append(1) or inflate(*a))
  monkeypatch.setattr(shard_reader, '_other_png',
                      lambda *_: pytest.fail('decoded the PNG a second time'))
  np.testing.assert_array_equal(shard_reader.decode_png(png, image.shape), image)
  assert calls == [1]


def test_sub_and_up_rows_decode_in_numpy_without_pillow_or_tensorflow(monkeypatch):
  monkeypatch.setitem(sys.modules, 'PIL', None)  # `from PIL import Image` raises ImportError.
  monkeypatch.setattr(shard_reader, '_other_png',
                      lambda *_: pytest.fail('decoded by Pillow or TensorFlow'))
  for image in _images():
    for filters in ([1], [2], [2, 1, 0, 2, 2]):
      decoded = shard_reader.decode_png(_png_with_filters(image, filters), image.shape, image.dtype)
      np.testing.assert_array_equal(decoded, image)


def test_corrupt_pngs_are_value_errors_naming_the_frame():
  image = np.arange(8 * 6 * 3, dtype=np.uint8).reshape(8, 6, 3)
  good = _png_with_filters(image, [4, 1])
  scanlines = bytearray(zlib.decompress(good[good.index(b'IDAT') + 4:-16]))
  scanlines[3 * 19] = 5  # Row 3's filter type.
  damaged = {
      'row 3 has filter type 5': _png_file(image.shape, image.dtype, zlib.compress(scanlines)),
      'inflates to 151 bytes, expected 152': _png_file(image.shape, image.dtype,
                                                        zlib.compress(scanlines[:-1])),
      'truncated after 152 bytes': _png_file(image.shape, image.dtype,  # No Adler-32.
                                             zlib.compress(scanlines)[:-4]),
      r'inflates to \d+ bytes, expected 152': _png_file(image.shape, image.dtype,
                                                        zlib.compress(scanlines)[:-20]),
      'not a PNG file': good[1:], 'without IHDR': good[:8] + good[33:]}
  for message, png in damaged.items():
    with pytest.raises(ValueError, match=rf'frame 1 is not a \[8, 6, 3\] uint8 PNG: .*{message}'):
      shard_reader.decode_pngs([good, png], image.shape)


def test_datasets_of_tfds_writer_read_the_same(tmp_path):
  """Episodes stored by TFDS's own writer (packed lists, libpng's filtered PNGs) read equal."""
  features = build_helpers.Counting(data_dir=str(tmp_path / 'info')).info.features
  episodes = [build_helpers.episode(3, index) for index in range(4)]
  directory = writing.write_episodes(episodes, features=features, data_dir=tmp_path, name='mine')
  builder = datasets.load_builder(directory)
  assert shard_reader.can_read(builder.info)
  build_helpers.assert_same_episodes(list(shard_reader.read_episodes(builder.info)),
                                     build_helpers.built_episodes(directory))

