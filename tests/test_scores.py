"""rlds_suite.scores against hand-computed values from D4RL's infos.py and the Atari-57 table."""

import json

import numpy as np
import pytest

from rlds_suite import scores


def test_d4rl_reference_by_tfds_name_and_id():
  # hopper-medium-v2 takes hopper-random-v0's refs (infos.py loop): (-20.272305, 3234.3).
  # 1600: (1600 + 20.272305) / (3234.3 + 20.272305) = 0.497812...
  got = scores.normalize('d4rl/hopper-medium-v2', [1600.0, -20.272305, 3234.3])
  np.testing.assert_allclose(got, [1620.272305 / 3254.572305, 0.0, 1.0])
  assert scores.reference('hopper-medium-v2').source == 'd4rl'


def test_families():
  # door-cloned-v1 takes door-human-v0's refs: (-56.512833, 2880.5693087298737).
  ref = scores.reference('d4rl_families/door-cloned-v1')
  assert (ref.low, ref.high) == (-56.512833, 2880.5693087298737)
  np.testing.assert_allclose(scores.normalize('antmaze-large-diverse-v2', [0.0, 0.25, 1.0]),
                             [0.0, 0.25, 1.0])
  np.testing.assert_allclose(scores.normalize('kitchen-mixed-v0', 3.0), 0.75)
  # maze2d-umaze-v1: (23.85, 161.86); 92.855 is half way.
  np.testing.assert_allclose(scores.normalize('maze2d-umaze-v1', 92.855), 0.5)


@pytest.mark.parametrize('name', ['Pong', 'PongNoFrameskip-v4', 'atari:Pong', 'rlu_atari/Pong_run_1',
                                  'dqn_replay/Pong', 'pong'])
def test_atari_names(name):
  # Pong: random -20.7, human 14.6; a return of 21 normalises to 41.7 / 35.3.
  np.testing.assert_allclose(scores.normalize(name, 21.0), 41.7 / 35.3)


def test_atari_camel_case():
  assert scores.atari_game('MsPacman') == 'ms_pacman'
  assert scores.atari_game('MontezumaRevenge') == 'montezuma_revenge'
  np.testing.assert_allclose(scores.normalize('MsPacman', 307.3), 0.0)


def test_metadata_refs_win(tmp_path):
  metadata = scores.Reference(10.0, 30.0, 'minari').as_metadata()
  np.testing.assert_allclose(scores.normalize('mujoco/pusher/expert-v0', [20.0], metadata), [0.5])
  (tmp_path / 'metadata.json').write_text(json.dumps(metadata))
  assert scores.reference('anything', scores.directory_metadata(tmp_path)).source == 'minari'


def test_unknown_name():
  with pytest.raises(LookupError, match='no-such-dataset'):
    scores.reference('no-such-dataset')


def test_directory_reference(tmp_path):
  # A prepared d4rl dataset without stored refs: found by its builder/config name.
  (tmp_path / 'dataset_info.json').write_text(json.dumps(
      {'name': 'd4rl', 'configName': 'walker2d-medium-v2', 'version': '1.0.0'}))
  ref = scores.directory_reference(tmp_path)
  assert (ref.low, ref.high) == (1.629008, 4592.3)
  (tmp_path / 'dataset_info.json').write_text(json.dumps({'name': 'magical_demos',
                                                          'configName': 'move_to_region'}))
  assert scores.directory_reference(tmp_path) is None
  (tmp_path / 'metadata.json').write_text(json.dumps({'ref_min_score': 1, 'ref_max_score': 3}))
  np.testing.assert_allclose(scores.directory_reference(tmp_path).normalize([2.0]), [0.5])
