"""Apache Beam options for builders that generate examples as a Beam pipeline.

TFDS asks on standard input before a Beam build when no runner options are given, so every build
passes them. Locally that is the DirectRunner, in processes; the builder READMEs show the flags
for Dataflow, Flink and Spark.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional, Sequence

import tensorflow_datasets as tfds


def direct_runner_options(num_workers: int = 2) -> Any:
  """DirectRunner options: `num_workers` worker processes (multi_processing mode)."""
  beam = tfds.core.lazy_imports.apache_beam
  return beam.options.pipeline_options.PipelineOptions(
      flags=[],  # Not this process's command line.
      runner='DirectRunner', direct_num_workers=num_workers,
      direct_running_mode='multi_processing')


def download_config(manual_dir: Optional[str] = None, num_workers: int = 2,
                    **kwargs: Any) -> tfds.download.DownloadConfig:
  """A DownloadConfig that always carries Beam runner options (ignored by non-Beam builders)."""
  return tfds.download.DownloadConfig(manual_dir=manual_dir,
                                      beam_options=direct_runner_options(num_workers), **kwargs)


def per_file(paths: Sequence[str], examples: Callable[[str], Iterable[Any]]) -> Any:
  """A PTransform with one element per source file; `examples(path)` yields its (key, example)s."""
  beam = tfds.core.lazy_imports.apache_beam
  return (beam.Create(list(paths))
          | 'OneWorkerPerFile' >> beam.Reshuffle()
          | 'Examples' >> beam.FlatMap(examples))
