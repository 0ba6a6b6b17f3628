"""Stream throughput and memory: the naive RLDS recipe, the raw TFRecord read rate, our streams.

    python benchmarks/stream.py            # 1M-step D4RL-like dataset, 84x84x4 images, 10x copy
    python benchmarks/stream.py --quick    # a smoke run in well under a minute

Datasets (written once under --work_dir): a D4RL-like dataset (obs float32[17], action float32[6],
1000-step episodes), an image dataset (observation uint8[84, 84, 4], ZLIB-encoded on purpose, as
rlds_suite.features does for frame stacks) and a 10x larger copy of the first (its files repeated,
metadata rewritten with tfds.folder_dataset.write_metadata). Rates are steps per second, read in
graph by Dataset.reduce (pipeline capacity) and in a Python loop (what a training loop sees). Peak
memory is the peak RSS of a subprocess reading the same number of batches from each dataset.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time

import numpy as np

BATCH = 256


def _write_datasets(work_dir: str, episodes: int, image_episodes: int, steps: int) -> dict[str, str]:
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  from rlds_suite import episodes as episodes_lib  # pylint: disable=g-import-not-at-top
  from rlds_suite import features, writing  # pylint: disable=g-import-not-at-top

  def make(num, observe):
    rng = np.random.default_rng(0)
    for e in range(num):
      trajectory = episodes_lib.Trajectory(
          observations=observe(rng, steps), actions=rng.normal(size=(steps, 6)).astype(np.float32),
          rewards=rng.normal(size=steps).astype(np.float32),
          ending=episodes_lib.Ending.TRUNCATED if e % 3 else episodes_lib.Ending.TERMINATED)
      yield episodes_lib.to_episode(trajectory)

  def vectors(rng, n):
    return rng.normal(size=(n, 17)).astype(np.float32)

  def frames(rng, n):
    base = np.add.outer(np.arange(84), np.arange(84)).astype(np.uint8)[None, :, :, None]
    noise = rng.integers(0, 4, size=(n, 84, 84, 4), dtype=np.uint8)
    return base + noise + (np.arange(n, dtype=np.uint8)[:, None, None, None])

  action = features.tensor((6,), np.float32)
  specs = {
      'd4rl_like': (episodes, vectors, features.tensor((17,), np.float32)),
      'image_like': (image_episodes, frames, features.tensor((84, 84, 4), np.uint8)),
  }
  dirs = {}
  for name, (num, observe, observation) in specs.items():
    feature_dict = features.rlds_features(observation=observation, action=action)
    target = os.path.join(work_dir, name, '1.0.0')
    if not os.path.exists(os.path.join(target, 'dataset_info.json')):
      shutil.rmtree(os.path.join(work_dir, name), ignore_errors=True)
      start = time.perf_counter()
      writing.write_episodes(make(num, observe), features=feature_dict, data_dir=work_dir,
                             name=name)
      print(f'wrote {name}: {num * steps} steps in {time.perf_counter() - start:.0f}s',
            file=sys.stderr)
    dirs[name] = target
  # 10x larger: the same files ten times over (decoding cost per step is unchanged).
  large = os.path.join(work_dir, 'd4rl_like_x10', '1.0.0')
  if not os.path.exists(os.path.join(large, 'dataset_info.json')):
    os.makedirs(large, exist_ok=True)
    files = sorted(f for f in os.listdir(dirs['d4rl_like']) if '.tfrecord' in f)
    total = 10 * len(files)
    for copy in range(10):
      for i, f in enumerate(files):
        shutil.copy(os.path.join(dirs['d4rl_like'], f),
                    os.path.join(large, f'd4rl_like_x10-train.tfrecord-'
                                 f'{copy * len(files) + i:05d}-of-{total:05d}'))
    feature_dict = features.rlds_features(observation=features.tensor((17,), np.float32),
                                          action=action)
    tfds.folder_dataset.write_metadata(data_dir=large, features=feature_dict)
  dirs['d4rl_like_x10'] = large
  return dirs


def _rates(dataset, steps_per_element: int, elements: int) -> dict[str, float]:
  """Steps/s read in graph (reduce) and in a Python loop, each over `elements` elements."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  part = dataset.take(elements)
  next(iter(part))  # Warm up: open files, trace functions.
  start = time.perf_counter()
  count = int(part.reduce(tf.constant(0, tf.int64), lambda c, _: c + 1))
  graph = count * steps_per_element / (time.perf_counter() - start)
  start = time.perf_counter()
  count = sum(1 for _ in part)
  python = count * steps_per_element / (time.perf_counter() - start)
  return {'graph': graph, 'python': python}


