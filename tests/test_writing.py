"""write_episodes round trip: what is written reads back unchanged, in order."""

import numpy as np
import pytest

from rlds_suite.tfds import datasets
from rlds_suite.core import errors
from rlds_suite.tfds import features
from rlds_suite.core import fields
from rlds_suite.tfds import writing

from tests import streams_data


def test_round_trip(tmp_path):
  eps = streams_data.id_episodes(0, 3)
  directory = streams_data.write(tmp_path, 'roundtrip', eps)
  read = list(datasets.numpy_episodes(datasets.episodes(directory)))
  assert len(read) == 3
  for written, got in zip(eps, read):
    for key in fields.CORE_STEP_FIELDS:
      np.testing.assert_array_equal(got[fields.STEPS][key], written.steps[key])
  assert datasets.validate(directory).ok


def test_features_mismatch_is_a_schema_error(tmp_path):
  eps = streams_data.id_episodes(0, 1, obs_size=3)
  wrong = features.rlds_features(observation=features.tensor((5,), np.float32),
                                 action=features.tensor((2,), np.float32))
  with pytest.raises(errors.SchemaError):
    writing.write_episodes(eps, features=wrong, data_dir=tmp_path, name='wrong')
