"""rlds_suite.readers.rl_unplugged: the declared alignment of parsed RL Unplugged episodes; and their
GZIP TFRecord shards read without TensorFlow (tfds/tfrecord_episodes.py), equal to TensorFlow's
parse and to its builds byte for byte, with typed errors for damaged shards."""

import gzip
import pathlib
import struct

import numpy as np
import pytest
import tensorflow as tf

from rlds_suite.builders.rlu_atari import rlu_atari_dataset_builder as rlu_atari
from rlds_suite.builders.rlu_control_suite import rlu_control_suite_dataset_builder as rlu_cs
from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.readers import rl_unplugged
from rlds_suite.tfds import beam as rlds_beam
from rlds_suite.tfds import tfrecord_episodes
from rlds_suite.tfds import tfrecord_files

REPO = pathlib.Path(__file__).resolve().parents[1]


def _atari(rows: int, last_discount: float) -> dict:
  discounts = np.ones(rows, np.float32)
  discounts[-1] = last_discount
  unclipped = np.arange(rows, dtype=np.float32) * 2 - 3
  return {'observations': np.arange(rows, dtype=np.uint8)[:, None, None, None] * np.ones(
              (1, 84, 84, 1), np.uint8),
          'actions': np.arange(rows) % 4, 'unclipped_rewards': unclipped,
          'clipped_rewards': np.clip(unclipped, -1, 1), 'discounts': discounts,
          'episode_idx': 3, 'checkpoint_idx': 1, 'episode_return': unclipped.sum(),
          'clipped_episode_return': np.clip(unclipped, -1, 1).sum()}


def test_atari_terminated_last_row_is_the_terminal_frame():
  trajectory = rl_unplugged.atari_trajectory(_atari(5, 0.0))
  assert trajectory.ending is episodes.Ending.TERMINATED
  np.testing.assert_array_equal(trajectory.actions, [0, 1, 2, 3])
  np.testing.assert_array_equal(trajectory.rewards, [-3, -1, 1, 3])
  np.testing.assert_array_equal(trajectory.step_metadata['clipped_reward'], [-1, -1, 1, 1])
  assert trajectory.final_observation[0, 0, 0] == 4
  steps = episodes.to_episode(trajectory).steps
  np.testing.assert_array_equal(steps['discount'], [1, 1, 1, 0, 0])
  np.testing.assert_array_equal(steps['is_terminal'], [0, 0, 0, 0, 1])


def test_atari_truncated_rows_are_all_actions():
  trajectory = rl_unplugged.atari_trajectory(_atari(4, 1.0))
  assert trajectory.ending is episodes.Ending.TRUNCATED
  np.testing.assert_array_equal(trajectory.rewards, [-3, -1, 1, 3])
  assert trajectory.final_observation_is_copy
  steps = episodes.to_episode(trajectory).steps
  np.testing.assert_array_equal(steps['discount'], [1, 1, 1, 1, 1])
  np.testing.assert_array_equal(steps['observation_is_copy'], [0, 0, 0, 0, 1])


def test_atari_zero_discount_inside_an_episode_is_refused():
  example = _atari(5, 0.0)
  example['discounts'][2] = 0
  with pytest.raises(errors.EpisodeBoundaryError, match=r'discount 0 before the last row \(rows \[2\]\)'):
    rl_unplugged.atari_trajectory(example)


def _control(step_type, discount) -> dict:
  n = len(step_type)
  return {'observation/position': np.arange(n * 3, dtype=np.float32).reshape(n, 3),
          'observation/velocity': np.zeros((n, 2), np.float32),
          'action': np.arange(n, dtype=np.float32)[:, None] + 10,
          'reward': np.arange(n, dtype=np.float32) / 10, 'discount': np.asarray(discount, np.float32),
          'step_type': np.asarray(step_type, np.float32), 'episode_id': 4, 'timestamp': 5}


SIZES = rl_unplugged.CONTROL_SUITE_TASKS['cartpole_swingup'][0]


def test_control_suite_rsa_rows_to_rlds():
  trajectory = rl_unplugged.control_suite_trajectory(_control([0, 1, 1, 2], [1, 1, 1, 0]), SIZES)
  assert trajectory.ending is episodes.Ending.TERMINATED
  np.testing.assert_array_equal(trajectory.actions[:, 0], [10, 11, 12])  # The LAST one is dropped.
  np.testing.assert_allclose(trajectory.rewards, [0.1, 0.2, 0.3])  # Row t + 1's reward.
  np.testing.assert_array_equal(trajectory.discounts, [1, 1, 0])
  np.testing.assert_array_equal(trajectory.final_observation['position'], [9, 10, 11])
  truncated = rl_unplugged.control_suite_trajectory(_control([0, 1, 2], [1, 1, 1]), SIZES)
  assert truncated.ending is episodes.Ending.TRUNCATED


def test_control_suite_step_types_must_frame_one_episode():
  with pytest.raises(errors.EpisodeBoundaryError, match=r'rows \[2\]'):
    rl_unplugged.control_suite_trajectory(_control([0, 1, 0, 1, 2], [1] * 5), SIZES)


