"""readers.minerl: MineRL v3 streams, the real VectorObf stream, fixture videos and bad input."""

import pathlib
import shutil
import sys

import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.core.episodes import Ending
from rlds_suite.readers import minerl

sys.path.insert(0, str(pathlib.Path(__file__).parent / 'fixtures'))
import write_minerl  # pylint: disable=g-import-not-at-top,wrong-import-position

TREECHOP = minerl.ENVS['treechop_vector_obf']


def test_real_stream_without_video(real_data):
  (stream,) = minerl.stream_dirs(real_data / 'minerl', TREECHOP)
  trajectory = minerl.read_stream(stream, TREECHOP, with_video=False)
  native = np.load(stream / 'rendered.npz')
  np.testing.assert_array_equal(trajectory.observations['vector'],
                                native['observation$vector'][:-1])
  np.testing.assert_array_equal(trajectory.final_observation['vector'],
                                native['observation$vector'][-1])
  np.testing.assert_array_equal(trajectory.actions['vector'], native['action$vector'])
  assert trajectory.ending is Ending.TERMINATED and trajectory.metadata['success']
  with pytest.raises(errors.EmptyInputError, match=r'recording.mp4: pov: missing recording.mp4'):
    minerl.read_stream(stream, TREECHOP)


def test_frames_skip_the_loading_frames(fixtures):
  streams = minerl.stream_dirs(fixtures / 'minerl', TREECHOP)
  assert [s.name for s in streams] == ['v3_fixture_a-1_0-5', 'v3_fixture_b-2_0-3']
  trajectory = minerl.read_stream(streams[0], TREECHOP)
  pov = np.concatenate([trajectory.observations['pov'], trajectory.final_observation['pov'][None]])
  values = pov.reshape(len(pov), -1).mean(axis=1)
  np.testing.assert_allclose(values, [write_minerl.frame_value(t) for t in range(6)], atol=2)


def _copy(fixtures, tmp_path) -> pathlib.Path:
  stream = tmp_path / 'MineRLTreechopVectorObf-v0' / 'v3_fixture_a-1_0-5'
  shutil.copytree(fixtures / 'minerl' / 'MineRLTreechopVectorObf-v0' / stream.name, stream)
  return stream


def test_missing_rendered_npz(fixtures, tmp_path):
  stream = _copy(fixtures, tmp_path)
  (stream / 'rendered.npz').unlink()
  with pytest.raises(errors.EmptyInputError, match=r'v3_fixture_a-1_0-5: rendered.npz: missing'):
    minerl.read_stream(stream, TREECHOP)


def test_video_shorter_than_the_arrays(fixtures, tmp_path):
  stream = _copy(fixtures, tmp_path)
  arrays = dict(np.load(stream / 'rendered.npz'))
  write_minerl.write_stream(stream, arrays, success=True, video_states=4)  # 6 states needed.
  with pytest.raises(errors.EpisodeBoundaryError,
                     match=r'recording.mp4: pov: the video has 7 frames, fewer than '
                     r'true_video_frame_count 9'):
    minerl.read_stream(stream, TREECHOP)


def test_keys_that_differ_from_the_declared_ones(fixtures, tmp_path):
  stream = _copy(fixtures, tmp_path)
  with pytest.raises(errors.SchemaError, match=r"rendered.npz: observation\$compassAngle: .*"
                     r"missing \['observation\$compassAngle'"):
    declared = {'compassAngle': minerl.Kind.SCALAR, 'vector': minerl.Kind.VECTOR}
    minerl.read_stream(stream, minerl.Env(TREECHOP.env_id, declared, TREECHOP.actions))
  arrays = dict(np.load(stream / 'rendered.npz'))
  arrays['action$vector'] = arrays['action$vector'][:-1]
  np.savez(stream / 'rendered.npz', **arrays)
  with pytest.raises(errors.EpisodeBoundaryError, match='v3_fixture_a-1_0-5'):
    minerl.read_stream(stream, TREECHOP)


def test_duration_steps_must_match(fixtures, tmp_path):
  stream = _copy(fixtures, tmp_path)
  metadata = stream / 'metadata.json'
  metadata.write_text(metadata.read_text().replace('"duration_steps": 5', '"duration_steps": 6'))
  with pytest.raises(errors.EpisodeBoundaryError, match=r'metadata.json: duration_steps'):
    minerl.read_stream(stream, TREECHOP)


@pytest.mark.parametrize('keep', [1000, 1250, 200, 0])
def test_truncated_video_is_a_typed_error(fixtures, tmp_path, keep):
  # Cut at 1000-1250 bytes the mp4 has no video stream left (IndexError before).
  stream = _copy(fixtures, tmp_path)
  video = stream / 'recording.mp4'
  video.write_bytes(video.read_bytes()[:keep])
  with pytest.raises(errors.CorruptFileError, match=r'recording.mp4: pov: '):
    minerl.read_stream(stream, TREECHOP)


def test_damaged_npz_is_a_typed_error(fixtures, tmp_path):
  stream = _copy(fixtures, tmp_path)
  arrays = stream / 'rendered.npz'
  data = arrays.read_bytes()
  arrays.write_bytes(data[:len(data) // 2])
  with pytest.raises(errors.CorruptFileError, match=r'rendered.npz: damaged, truncated or '
                     'unsupported zip'):
    minerl.read_stream(stream, TREECHOP)
