"""A build whose values fail validation keeps what it wrote, marks it (the report in
VALIDATION_FAILED.json), says so in its last line and exits 1; a later validation by build that
passes removes the mark."""

import json
import os
import pathlib
import shutil

import h5py
import numpy as np

from rlds_suite import cli
from rlds_suite.tfds import datasets
from rlds_suite.tfds import provenance

SOURCE = (pathlib.Path(__file__).resolve().parents[1] / 'builders' / 'd4rl' / 'dummy_data' /
          'halfcheetah_medium-v2.hdf5')
NAME = 'd4rl/halfcheetah-medium-v2'


def test_failed_validation_keeps_and_marks_the_dataset(tmp_path, capsys):
  manual = tmp_path / 'manual'
  manual.mkdir()
  shutil.copy(SOURCE, manual / SOURCE.name)
  with h5py.File(manual / SOURCE.name, 'r+') as f:
    observations = f['observations'][()]
    observations[3, 0] = np.nan  # Reads fine; validation refuses non-finite observations.
    f['observations'][...] = observations
  data_dir = tmp_path / 'data'
  assert cli.main(['build', NAME, '--manual_dir', str(manual), '--data_dir', str(data_dir)]) == 1
  err = capsys.readouterr().err.strip().splitlines()
  builder = datasets.load_builder(NAME, str(data_dir))  # Kept, and it loads.
  directory = str(builder.data_dir)
  marker = os.path.join(directory, provenance.VALIDATION_FAILED)
  assert err[-1].startswith(f'rlds-suite build: {directory} was written but FAILED validation')
  assert provenance.VALIDATION_FAILED in err[-1] and f'rlds-suite validate {directory}' in err[-1]
  with open(marker) as f:
    report = json.load(f)
  assert not report['valid'] and report['violations'] >= 1
  assert any('observation' in finding for finding in report['findings'])
  assert report['episodes'] == builder.info.splits['train'].num_examples > 0
  assert cli.main(['verify', directory]) == 0  # The mark is not taken for a changed dataset.
  capsys.readouterr()

  # Built again as it is: still there, still marked.
  assert cli.main(['build', NAME, '--manual_dir', str(manual), '--data_dir', str(data_dir)]) == 1
  assert 'FAILED validation' in capsys.readouterr().err and os.path.exists(marker)

  # A fixed source built in its place passes; a mark found on a dataset that now passes goes.
  shutil.rmtree(directory)
  shutil.copy(SOURCE, manual / SOURCE.name)
  assert cli.main(['build', NAME, '--manual_dir', str(manual), '--data_dir', str(data_dir)]) == 0
  assert 'FAILED' not in capsys.readouterr().err and not os.path.exists(marker)
  pathlib.Path(marker).write_text('{}')
  assert cli.main(['build', NAME, '--manual_dir', str(manual), '--data_dir', str(data_dir)]) == 0
  assert not os.path.exists(marker)