# --- The shards, read without TensorFlow, against TensorFlow's own reader (test only) ----------

ATARI_DIR = REPO / 'builders' / 'rlu_atari' / 'dummy_data'
CONTROL_DIR = REPO / 'builders' / 'rlu_control_suite' / 'dummy_data'
ATARI_SHARDS = sorted((ATARI_DIR / 'Pong').iterdir())
CONTROL_SHARDS = sorted((CONTROL_DIR / 'cartpole_swingup').iterdir())


def _tf_spec(spec: dict) -> dict:
  """A ParseFeature spec as the tf.io features TFDS's rlu_* builders publish."""
  dtypes = {'int64': tf.int64, 'float32': tf.float32, 'bytes': tf.string}
  return {key: tf.io.FixedLenSequenceFeature(list(f.shape), dtypes[f.dtype], allow_missing=True)
          if f.sequence else tf.io.FixedLenFeature(list(f.shape), dtypes[f.dtype])
          for key, f in spec.items()}


def _tf_read_examples(path, spec):
  """What tfrecord_episodes.read_examples did with TensorFlow."""
  for record in tf.data.TFRecordDataset(str(path), compression_type='GZIP'):
    yield {k: v.numpy() for k, v in tf.io.parse_single_example(record, _tf_spec(spec)).items()}


def _tf_decode_frames(pngs, shape):
  del shape
  return np.stack([tf.io.decode_png(png).numpy() for png in pngs])


def _assert_same_values(ours: dict, theirs: dict) -> None:
  assert ours.keys() == theirs.keys()
  for key in theirs:
    a, b = np.asarray(ours[key]), np.asarray(theirs[key])
    assert (a.dtype, a.shape) == (b.dtype, b.shape), key
    assert (a.tolist() == b.tolist()) if a.dtype == object else a.tobytes() == b.tobytes(), key


def _extra_record() -> bytes:
  """Values TFRecord writers produce besides the fixtures': a missing sequence (allow_missing),
  negative and large ints, an empty feature, repeated keys of the map."""
  return tf.train.Example(features=tf.train.Features(feature={
      'episode_id': tf.train.Feature(int64_list=tf.train.Int64List(value=[-2**63])),
      'timestamp': tf.train.Feature(int64_list=tf.train.Int64List(value=[2**63 - 1])),
      'observation/position': tf.train.Feature(float_list=tf.train.FloatList(
          value=np.linspace(-1e30, 1e-30, 6).astype(np.float32))),
      'action': tf.train.Feature(),
      'reward': tf.train.Feature(float_list=tf.train.FloatList(value=[np.nan, -0.0])),
      'step_type': tf.train.Feature(float_list=tf.train.FloatList(value=[0, 2])),
  })).SerializeToString()


def test_records_parse_as_tensorflow_parses_them(tmp_path):
  cases = [(path, tfrecord_episodes.atari_spec()) for path in ATARI_SHARDS]
  cases += [(path, tfrecord_episodes.control_suite_spec(*rl_unplugged.CONTROL_SUITE_TASKS[
      'cartpole_swingup'])) for path in CONTROL_SHARDS]
  extra = tmp_path / 'extra'
  with tf.io.TFRecordWriter(str(extra), options='GZIP') as writer:
    writer.write(_extra_record())
  cases.append((extra, tfrecord_episodes.control_suite_spec({'position': 3, 'velocity': 2}, 1)))
  for path, spec in cases:
    ours, theirs = list(tfrecord_episodes.read_examples(path, spec)), list(
        _tf_read_examples(path, spec))
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs):
      _assert_same_values(a, b)
      if 'observations' in a:  # libpng's filtered PNGs, as the released shards hold.
        np.testing.assert_array_equal(
            tfrecord_episodes.decode_frames(a['observations'], rl_unplugged.ATARI_FRAME_SHAPE),
            _tf_decode_frames(b['observations'], None))


@pytest.mark.parametrize('builder_module,config,manual_dir', [
    (rlu_atari, 'Pong_run_1', ATARI_DIR), (rlu_cs, 'cartpole_swingup', CONTROL_DIR)])
def test_builds_equal_those_of_the_tensorflow_reader(builder_module, config, manual_dir, tmp_path,
                                                     monkeypatch):
  def build(name):
    builder = builder_module.Builder(config=config, data_dir=str(tmp_path / name), beam=False,
                                     num_shards=2)
    builder.download_and_prepare(download_config=rlds_beam.download_config(str(manual_dir)))
    return pathlib.Path(builder.data_dir)

  ours = build('ours')
  monkeypatch.setattr(tfrecord_episodes, 'read_examples', _tf_read_examples)
  monkeypatch.setattr(tfrecord_episodes, 'decode_frames', _tf_decode_frames)
  theirs = build('theirs')
  shards = sorted(p.name for p in theirs.glob('*.tfrecord*'))
  assert shards and shards == sorted(p.name for p in ours.glob('*.tfrecord*'))
  for name in shards + ['features.json']:
    assert (ours / name).read_bytes() == (theirs / name).read_bytes(), name


