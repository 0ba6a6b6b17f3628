"""The builder base: progress over split generators leaves the examples untouched."""

import numpy as np

from rlds_suite.core import progress


def test_progress_passes_examples_through_and_counts_steps():
  examples = [('a', {'steps': {'observation': np.zeros((5, 2))}}), ('b', {'steps': [{}, {}, {}]})]
  assert list(progress.episodes(iter(examples), progress.expected(iter(examples)), 'test')) == examples
  assert [progress.num_steps(e) for _, e in examples] == [5, 3]


def test_builders_split_generators_are_wrapped():
  import rlds_suite.builders.magical_demos.magical_demos_dataset_builder as magical  # pylint: disable=g-import-not-at-top
  assert hasattr(magical.Builder._split_generators, '__wrapped__')  # pylint: disable=protected-access
