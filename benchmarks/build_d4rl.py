"""D4RL conversion speed: rlds_suite's d4rl builder vs TFDS's own D4RL code, same file, same run.

  python benchmarks/build_d4rl.py [--steps 1000000] [--repeats 3] [--encode_repeats 2] [--no_prepare]

Writes a D4RL-style HDF5 file shaped like walker2d_random-v2 (obs float32[17], actions float32[6],
rewards, terminals (some random), timeouts every 1000 steps of an episode, next_observations,
infos/qpos, infos/qvel, infos/action_log_probs; gzip, as D4RL writes) to a temp dir, then measures
rows/s for:
  (a) example generation: our Builder._generate_examples vs
      tensorflow_datasets.d4rl.dataset_utils.generate_examples, each generator fully consumed;
  (b) generation + TFDS feature encoding + tf.train.Example serialization, each with its own
      builder's features (ours: d4rl/walker2d-random-v2; TFDS: d4rl_mujoco_walker2d/v2-random);
  (c) the full build: ours = the d4rl builder's download_and_prepare from a manual dir (its
      writer: rlds_suite.tfds.writing, batch-per-field serialization in one worker per core);
      TFDS's = tensorflow_datasets.d4rl's generate_examples -> its builder's features -> TFDS's
      writer (store_as_tfds_dataset: per-example encoding, shuffling), i.e. what TFDS's
      d4rl_mujoco_walker2d build runs once its file is downloaded. Repeats alternate; rows/s
      median [min..max]; the speed-up is paired by repeat.
Timings in (a) and (b) are the best of their repeats, which alternate between ours and TFDS's,
after one warm-up example each (lazy TensorFlow imports). Wall and CPU time are both shown: CPU time is the
steadier measure on a shared machine, wall time the one that counts our parallel HDF5 reads.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import statistics
import tempfile
import time
from typing import Callable, Iterable

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import h5py  # pylint: disable=g-import-not-at-top
import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.core import example_serializer
from tensorflow_datasets.d4rl import dataset_utils

import rlds_suite  # Registers our builders.  # pylint: disable=unused-import
from rlds_suite.builders.d4rl import d4rl_dataset_builder

CONFIG = 'walker2d-random-v2'
FILE_NAME = 'walker2d_random-v2.hdf5'
TIME_LIMIT = 1000


def write_file(path: pathlib.Path, steps: int, seed: int = 0) -> int:
  """A D4RL-style file of `steps` rows; returns its number of episodes (incl. the unfinished one)."""
  rng = np.random.default_rng(seed)
  terminals = rng.random(steps) < 1 / 3000  # Some episodes terminate early.
  timeouts = np.zeros(steps, dtype=bool)
  start = 0
  for row in range(steps):  # collect_data.py: timeout when an episode reaches max_path steps.
    if row - start + 1 == TIME_LIMIT and not terminals[row]:
      timeouts[row] = True
    if terminals[row] or timeouts[row]:
      start = row + 1
  observations = rng.standard_normal((steps + 1, 17), dtype=np.float32)
  data = {
      'observations': observations[:-1],
      'next_observations': observations[1:],
      'actions': rng.uniform(-1, 1, (steps, 6)).astype(np.float32),
      'rewards': rng.standard_normal(steps, dtype=np.float32),
      'terminals': terminals,
      'timeouts': timeouts,
      'infos/action_log_probs': rng.standard_normal(steps, dtype=np.float32),
      'infos/qpos': rng.standard_normal((steps, 9)),
      'infos/qvel': rng.standard_normal((steps, 9)),
  }
  with h5py.File(path, 'w') as f:
    for key, value in data.items():
      f.create_dataset(key, data=value, compression='gzip')
  return int((terminals | timeouts).sum() + (not (terminals[-1] or timeouts[-1])))


def consume(examples: Iterable, per_example: Callable) -> tuple[float, float, int]:
  """(wall seconds, CPU seconds of this process) to consume all examples, applying `per_example`
  to each, and their count."""
  wall, cpu = time.perf_counter(), time.process_time()
  count = 0
  for _, example in examples:
    per_example(example)
    count += 1
  return time.perf_counter() - wall, time.process_time() - cpu, count


def compare(pipelines: dict[str, tuple[Callable[[], Iterable], Callable]],
            repeats: int) -> dict[str, tuple[float, float, int]]:
  """Best-of-`repeats` (wall, CPU seconds, examples) per pipeline; repeats alternate between
  pipelines so that load from other processes hits both alike. One warm-up example each first."""
  for examples, per_example in pipelines.values():
    per_example(next(iter(examples()))[1])
  best = {label: (float('inf'), float('inf'), 0) for label in pipelines}
  for _ in range(repeats):
    for label, (examples, per_example) in pipelines.items():
      wall, cpu, count = consume(examples(), per_example)
      best[label] = (min(best[label][0], wall), min(best[label][1], cpu), count)
  return best


def encoder(features: tfds.features.FeaturesDict) -> Callable:
  serializer = example_serializer.ExampleSerializer(features.get_serialized_info())
  return lambda example: serializer.serialize_example(features.encode_example(example))


def build_ours(manual_dir: pathlib.Path, data_dir: str, _) -> int:
  """Our d4rl builder, as `rlds-suite build` runs it (rlds_suite.tfds.writing, one worker per
  core)."""
  builder = d4rl_dataset_builder.Builder(config=CONFIG, data_dir=data_dir)
  builder.download_and_prepare(
      download_config=tfds.download.DownloadConfig(manual_dir=str(manual_dir)))
  return builder.info.splits['train'].num_examples


def build_tfds(manual_dir: pathlib.Path, data_dir: str,
               features: tfds.features.FeaturesDict) -> int:
  """TFDS's own D4RL converter on the same file: its example generator, its builder's features
  and its writer (what its builder's download_and_prepare runs after the download)."""
  examples = dataset_utils.generate_examples(str(manual_dir / FILE_NAME))
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      name='d4rl_mujoco_walker2d', version='2.0.0', features=features,
      split_datasets={'train': examples}, data_dir=data_dir)
  return builder.info.splits['train'].num_examples