# --- Damaged shards: one typed line naming the file --------------------------------------------

def _raw_records(path) -> list[bytes]:
  return list(tfrecord_files.read_records(path, tfrecord_files.GZIP))


def _gzip_frames(path, frames: bytes) -> None:
  with gzip.open(path, 'wb') as f:
    f.write(frames)


def _framed(records) -> bytes:
  out = bytearray()
  for record in records:
    length = struct.pack('<Q', len(record))
    out += length + struct.pack('<I', tfrecord_files.masked_crc(length)) + record
    out += struct.pack('<I', tfrecord_files.masked_crc(record))
  return bytes(out)


def _read_error(path, spec=None) -> errors.RLDSSuiteError:
  with pytest.raises(errors.RLDSSuiteError) as raised:
    list(tfrecord_episodes.read_examples(path, spec or tfrecord_episodes.atari_spec()))
  assert '\n' not in str(raised.value) and str(path) in str(raised.value)
  return raised.value


def test_torn_gzip_and_damaged_deflate_are_corrupt_file_errors(tmp_path):
  data = ATARI_SHARDS[0].read_bytes()
  torn = tmp_path / 'torn'
  torn.write_bytes(data[:len(data) * 2 // 3])
  error = _read_error(torn)
  assert isinstance(error, errors.CorruptFileError) and 'truncated' in error.problem
  flipped = tmp_path / 'flipped'
  damaged = bytearray(data)
  damaged[-6] ^= 0xFF  # gzip's CRC-32 of the data.
  flipped.write_bytes(bytes(damaged))
  assert isinstance(_read_error(flipped), errors.CorruptFileError)


def test_bad_frames_inside_good_gzip_are_corrupt_file_errors(tmp_path):
  records = _raw_records(ATARI_SHARDS[0])
  frames = bytearray(_framed(records))
  frames[len(frames) - 10] ^= 0xFF  # Inside record 1's data.
  path = tmp_path / 'crc'
  _gzip_frames(path, bytes(frames))
  error = _read_error(path)
  assert isinstance(error, errors.CorruptFileError)
  assert error.problem == 'corrupted TFRecord data of record 1'
  # A length (its CRC right) far past what the file holds: refused before anything is allocated.
  length = struct.pack('<Q', 1 << 50)
  huge = tmp_path / 'huge'
  _gzip_frames(huge, _framed(records[:1]) + length +
               struct.pack('<I', tfrecord_files.masked_crc(length)) + b'x' * 100)
  error = _read_error(huge)
  assert error.problem == f'truncated TFRecord record (declares {1 << 50} bytes) of record 1'


def test_records_that_do_not_match_the_spec_are_schema_errors(tmp_path):
  error = _read_error(CONTROL_SHARDS[0])
  assert isinstance(error, errors.SchemaError)
  assert error.problem == ("record 0 does not match the parse spec: feature 'checkpoint_idx' is "
                           "required but missing")
  wrong = tf.train.Example.FromString(_raw_records(ATARI_SHARDS[1])[0])
  wrong.features.feature['actions'].float_list.value[:] = [1.0, 2.0]
  path = tmp_path / 'wrong'
  _gzip_frames(path, _framed([wrong.SerializeToString()]))
  assert _read_error(path).problem == ("record 0 does not match the parse spec: feature 'actions': "
                                       'expected a int64_list, got a float_list')
  sizes, action = rl_unplugged.CONTROL_SUITE_TASKS['cheetah_run']
  assert 'do not fill rows of shape [8]' in _read_error(
      CONTROL_SHARDS[0], tfrecord_episodes.control_suite_spec(sizes, action)).problem


def test_a_frame_that_is_not_the_declared_png_names_its_shard(tmp_path):
  example = tf.train.Example.FromString(_raw_records(ATARI_SHARDS[1])[0])
  frames = example.features.feature['observations'].bytes_list.value
  frames[2] = tf.io.encode_png(np.zeros((84, 80, 1), np.uint8)).numpy()
  manual = tmp_path / 'manual' / 'Pong'
  manual.mkdir(parents=True)
  (manual / 'run_1-00000-of-00002').write_bytes(ATARI_SHARDS[0].read_bytes())
  _gzip_frames(manual / 'run_1-00001-of-00002', _framed([example.SerializeToString()]))
  builder = rlu_atari.Builder(config='Pong_run_1', data_dir=str(tmp_path / 'out'), beam=False,
                              num_shards=2)
  with pytest.raises(errors.CorruptFileError) as raised:
    builder.download_and_prepare(download_config=rlds_beam.download_config(str(manual.parent)))
  assert str(raised.value) == (
      f'{manual / "run_1-00001-of-00002"}: observations: frame 2 is not a [84, 84, 1] uint8 PNG: '
      'PNG of shape [84, 80, 1], expected [84, 84, 1]')
