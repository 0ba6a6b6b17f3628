"""rlu_atari build: the numpy reader (no TensorFlow) against the TensorFlow reader it replaced.

  python benchmarks/build_rlu_atari.py [--shards 2] [--frames_per_shard 50000]
      [--long_episode 27000] [--rounds 3] [--paths beam no_beam]

Writes (once, reused when READY) an atari_episodes_ordered-style run as the released shards are
made: GAME/run_1-0000i-of-0000N, GZIP TFRecords (tf.io.TFRecordWriter) of one tf.train.Example per
episode with TFDS's published rlu_atari features, each frame a PNG from tf.io.encode_png (libpng's
filtered rows). Frames are benchmarks/dqn_replay_data.py's Atari-like screens; episodes last
500-3,000 steps, the first of shard 0 `--long_episode` steps (27,000: Atari's 108,000-frame cap
with frame skip 4, the longest episode a real shard can hold, which bounds the memory of any
reader that holds one episode).

Each build runs as `rlds-suite build` runs it (the DirectRunner with 2 worker threads for `beam`,
or `beam=False`; then the validation pass) in a fresh process whose process tree's resident memory
is sampled (build_dqn_replay.tree_peak), with the source read by `ours`
(tfrecord_episodes: tfrecord_files + shard_reader) or by `tf` (tf.data.TFRecordDataset,
tf.io.parse_single_example, tf.io.decode_png: the code before issue 17). Rounds alternate readers;
median [min-max] over rounds, and the tf/ours time ratio paired by round. The built shards of the
two readers are compared byte for byte.

To compare with an earlier version (issue 17's before/after), export it (`git archive REV
rlds_suite | tar -x -C DIR`) and run with PYTHONPATH=DIR from a directory outside the checkout
(a child started with `-c` puts its working directory first on sys.path).

Measured this way for b751943 (a libpng-filtered frame inflated once, then unfiltered by Pillow
over the inflated rows, instead of inflated and then decoded again by Pillow): `--readers ours
--rounds 1` per tree, 6 rounds alternating before/after, the default source (2x50,000 frames,
one 27,000-step episode), median [min-max], on the shared 2-core machine at load 12-29 (others'
busy loops): DirectRunner 1,123 [511-1,919] -> 1,481 [513-1,942] frames/s, after/before paired
1.31 [0.27-1.98]x; `beam=False` 809 [293-1,332] -> 1,071 [786-1,555] frames/s, 1.29
[0.62-5.30]x: the ~5% of a build that decoding was expected to save is well inside this load's
spread. Peak memory: 714 [705-731] -> 692 [682-709] MiB with Beam, 548 -> 548 MiB without.
Reading and decoding alone (tfrecord_episodes over 20,120 frames of one source shard, 5 rounds
alternating, load 16-28): 1.60 [1.44-3.41]x faster, its PNG decoding 1.69 [1.55-3.53]x; one
84x84 libpng frame 99 -> 53 us at load ~10.

Where the Beam path's extra memory is (issue 17; `--readers ours --rounds 1`, load 19-24 on the 2
shared cores, one run each): with the 27,000-step episode the process tree peaked at 706 MiB RSS /
621 MiB PSS with Beam and 553 / 474 without (+153 RSS, +147 PSS; the 739 vs 518 quoted in the
README was another load). `import apache_beam` alone takes the builder's process from 87 to 221
MiB (+134 MiB: Beam's __init__ imports its IO connectors and with them pandas, pyarrow, boto3,
pymongo, grpc), nearly all of it. Without the long episode (2x50000-long0) the trees were 400 MiB
PSS with Beam and 358 without (the non-Beam tree's RSS, 617 MiB, counts the shared-memory blocks
in the builder and in both pool workers: compare PSS there). Sampled every 50 ms inside the Beam
build, its peak (751 MiB) fell while one DirectRunner thread PNG-encoded the long episode and the
other decoded shard 1's frames: no copy of the episode beyond the non-Beam path's (both serialize
a long episode in the reading process with the same `episode_wire.serialize`); the second
thread's episodes in flight stand for what the non-Beam path holds in its pool workers. Handing
the heap back after every example a Beam worker writes (writing.release_free_heap, which the
non-Beam writer calls per shard) peaked at 728 MiB, within the noise: not kept. After the build,
before validation, a malloc_trim took the process from 549 to 378 MiB once and from 547 to 539
in the next run, so what stays is not reliably free heap. Nothing cheap is left to take: the rest
of the gap is Beam's own import.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import shutil
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import build_dqn_replay  # pylint: disable=g-import-not-at-top,wrong-import-position
import dqn_replay_data  # pylint: disable=g-import-not-at-top,wrong-import-position

DEFAULT_OUT = pathlib.Path('/work/bench_data/rlu_atari')
GAME = 'Pong'

CHILD = '''
import sys
from rlds_suite.tfds import beam, datasets, tfrecord_episodes
reader, manual_dir, data_dir, shards, path = sys.argv[1:6]
if reader == 'tf':
  import tensorflow as tf
  def read_examples(shard, spec):
    dtypes = {'int64': tf.int64, 'float32': tf.float32, 'bytes': tf.string}
    tf_spec = {k: tf.io.FixedLenSequenceFeature(list(f.shape), dtypes[f.dtype], allow_missing=True)
               if f.sequence else tf.io.FixedLenFeature(list(f.shape), dtypes[f.dtype])
               for k, f in spec.items()}
    for record in tf.data.TFRecordDataset(str(shard), compression_type='GZIP'):
      yield {k: v.numpy() for k, v in tf.io.parse_single_example(record, tf_spec).items()}
  def decode_frames(pngs, shape):
    import numpy as np
    return np.stack([tf.io.decode_png(png).numpy() for png in pngs])
  tfrecord_episodes.read_examples = read_examples
  tfrecord_episodes.decode_frames = decode_frames
with beam.options_for('direct', 2) as options:
  builder = datasets.build('rlds_suite_rlu_atari/Pong_run_1', manual_dir=manual_dir,
                           data_dir=data_dir, beam_options=options, beam=path == 'beam',
                           num_shards=int(shards))
report = datasets.validate(builder, progress_bar=False)
print('episodes', report.num_episodes, 'valid', report.ok, 'tensorflow', 'tensorflow' in sys.modules)
'''


def _episode_lengths(rng: np.random.Generator, frames: int, first: int) -> list[int]:
  lengths = [first] if first else []
  while sum(lengths) < frames:
    lengths.append(int(rng.integers(500, 3001)))
  lengths[-1] -= sum(lengths) - frames
  return [n for n in lengths if n > 0]


def write_source(out: pathlib.Path, shards: int, frames_per_shard: int, long_episode: int) -> pathlib.Path:
  """The manual_dir of a run of `shards` shards (written unless READY); returns it."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  name = f'{shards}x{frames_per_shard}-long{long_episode}'
  manual_dir, ready = out / name, out / f'READY_{name}'
  if ready.exists():
    return manual_dir
  (manual_dir / GAME).mkdir(parents=True, exist_ok=True)
  stream = dqn_replay_data.Stream(1)  # Only its screens are used.
  rng = np.random.default_rng(0)
  episode = 0
  for shard in range(shards):
    started = time.perf_counter()
    path = manual_dir / GAME / f'run_1-{shard:05d}-of-{shards:05d}'
    with tf.io.TFRecordWriter(str(path), options='GZIP') as writer:
      for length in _episode_lengths(rng, frames_per_shard, long_episode if shard == 0 else 0):
        screens = stream._screen(episode, np.arange(length))  # pylint: disable=protected-access
        terminated = episode % 3 != 2
        actions = rng.integers(0, 6, length)
        unclipped = np.round(rng.standard_normal(length) * 0.3).astype(np.float32) * 3
        discounts = np.ones(length, np.float32)
        if terminated:
          discounts[-1] = actions[-1] = unclipped[-1] = 0
        clipped = np.clip(unclipped, -1, 1)
        pngs = [tf.io.encode_png(frame[:, :, None]).numpy() for frame in screens]
        ints = lambda v: tf.train.Feature(int64_list=tf.train.Int64List(value=v))
        floats = lambda v: tf.train.Feature(float_list=tf.train.FloatList(value=v))
        writer.write(tf.train.Example(features=tf.train.Features(feature={
            'checkpoint_idx': ints([shard]), 'episode_idx': ints([episode]),
            'episode_return': floats([unclipped.sum()]),
            'clipped_episode_return': floats([clipped.sum()]),
            'observations': tf.train.Feature(bytes_list=tf.train.BytesList(value=pngs)),
            'actions': ints(actions), 'unclipped_rewards': floats(unclipped),
            'clipped_rewards': floats(clipped), 'discounts': floats(discounts),
        })).SerializeToString())
        episode += 1
    print(f'{path.name}: {frames_per_shard:,} frames, {episode} episodes so far, '
          f'{path.stat().st_size / 2**20:.0f} MiB, {time.perf_counter() - started:.0f}s', flush=True)
  ready.write_text(str(manual_dir) + '\n')
  return manual_dir


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--shards', type=int, default=2)
  parser.add_argument('--frames_per_shard', type=int, default=50_000)
  parser.add_argument('--long_episode', type=int, default=27_000)
  parser.add_argument('--rounds', type=int, default=3)
  parser.add_argument('--paths', nargs='+', default=['beam', 'no_beam'], choices=('beam', 'no_beam'))
  parser.add_argument('--readers', nargs='+', default=['ours', 'tf'], choices=('ours', 'tf'))
  parser.add_argument('--limit_gb', type=float, default=3.0,
                      help='kill a build whose process tree exceeds this (shared machines)')
  parser.add_argument('--out', type=pathlib.Path, default=DEFAULT_OUT)
  args = parser.parse_args()
  print(f'load: {", ".join(f"{x:.1f}" for x in os.getloadavg())} (1/5/15 min); {args.rounds} '
        f'round(s), kill above {args.limit_gb} GB')
  manual_dir = write_source(args.out, args.shards, args.frames_per_shard, args.long_episode)
  frames = args.shards * args.frames_per_shard
  print(f'source: {manual_dir}, {frames:,} frames in {args.shards} shards '
        f'({sum(p.stat().st_size for p in (manual_dir / GAME).iterdir()) / 2**20:.0f} MiB)')
  spread = build_dqn_replay.spread
  with tempfile.TemporaryDirectory() as tmp:
    for path in args.paths:
      runs: dict[str, list[dict]] = {reader: [] for reader in args.readers}
      for round_ in range(args.rounds):
        for reader in args.readers:
          data_dir = pathlib.Path(tmp) / f'{path}-{reader}-{round_}'
          result = build_dqn_replay.tree_peak(
              [sys.executable, '-c', CHILD, reader, str(manual_dir), str(data_dir),
               str(args.shards), path], int(args.limit_gb * 2**30))
          last = result['output'].strip().splitlines()[-1:] or ['']
          if result['returncode'] != 0:
            print(f'  {path} {reader}: exit {result["returncode"]} after {result["seconds"]:.0f}s, '
                  f'peak {result["peak_bytes"] / 2**30:.2f} GiB: {last[0]}')
            continue
          runs[reader].append(result)
          print(f'  {path} {reader}: {result["seconds"]:.1f}s, tree peak '
                f'{result["peak_bytes"] / 2**20:.0f} MiB RSS ({last[0]})', flush=True)
        if round_ == 0 and len(args.readers) == 2:
          built = [sorted((pathlib.Path(tmp) / f'{path}-{r}-0').rglob('*.tfrecord*'))
                   for r in args.readers]
          same = len(built[0]) == len(built[1]) > 0 and all(
              a.name == b.name and a.read_bytes() == b.read_bytes() for a, b in zip(*built))
          print(f'  {path}: shards built by the two readers identical: {"yes" if same else "NO"}')
        for reader in args.readers:
          shutil.rmtree(pathlib.Path(tmp) / f'{path}-{reader}-{round_}', ignore_errors=True)
      for reader, results in runs.items():
        if results:
          print(f'{path} {reader:4s}: {spread([frames / r["seconds"] for r in results])} frames/s; '
                f'process-tree peak {spread([r["peak_bytes"] / 2**20 for r in results])} MiB RSS, '
                f'{spread([r["pss_peak_bytes"] / 2**20 for r in results])} MiB PSS')
      if all(len(runs[r]) == args.rounds for r in ('ours', 'tf') if r in runs) and len(runs) == 2:
        speed = [t['seconds'] / o['seconds'] for o, t in zip(runs['ours'], runs['tf'])]
        memory = [o['peak_bytes'] / t['peak_bytes'] for o, t in zip(runs['ours'], runs['tf'])]
        print(f'{path}: ours/tf speed {spread(speed)}x, peak memory {spread(memory)}x '
              f'(paired by round)')
      if runs.get('ours'):
        peak = max(r['peak_bytes'] for r in runs['ours'])
        print(f'{path}: ours under 1 GB (10^9 bytes) in every round: '
              f'{"yes" if peak < 1e9 else "no"} (max {peak / 1e9:.2f} GB)')


if __name__ == '__main__':
  main()