def spread(values: list[float]) -> str:
  digits = ',.0f' if min(values) >= 100 else '.3g'
  return (f'{statistics.median(values):{digits}} [{min(values):{digits}}..'
          f'{max(values):{digits}}]')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--steps', type=int, default=1_000_000)
  parser.add_argument('--repeats', type=int, default=3, help='for (a)')
  parser.add_argument('--encode_repeats', type=int, default=2, help='for (b)')
  parser.add_argument('--no_prepare', action='store_true', help='skip (c)')
  parser.add_argument('--build_repeats', type=int, default=3, help='for (c)')
  args = parser.parse_args()

  with tempfile.TemporaryDirectory() as tmp:
    manual_dir = pathlib.Path(tmp) / 'manual'
    manual_dir.mkdir()
    path = manual_dir / FILE_NAME
    start = time.perf_counter()
    num_episodes = write_file(path, args.steps)
    print(f'wrote {args.steps} rows, {num_episodes} episodes, {path.stat().st_size / 2**20:.0f} MiB '
          f'in {time.perf_counter() - start:.1f}s')

    ours = d4rl_dataset_builder.Builder(config=CONFIG, data_dir=os.path.join(tmp, 'ours'))
    theirs = tfds.builder_cls('d4rl_mujoco_walker2d')(config='v2-random',
                                                      data_dir=os.path.join(tmp, 'tfds'))
    ours_examples = lambda: ours._generate_examples(path)  # pylint: disable=protected-access
    tfds_examples = lambda: dataset_utils.generate_examples(str(path))

    skip = lambda example: None
    stages = {
        '(a) generate': ({'ours': (ours_examples, skip), 'tfds': (tfds_examples, skip)},
                         args.repeats),
        '(b) generate + encode + serialize': (
            {'ours': (ours_examples, encoder(ours.info.features)),
             'tfds': (tfds_examples, encoder(theirs.info.features))}, args.encode_repeats),
    }
    for stage, (pipelines, repeats) in stages.items():
      best = compare(pipelines, repeats)
      for label, (wall, cpu, count) in best.items():
        print(f'{stage} {label}: {wall:8.2f}s wall {args.steps / wall:10,.0f} rows/s | '
              f'{cpu:8.2f}s CPU {args.steps / cpu:10,.0f} rows/s ({count} episodes)')
      print(f'{stage} speed-up ours/tfds: {best["tfds"][0] / best["ours"][0]:.2f}x wall, '
            f'{best["tfds"][1] / best["ours"][1]:.2f}x CPU')

    if not args.no_prepare:
      seconds = {'ours': [], 'tfds': []}
      for repeat in range(args.build_repeats):
        for label, build in (('ours', build_ours), ('tfds', build_tfds)):
          data_dir = os.path.join(tmp, f'{label}-{repeat}')
          start = time.perf_counter()
          episodes = build(manual_dir, data_dir, theirs.info.features)
          seconds[label].append(time.perf_counter() - start)
          shutil.rmtree(data_dir)
        print(f'(c) repeat {repeat}: ours {seconds["ours"][-1]:.1f}s, tfds {seconds["tfds"][-1]:.1f}s '
              f'({episodes} episodes)', flush=True)
      for label, values in seconds.items():
        print(f'(c) full build {label}: {spread([args.steps / v for v in values])} rows/s')
      ratios = [t / o for o, t in zip(seconds['ours'], seconds['tfds'])]
      print(f'(c) full build speed-up ours/tfds: {spread(ratios)}x (paired by repeat; load '
            f'{os.getloadavg()[0]:.1f})')


if __name__ == '__main__':
  main()
