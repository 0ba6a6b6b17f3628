"""The main job on bundled sample data: convert each sample, validate it, summarise it."""

from __future__ import annotations

import dataclasses
import pathlib
from typing import Any, Callable, Optional

from rlds_suite import datasets

SAMPLE_DATA = pathlib.Path(__file__).parent / 'sample_data'


@dataclasses.dataclass(frozen=True)
class Sample:
  dataset: str  # Registered 'builder/config'.
  manual_dir: str  # Below rlds_suite/sample_data.


SAMPLES = (
    Sample('magical_demos/move_to_region', 'magical'),
    Sample('imitation_rollouts/cartpole', 'imitation'),
)


def run(data_dir: str, on_sample: Optional[Callable[[dict[str, Any]], None]] = None) -> list:
  """Builds every sample into `data_dir`, validates it and returns one summary dict per dataset."""
  summaries = []
  for sample in SAMPLES:
    builder = datasets.build(sample.dataset, manual_dir=str(SAMPLE_DATA / sample.manual_dir),
                             data_dir=data_dir)
    summary = datasets.validate(builder).summary()
    summaries.append(summary)
    if on_sample:
      on_sample(summary)
  return summaries
