"""`datasets.build` of a builder that needs no Beam (here dqn_replay with beam=False) imports no
Apache Beam (~3 s) and makes no pipeline options; a Beam builder still gets them."""

import pathlib

import numpy as np
import pytest
import tensorflow_datasets as tfds

from rlds_suite.tfds import beam
from rlds_suite.tfds import datasets

DUMMY_DATA = (pathlib.Path(__file__).resolve().parents[1] / 'builders' / 'dqn_replay' /
              'dummy_data')


def _no_beam():
  raise AssertionError('Apache Beam was asked for by a build that needs none')


def test_a_non_beam_build_imports_no_beam(tmp_path, monkeypatch):
  from rlds_suite.builders.dqn_replay import dqn_replay_dataset_builder as dqn_builder  # pylint: disable=g-import-not-at-top
  monkeypatch.setattr(beam, '_beam', _no_beam)  # What imports apache_beam.
  builder = datasets.build('dqn_replay', manual_dir=str(DUMMY_DATA), data_dir=str(tmp_path),
                           beam_options=_no_beam, beam=False,
                           config=dqn_builder.config('Pong', 1, 1, 1))
  assert builder.info.splits['train'].num_examples == 2
  episodes = list(datasets.numpy_episodes(builder.as_dataset(split='train')))
  assert [int(e['first_add_index']) for e in episodes] == sorted(
      int(e['first_add_index']) for e in episodes)
  assert np.all([e['checkpoint'] == 1 for e in episodes])


@pytest.mark.parametrize('use_beam', [True, False])
def test_needs_beam_follows_the_builders_beam_argument(tmp_path, use_beam):
  builder = tfds.builder('dqn_replay/Pong-run1', data_dir=str(tmp_path), beam=use_beam)
  assert beam.needs_beam(builder) is use_beam


def test_options_for_makes_options_only_when_called(monkeypatch):
  monkeypatch.setattr(beam, '_beam', _no_beam)
  with beam.options_for('direct', 3) as make_options:
    with pytest.raises(AssertionError, match='needs none'):
      make_options()
