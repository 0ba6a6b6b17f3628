"""rlds_suite: RL and imitation-learning demonstrations as RLDS datasets.

`import rlds_suite` registers every builder in rlds_suite.builders with TFDS.
"""

from rlds_suite import errors
from rlds_suite.datasets import validate
from rlds_suite.episodes import Ending, Episode, Trajectory

from rlds_suite import builders  # Registers the TFDS builders.  # pylint: disable=g-bad-import-order

__all__ = ['errors', 'validate', 'Ending', 'Episode', 'Trajectory', 'builders']
