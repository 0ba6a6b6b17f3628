"""rlds-suite show / stats / list: frames, plots and statistics checked against the episodes."""

import json
import pathlib

import numpy as np
from PIL import Image
import pytest

from rlds_suite import cli
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.inspection import rendering
from rlds_suite.inspection import statistics
from rlds_suite.tfds import datasets

REPO = pathlib.Path(__file__).resolve().parents[1]


@pytest.fixture(scope='module')
def magical(tmp_path_factory):
  data_dir = tmp_path_factory.mktemp('magical')
  return datasets.build('magical_demos/move_to_corner',
                        manual_dir=str(REPO / 'builders' / 'magical_demos' / 'dummy_data'),
                        data_dir=str(data_dir))


@pytest.fixture(scope='module')
def cartpole(tmp_path_factory):
  data_dir = tmp_path_factory.mktemp('cartpole')
  return datasets.build('imitation_rollouts/cartpole',
                        manual_dir=str(REPO / 'rlds_suite' / 'sample_data' / 'imitation'),
                        data_dir=str(data_dir))


def _episodes(builder):
  return list(datasets.numpy_episodes(datasets.episodes(builder)))


def test_show_gif_has_one_annotated_frame_per_step(magical, tmp_path, capsys):
  out = tmp_path / 'episode.gif'
  assert cli.main(['show', 'magical_demos/move_to_corner', '--data_dir', str(magical.data_dir_root),
                   '--episode', '1', '--out', str(out)]) == 0
  summary = json.loads(capsys.readouterr().out)
  steps = _episodes(magical)[1][fields.STEPS]
  gif = Image.open(out)
  assert gif.n_frames == summary['frames'] == len(steps[fields.IS_FIRST])
  # Both 96x96 views (allo, ego) scaled to at least 168 px high, side by side, with a caption.
  assert gif.size[0] >= 2 * rendering.MIN_HEIGHT and gif.size[1] > rendering.MIN_HEIGHT


