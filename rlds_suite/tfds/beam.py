"""Apache Beam options for builders that generate examples as a Beam pipeline.

TFDS asks on standard input before a Beam build when no runner options are given, so every build
passes them. Locally that is the DirectRunner, in processes; the builder READMEs show the flags
for Dataflow, Flink and Spark.
"""

from __future__ import annotations

import importlib.util
from typing import Any, Callable, Iterable, Optional, Sequence

import tensorflow_datasets as tfds

import rlds_suite


def direct_runner_options(num_workers: int = 2) -> Any:
  """DirectRunner options: `num_workers` worker processes (multi_processing mode)."""
  beam = tfds.core.lazy_imports.apache_beam
  return beam.options.pipeline_options.PipelineOptions(
      flags=[],  # Not this process's command line.
      runner='DirectRunner', direct_num_workers=num_workers,
      direct_running_mode='multi_processing')


def download_config(manual_dir: Optional[str] = None, num_workers: int = 2,
                    **kwargs: Any) -> tfds.download.DownloadConfig:
  """A DownloadConfig carrying Beam runner options (ignored by non-Beam builders) when Apache Beam
  is installed (the tfds_cli extra); without it only non-Beam builders can build anyway."""
  options = direct_runner_options(num_workers) if importlib.util.find_spec('apache_beam') else None
  return tfds.download.DownloadConfig(manual_dir=manual_dir, beam_options=options, **kwargs)


def per_file(paths: Sequence[str], examples: Callable[[str], Iterable[Any]]) -> Any:
  """A PTransform with one element per source file; `examples(path)` yields its (key, example)s."""
  beam = tfds.core.lazy_imports.apache_beam
  return (beam.Create(list(paths))
          | 'OneWorkerPerFile' >> beam.Reshuffle()
          | 'Examples' >> beam.FlatMap(examples))


# Builders import this module: if registering them was put off while it was imported, do it now.
rlds_suite.register_deferred_builders(__name__)
