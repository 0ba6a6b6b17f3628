"""PNG encoders for Atari frames: encode us/frame and bytes/frame per deflate library, level and
scanline filter, on the same frames in the same run.

  python benchmarks/png_encoders.py [--frames 4096] [--repeats 5]

Frames: the DQN Replay benchmark checkpoint's observations (benchmarks/dqn_replay_data.py, the
first --frames rows of /work/bench_data/dqn_replay/100000, written when missing) and, when present,
real Pong frames from il-representations' native demos (/work/shared/real_data, the newest frame
of each 4-frame stack). Each design encodes columns of 1024 frames the way
`compression.png_rows` does (filters computed in numpy over the whole column, one deflate call per
frame, chunks joined); its time is the median [min..max] over --repeats passes, rounds
alternating the designs. Every design's PNGs are first checked to decode (tf.io.decode_png) to the
frames. libdeflate (the `deflate` package, not a dependency) is measured when installed.

Measured (--frames 4096 --repeats 5, 2 shared cores at load 3.4-3.6; us/frame, bytes/frame):
  design          benchmark frames (7,056 B raw)    real Pong, 1,000 frames
  isal-0 none     11.6 [11.1..16.2]  3,002 B        4.3 [4.0..9.9]     635 B
  isal-0 up/sub   12.1 / 12.8        3,836 / 3,328  5.2 / 7.7          814 / 691
  isal-1 none     19.6 [19.4..20.0]  2,078          12.1 [11.1..19.9]  476
  isal-1 up/sub   23.7 / 25.5        2,532 / 2,121  13.9 / 15.1        616 / 540
  isal-2 none     21.8               2,078          12.0               476
  isal-3 none     28.3               2,108          23.1               571
  libdeflate-1    28.5               2,061          25.7               441
  libdeflate-6    42.1 (sub 44.5)    2,087 (2,076)  25.8               417
  zlib-1 none     54.9               1,998          22.6               487
No filter helps: UP and SUB make ISA-L's PNGs 2-29% larger and save under 1% with libdeflate;
levels above ISA-L's 1 cost more for at most 12% smaller PNGs. ISA-L level 0 is the one design
much faster than level 1 (1.7x on these frames, 2.8x on real ones) for 1.33-1.44x larger PNGs;
builds used it for a while, but a whole DQN Replay build gained nothing from it on a quiet machine
(benchmarks/build_dqn_replay_direct.py, direct-l0), so compression.BUILD is level 1. zlib-ng (`zlib_ng`, probed once outside this script,
load ~5): its level 1 took 30 us / 3,012 B on these frames (slower than ISA-L 1, as large as
ISA-L 0) and 10.7 us / 464 B on real Pong (between ISA-L's 0 and 1); its RLE and Huffman-only
strategies and levels 2-6 were slower than ISA-L 1.
isal-table (ISA-L level 0 with one Huffman table per 1024-frame column from 16 of its frames,
compression.BUILD since; --repeats 3, load 6-7, same run): 13.9 us / 2,100 B on these frames
(isal-1 20.1 / 2,078, isal-0 11.9 / 3,002) and 6.6 us / 533 B on real Pong (isal-1 11.4 / 476,
isal-0 4.2 / 635); UP makes its PNGs 1.2-1.4x larger. A table from 8 to 64 frames changed its
sizes by under 1% on these frames and 3% on Pong.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import dqn_replay_data  # pylint: disable=g-import-not-at-top

from rlds_suite.tfds import compression  # pylint: disable=g-import-not-at-top
from rlds_suite.tfds import png_deflate  # pylint: disable=g-import-not-at-top

REAL_PONG = pathlib.Path('/work/shared/real_data/il_representations/native/atari-pong.npz')
COLUMN = 1024


def dqn_frames(count: int) -> np.ndarray:
  from isal import igzip  # pylint: disable=g-import-not-at-top
  out = dqn_replay_data.DEFAULT_OUT
  if not dqn_replay_data.ready_file(out, 100_000, 1).exists():
    dqn_replay_data.write_run(out, 100_000, 1)
  path = (dqn_replay_data.run_dir(out, 100_000, 1) / 'Pong' / '1' / 'replay_logs' /
          '$store$_observation_ckpt.0.gz')
  with igzip.open(path, 'rb') as f:
    np.lib.format.read_magic(f)
    shape, _, dtype = np.lib.format.read_array_header_1_0(f)
    data = f.read(count * 84 * 84)
  return np.frombuffer(data, dtype).reshape(-1, 84, 84, 1)


def real_pong_frames() -> np.ndarray | None:
  if not REAL_PONG.exists():
    return None
  trajectories = np.load(REAL_PONG, allow_pickle=True)['arr_0']
  return np.concatenate([np.asarray(t['states'])[..., -1:] for t in trajectories])


LIBDEFLATE = importlib.util.find_spec('deflate') is not None  # pip install deflate; else skipped.
DESIGNS = ([('isal', level, f) for level in (0, 1, 2, 3) for f in ('none', 'up', 'sub')] +
           [('libdeflate', level, f) for level in (1, 2, 3, 4, 6) for f in ('none', 'up', 'sub')
            if LIBDEFLATE] +
           [('zlib', 1, f) for f in ('none', 'up')] +
           [('isal-table', 0, f) for f in ('none', 'up') if png_deflate.available()])


def encode(frames: np.ndarray, library: str, level: int, filter_name: str) -> list[bytes]:
  return compression.png_rows(frames, compression.PngEncoder(library, level, filter_name))


def measure(frames: np.ndarray, repeats: int) -> dict[tuple, tuple[list[float], float]]:
  times: dict[tuple, list[float]] = {design: [] for design in DESIGNS}
  sizes: dict[tuple, float] = {}
  for _ in range(repeats):
    for design in DESIGNS:
      started = time.perf_counter()
      total = 0
      for start in range(0, len(frames), COLUMN):
        total += sum(map(len, encode(frames[start:start + COLUMN], *design)))
      times[design].append((time.perf_counter() - started) / len(frames) * 1e6)
      sizes[design] = total / len(frames)
  return {design: (times[design], sizes[design]) for design in DESIGNS}


def check(frames: np.ndarray) -> None:
  """Every design's PNGs decode (tf.io.decode_png) to the frames."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  sample = frames[:64]
  for design in DESIGNS:
    for png, frame in zip(encode(sample, *design), sample):
      np.testing.assert_array_equal(tf.io.decode_png(png).numpy(), frame)


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--frames', type=int, default=4096)
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--no_check', action='store_true')
  args = parser.parse_args()
  sets = {'dqn_replay benchmark frames': dqn_frames(args.frames)}
  real = real_pong_frames()
  if real is not None:
    sets['real Pong (il-representations)'] = real
  print(f'load {os.getloadavg()[0]:.1f} (1 min) at start, {os.cpu_count()} cores')
  for name, frames in sets.items():
    if not args.no_check:
      check(frames)
    results = measure(frames, args.repeats)
    base = results[('isal', 1, 'none')]
    base_time = statistics.median(base[0])
    print(f'{name}: {len(frames)} frames {frames.shape[1:]}, raw {frames[0].nbytes} B; '
          f'load now {os.getloadavg()[0]:.1f}')
    print(f'  {"design":24s} {"us/frame":>24s} {"vs isal-1":>9s} {"B/frame":>8s} {"vs isal-1":>9s}')
    for design, (times, size) in results.items():
      label = f'{design[0]}-{design[1]} {design[2]}'
      print(f'  {label:24s} {statistics.median(times):8.1f} [{min(times):.1f}..{max(times):.1f}]'
            f'{"":>4s} {statistics.median(times) / base_time:8.2f}x {size:8.0f} '
            f'{size / base[1]:8.2f}x')


if __name__ == '__main__':
  main()
