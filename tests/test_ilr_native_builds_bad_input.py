"""A bad native file stops the build of the il-representations native and MineRL builders with a
typed error naming the file and field, and leaves no dataset that looks complete."""

import os
import pathlib
import pickle
import shutil
import sys

import numpy as np
import pytest
import tensorflow_datasets as tfds

import rlds_suite  # pylint: disable=unused-import
from rlds_suite.core import errors
from rlds_suite.tfds import datasets

sys.path.insert(0, str(pathlib.Path(__file__).parent / 'fixtures'))
import write_ilr_atari  # pylint: disable=g-import-not-at-top,wrong-import-position
import write_ilr_procgen  # pylint: disable=g-import-not-at-top,wrong-import-position
import write_minerl  # pylint: disable=g-import-not-at-top,wrong-import-position


def _atari_without_arr_0(manual_dir: pathlib.Path) -> None:
  write_ilr_atari.write(manual_dir / 'pong_good.npz', write_ilr_atari.trajectories())
  np.savez(manual_dir / 'pong_bad.npz', trajectories=np.zeros(2))


def _procgen_foreign_global(manual_dir: pathlib.Path) -> None:
  data = write_ilr_procgen.demos(write_ilr_procgen.trajectories())
  data['rews'][1] = os.getcwd  # Pickled by reference as posix.getcwd.
  with open(manual_dir / 'demo_coinrun.pickle', 'wb') as f:
    pickle.dump(data, f)


def _minerl_short_video(manual_dir: pathlib.Path) -> None:
  stream = manual_dir / 'MineRLTreechopVectorObf-v0' / 'v3_short-1_0-5'
  write_minerl.write_stream(stream, write_minerl.vector_obf_arrays(5, 0), success=True,
                            video_states=5)  # 6 states.


def _minerl_without_rendered_npz(manual_dir: pathlib.Path) -> None:
  _minerl_short_video(manual_dir)
  (manual_dir / 'MineRLTreechopVectorObf-v0' / 'v3_short-1_0-5' / 'rendered.npz').unlink()


CASES = [
    ('ilr_atari_demos/pong', _atari_without_arr_0, errors.SchemaError,
     r"pong_bad.npz: arr_0: missing member 'arr_0'"),
    ('ilr_procgen_demos/coinrun', _procgen_foreign_global, errors.UnsafePickleError,
     r'demo_coinrun.pickle: refusing to load global posix.getcwd'),
    ('minerl_streams/treechop_vector_obf', _minerl_short_video, errors.EpisodeBoundaryError,
     r'recording.mp4: pov: the video has 8 frames'),
    ('minerl_streams/treechop_vector_obf', _minerl_without_rendered_npz, errors.EmptyInputError,
     r'v3_short-1_0-5: rendered.npz: missing rendered.npz'),
]


@pytest.mark.parametrize('name, write_bad, error, message', CASES,
                         ids=[case[1].__name__.strip('_') for case in CASES])
def test_bad_input_stops_the_build_and_leaves_nothing_complete(tmp_path, name, write_bad, error,
                                                               message):
  manual_dir, data_dir = tmp_path / 'manual', tmp_path / 'data'
  manual_dir.mkdir()
  write_bad(manual_dir)
  with pytest.raises(error, match=message):
    datasets.build(name, manual_dir=str(manual_dir), data_dir=str(data_dir))
  assert not tfds.builder(name, data_dir=str(data_dir)).is_prepared()
  complete = [path for path in data_dir.rglob('dataset_info.json')
              if not any(part.startswith('incomplete') for part in path.parts)]
  assert not complete
  shutil.rmtree(data_dir, ignore_errors=True)
