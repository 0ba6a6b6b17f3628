"""rlds is usable without reverb; pattern_map fails with a clear message."""

import subprocess
import sys

import pytest
import tensorflow as tf

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.compat.rlds_compat import REVERB_AVAILABLE, rlds


def test_rlds_transformations_work():
  steps = tf.data.Dataset.from_tensor_slices({fields.REWARD: [1., 2., 3.]})
  assert int(rlds.transformations.episode_length(steps)) == 3
  assert 'reverb' not in sys.modules or REVERB_AVAILABLE


@pytest.mark.skipif(REVERB_AVAILABLE, reason='reverb is importable here')
@pytest.mark.parametrize('name', ['pattern_map', 'pattern_map_from_transform'])
def test_pattern_map_raises_missing_dependency(name):
  with pytest.raises(errors.MissingDependencyError, match='dm-reverb'):
    getattr(rlds.transformations, name)(tf.data.Dataset.range(1), None)


def test_plain_import_rlds_still_fails_upstream():
  """Tells when upstream no longer needs the workaround (then rlds_compat can go)."""
  result = subprocess.run([sys.executable, '-c', 'import rlds'], capture_output=True, text=True)
  if result.returncode == 0:
    pytest.fail('`import rlds` works now: remove the reverb stand-in from rlds_suite.compat.rlds_compat')
  assert 'reverb' in result.stderr


def test_field_names_match_rlds():
  types = rlds.rlds_types
  assert (fields.STEPS, fields.OBSERVATION, fields.ACTION, fields.REWARD, fields.DISCOUNT,
          fields.IS_FIRST, fields.IS_LAST, fields.IS_TERMINAL) == (
              types.STEPS, types.OBSERVATION, types.ACTION, types.REWARD, types.DISCOUNT,
              types.IS_FIRST, types.IS_LAST, types.IS_TERMINAL)