def _measure(dirs: dict[str, str], args) -> dict[str, dict[str, float]]:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from rlds_suite import datasets, streams  # pylint: disable=g-import-not-at-top
  results = {}
  for name in ('d4rl_like', 'image_like'):
    builder = datasets.load_builder(dirs[name])
    episodes = builder.info.splits['train'].num_examples
    steps_per_episode = args.steps
    total = episodes * steps_per_episode
    files = sorted(str(p) for p in builder.data_path.glob('*.tfrecord*'))
    batches = min(total // BATCH, args.max_batches)
    naive_batches = max(batches // (10 if name == 'd4rl_like' else 4), 20)
    naive = (builder.as_dataset(split='train').repeat()
             .flat_map(lambda e: e['steps']).shuffle(10_000).batch(BATCH))
    raw = tf.data.TFRecordDataset(files, buffer_size=8 << 20).repeat()
    ours = streams.stream([dirs[name]], batch_size=BATCH, seed=0)
    results[name] = {
        'naive': _rates(naive, BATCH, naive_batches),
        'raw_read': _rates(raw, steps_per_episode, max(batches * BATCH // steps_per_episode, 1)),
        'ours': _rates(ours, BATCH, batches),
    }
    if name == 'd4rl_like':
      mix = streams.stream([dirs[name]] * 3, batch_size=BATCH, seed=0)
      results[name]['ours_3_mix'] = _rates(mix, BATCH, batches)
  return results


def _peak_rss_mib(directory: str, batches: int) -> float:
  out = subprocess.run([sys.executable, __file__, '--child_read', directory, '--max_batches',
                        str(batches)], capture_output=True, text=True, check=True,
                       env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
  return float(out.stdout.strip().splitlines()[-1])


def _child_read(directory: str, batches: int) -> None:
  from rlds_suite import streams  # pylint: disable=g-import-not-at-top
  for _ in streams.stream([directory], batch_size=BATCH, seed=0).take(batches):
    pass
  print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


def _rounded(value):
  if isinstance(value, dict):
    return {k: _rounded(v) for k, v in value.items()}
  return round(value, 2) if value < 100 else round(value)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--quick', action='store_true', help='small datasets, few batches')
  parser.add_argument('--work_dir', default='/tmp/rlds_suite_stream_benchmark')
  parser.add_argument('--max_batches', type=int, default=None)
  parser.add_argument('--child_read', default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
  if args.child_read:
    _child_read(args.child_read, args.max_batches)
    return
  args.steps = 1000
  episodes, image_episodes = (50, 4) if args.quick else (1000, 20)
  if args.max_batches is None:
    args.max_batches = 100 if args.quick else 3900
  work_dir = os.path.join(args.work_dir, 'quick' if args.quick else 'full')
  dirs = _write_datasets(work_dir, episodes, image_episodes, args.steps)
  results = _measure(dirs, args)
  memory_batches = min(episodes * args.steps // BATCH, args.max_batches)
  memory = {name: _peak_rss_mib(dirs[name], memory_batches) for name in ('d4rl_like', 'd4rl_like_x10')}
  report = {'results_steps_per_s': results, 'peak_rss_mib': memory, 'ratios': {}}
  for name, rates in results.items():
    for mode in ('graph', 'python'):
      report['ratios'][f'{name}/{mode}'] = {
          'ours/naive': rates['ours'][mode] / rates['naive'][mode],
          'ours/raw_read': rates['ours'][mode] / rates['raw_read'][mode],
          **({'mix/naive': rates['ours_3_mix'][mode] / rates['naive'][mode]}
             if 'ours_3_mix' in rates else {}),
      }
  report['peak_rss_mib']['x10/x1'] = memory['d4rl_like_x10'] / memory['d4rl_like']
  print(json.dumps(_rounded(report), indent=1))
  for name, ratios in report['ratios'].items():
    print(name, ' '.join(f'{k}={v:.2f}' for k, v in ratios.items()))


if __name__ == '__main__':
  main()