def test_rendered_frame_shows_the_observation_and_the_step(magical):
  steps = _episodes(magical)[0][fields.STEPS]
  rendered = rendering.render_episode(steps)
  allo = steps[fields.OBSERVATION]['allo'][1]
  scale = -(-rendering.MIN_HEIGHT // allo.shape[0])
  top = rendering.CAPTION_LINE  # The field names' line.
  np.testing.assert_array_equal(
      rendered[1][top:top + allo.shape[0] * scale:scale, :allo.shape[1] * scale:scale], allo)
  assert rendering.caption(steps, 0)[0].startswith(f'step 0/{len(steps[fields.IS_FIRST]) - 1}  is_first')


def test_mp4_and_contact_sheet(magical, tmp_path):
  import imageio.v2 as imageio  # pylint: disable=g-import-not-at-top
  steps = _episodes(magical)[0][fields.STEPS]
  rendered = rendering.render_episode(steps)
  rendering.write_animation(rendered, str(tmp_path / 'e.mp4'))
  assert imageio.get_reader(str(tmp_path / 'e.mp4')).count_frames() == len(rendered)
  rendering.write_animation(rendered, str(tmp_path / 'e.png'))
  rows = -(-len(rendered) // 8)
  assert Image.open(tmp_path / 'e.png').size[1] == (rendered[0].shape[0] + rendering.SHEET_GAP) * rows - rendering.SHEET_GAP


def test_show_plots_vector_observations(cartpole, tmp_path, capsys):
  out = tmp_path / 'plot.png'
  assert cli.main(['show', 'imitation_rollouts/cartpole', '--data_dir', str(cartpole.data_dir_root),
                   '--episodes', '2', '--out', str(out)]) == 0
  summary = json.loads(capsys.readouterr().out)
  episodes = _episodes(cartpole)[:2]
  assert summary['steps'] == sum(len(e[fields.STEPS][fields.IS_FIRST]) for e in episodes)
  assert Image.open(out).size == (1100, 750)
  assert cli.main(['show', 'imitation_rollouts/cartpole', '--data_dir', str(cartpole.data_dir_root),
                   '--out', str(tmp_path / 'x.gif')]) == 2
  assert 'vector observations are plotted' in capsys.readouterr().err


def test_stats_match_the_episodes(cartpole, tmp_path, capsys):
  assert cli.main(['stats', 'imitation_rollouts/cartpole', '--data_dir', str(cartpole.data_dir_root),
                   '--json', '--out', str(tmp_path / 'stats.png')]) == 0
  printed = json.loads(capsys.readouterr().out)
  episodes = _episodes(cartpole)
  assert printed['episodes'] == len(episodes)
  assert printed['lengths'] == [len(e[fields.STEPS][fields.IS_FIRST]) for e in episodes]
  np.testing.assert_allclose(printed['returns'],
                             [e[fields.STEPS][fields.REWARD].astype(np.float64).sum() for e in episodes])
  assert printed['terminated'] == sum(bool(e[fields.STEPS][fields.IS_TERMINAL].any()) for e in episodes)
  assert printed['terminated'] + printed['truncated'] == len(episodes)
  assert Image.open(tmp_path / 'stats.png').size == (1100, 750)


def test_streaming_moments_equal_whole_array_moments():
  rng = np.random.default_rng(0)
  chunks = [rng.normal(size=(n, 3)) * [1, 10, 100] for n in (1, 7, 50, 3)]
  moments = statistics.Moments()
  for chunk in chunks:
    moments.add(chunk)
  whole = np.concatenate(chunks)
  np.testing.assert_allclose(moments.mean, whole.mean(0))
  np.testing.assert_allclose(moments.std, whole.std(0))
  np.testing.assert_array_equal(moments.minimum, whole.min(0))
  assert moments.count == len(whole)


def test_list_shows_builders_configs_and_prepared(magical, capsys):
  assert cli.main(['list', '--configs', '--local', str(magical.data_dir_root)]) == 0
  out = capsys.readouterr().out
  assert 'magical_demos' in out and 'move_to_corner' in out and 'd4rl_pybullet' in out
  assert 'magical_demos/move_to_corner 1.0.0' in out.split('prepared')[1]


def test_stats_print_normalised_returns_with_the_d4rl_reference(tmp_path, capsys):
  builder = datasets.build('d4rl/halfcheetah-medium-v2',
                           manual_dir=str(REPO / 'rlds_suite' / 'sample_data' / 'd4rl'),
                           data_dir=str(tmp_path))
  capsys.readouterr()  # TFDS's own build messages.
  assert cli.main(['stats', str(builder.data_dir), '--json', '--out', str(tmp_path / 's.png')]) == 0
  printed = json.loads(capsys.readouterr().out)
  # D4RL infos.py: halfcheetah REF_MIN_SCORE -280.178953, REF_MAX_SCORE 12135.0.
  expected = [(r + 280.178953) / (12135.0 + 280.178953) for r in printed['returns']]
  np.testing.assert_allclose(printed['normalized_returns'], expected)
  assert cli.main(['stats', str(builder.data_dir)]) == 0
  assert 'normalised return (100 * (R - -280.179) / (12135 - -280.179)' in capsys.readouterr().out


def test_stats_action_moments_equal_rlds_own_masked_mean(cartpole):
  """Actions are counted as rlds' sar_fields_mask counts them: not on is_last steps, whose action is
  the placeholder after the final observation (counted, CartPole's action mean was off)."""
  from rlds_suite.compat.rlds_compat import rlds  # pylint: disable=g-import-not-at-top
  stats = statistics.compute(_episodes(cartpole))
  mean, _ = rlds.transformations.mean_and_std(datasets.episodes(cartpole),
                                              rlds.transformations.sar_fields_mask)
  np.testing.assert_allclose(stats.moments[fields.ACTION].mean, np.ravel(mean[fields.ACTION]),
                             rtol=1e-6)
  real_actions = sum(len(e[fields.STEPS][fields.IS_LAST]) - 1 for e in _episodes(cartpole))
  assert stats.moments[fields.ACTION].count == real_actions


def test_episode_plot_leaves_a_gap_for_the_placeholder_reward(cartpole, tmp_path, monkeypatch):
  from rlds_suite.inspection import plots  # pylint: disable=g-import-not-at-top
  drawn = []
  import matplotlib.axes  # pylint: disable=g-import-not-at-top
  original = matplotlib.axes.Axes.plot
  def recording_plot(self, x, y, *args, **kwargs):
    drawn.append((self.get_ylabel(), np.asarray(y)))
    return original(self, x, y, *args, **kwargs)
  monkeypatch.setattr(matplotlib.axes.Axes, 'plot', recording_plot)
  episode = _episodes(cartpole)[0]
  plots.plot_episodes([episode], str(tmp_path / 'episode.png'))
  rewards = [y for label, y in drawn if label == '' and len(y) == len(episode[fields.STEPS][fields.REWARD])]
  assert rewards, 'no reward line drawn'
  reward_line = rewards[-1]
  assert np.isnan(reward_line[-1]) and not np.isnan(reward_line[:-1]).any()


def _small_frame_steps(num: int) -> dict:
  """num steps of a 21x21 grey image observation (an Atari-sized panel would be 84x84)."""
  observation = np.full((num, 21, 21), 90, np.uint8)
  return {fields.OBSERVATION: observation, fields.ACTION: np.zeros(num, np.int64),
          fields.REWARD: np.zeros(num, np.float32), fields.DISCOUNT: np.ones(num, np.float32),
          fields.IS_FIRST: np.arange(num) == 0, fields.IS_LAST: np.arange(num) == num - 1,
          fields.IS_TERMINAL: np.zeros(num, bool)}


def test_small_frames_fill_the_caption_width_without_a_blank_band():
  (frame,) = rendering.render_episode(_small_frame_steps(3), [0])
  top = rendering.CAPTION_LINE
  image_rows = frame[top:top + rendering.MIN_HEIGHT]
  assert frame.shape[1] >= rendering.MIN_WIDTH
  assert (image_rows == 90).all(), 'the frame, scaled, spans the whole width'
  assert (frame[:top] != 255).any(), 'the field name is written above the frame'


def test_long_episodes_are_shown_at_chosen_steps():
  assert rendering.chosen_steps(5) == [0, 1, 2, 3, 4]
  spread = rendering.chosen_steps(1000, frames=40)
  assert len(spread) == 40 and spread[0] == 0 and spread[-1] == 999
  assert rendering.chosen_steps(1000, every=100) == list(range(0, 1000, 100))
  assert rendering.chosen_steps(1000, every=10, frames=3) == [0, 10, 20]
  with pytest.raises(errors.SchemaError, match='--every'):
    rendering.chosen_steps(10, every=0)


def test_show_contact_sheet_of_a_long_episode_is_a_page_not_a_poster(magical, tmp_path, capsys):
  out = tmp_path / 'sheet.png'
  assert cli.main(['show', 'magical_demos/move_to_corner', '--data_dir', str(magical.data_dir_root),
                   '--out', str(out), '--frames', '2']) == 0
  summary = json.loads(capsys.readouterr().out)
  assert summary['frames'] == 2 < summary['steps']
  height, width = summary['size']
  gap = rendering.SHEET_GAP
  assert Image.open(out).size == (width * 2 + gap, height)  # One row of two frames.
