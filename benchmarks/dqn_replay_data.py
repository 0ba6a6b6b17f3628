"""Realistic DQN Replay checkpoints for benchmarks: batch_rl's files, Atari-like frames, any size.

  python benchmarks/dqn_replay_data.py --rows 1000000 [--checkpoints 1] [--out DIR]

Writes DIR/NAME/Pong/1/replay_logs/ (NAME: ROWS, or CHECKPOINTSxROWS for several checkpoints) as batch_rl's logged replay buffer writes
it: per checkpoint k, `$store$_{observation,action,reward,terminal}_ckpt.k.gz` (gzip of the bytes
`np.save` writes: (rows, 84, 84) uint8 frames, int32 actions, float32 clipped rewards, uint8
terminals) and `add_count_ckpt.k.gz` ((k + 1) * rows: each checkpoint holds the rows added since the
one before, so episodes run on across checkpoints). gzip level 1 (dopamine writes level 9; level 1
writes ~5x faster and inflates at the same speed), written in blocks of rows: memory stays at a few
blocks, whatever the size. Then DIR/READY_NAME names the directory, so that other
benchmarks (and other engineers) can reuse a complete checkpoint set.

Frames look like a downsampled Atari screen: a dark score band with digits that change, borders, a
dithered playfield, a textured band of bricks (fixed per episode), and six sprites moving at
sub-pixel speeds with an anti-aliased edge. They compress ~17x with gzip -1 (real DQN Replay
observation files are ~15-25x), episodes last 500-3,000 steps behind dopamine's 3 all-zero padding
rows, and actions, rewards and terminals follow the same stream.
"""

from __future__ import annotations

import argparse
import gzip
import os
import pathlib
import time
from typing import Callable

import numpy as np

DEFAULT_OUT = pathlib.Path('/work/bench_data/dqn_replay')
FIELDS = ('observation', 'action', 'reward', 'terminal')
PADDING = 3  # dopamine's stack_size - 1 zero rows before each episode.
BLOCK = 4096
HEIGHT = WIDTH = 84


def name(rows: int, checkpoints: int) -> str:
  return str(rows) if checkpoints == 1 else f'{checkpoints}x{rows}'


def run_dir(out: pathlib.Path, rows: int, checkpoints: int) -> pathlib.Path:
  """The --manual_dir of a checkpoint set (replay logs lie below it at Pong/1/replay_logs)."""
  return pathlib.Path(out) / name(rows, checkpoints)


def ready_file(out: pathlib.Path, rows: int, checkpoints: int) -> pathlib.Path:
  return pathlib.Path(out) / f'READY_{name(rows, checkpoints)}'


class Stream:
  """The add stream of a run: episode layout, actions, rewards, terminals and frames by add index."""

  def __init__(self, total_rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    lengths = []
    while sum(lengths) < total_rows:
      lengths.append(int(rng.integers(500, 3001)) + PADDING + 1)
    ends = np.cumsum(lengths)
    self.starts = ends - np.array(lengths)
    self.terminal = np.zeros(ends[-1], np.uint8)
    self.terminal[ends - 1] = 1
    self.padding = np.zeros(ends[-1], bool)
    for start in self.starts:
      self.padding[start:start + PADDING] = True
    self.action = (rng.integers(0, 6, ends[-1])).astype(np.int32)
    self.reward = np.clip(np.round(rng.standard_normal(ends[-1]) * 0.3), -1, 1).astype(np.float32)
    self.action[self.padding], self.reward[self.padding] = 0, 0
    self.seed = seed

  def frames(self, start: int, stop: int) -> np.ndarray:
    """Frames of add indices [start, stop): each episode's own screen, zeros on padding rows."""
    out = np.zeros((stop - start, HEIGHT, WIDTH), np.uint8)
    first = int(np.searchsorted(self.starts, start, side='right')) - 1
    for episode in range(first, len(self.starts)):
      begin = int(self.starts[episode])
      if begin >= stop:
        break
      lo, hi = max(start, begin + PADDING), min(stop, self._end(episode))
      if lo < hi:
        out[lo - start:hi - start] = self._screen(episode, np.arange(lo - begin, hi - begin))
    return out

  def _end(self, episode: int) -> int:
    return int(self.starts[episode + 1]) if episode + 1 < len(self.starts) else len(self.terminal)

  def _screen(self, episode: int, t: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng((self.seed, episode))
    background = np.full((HEIGHT, WIDTH), 87, np.uint8)
    background[:10], background[10:12], background[-6:] = 30, 236, 236
    background[12:50] = np.clip(background[12:50] + rng.integers(-3, 4, (38, WIDTH)), 0, 255)
    background[50:74] = rng.integers(40, 140, (6, 21), dtype=np.uint8).repeat(4, 0).repeat(4, 1)
    frames = np.broadcast_to(background, (len(t), HEIGHT, WIDTH)).copy()
    rows, cols = np.arange(HEIGHT)[None, :], np.arange(WIDTH)[None, :]
    for _ in range(6):
      h, w = rng.integers(2, 9, 2)
      vy, vx = rng.uniform(-1.5, 1.5, 2)
      y0, x0 = rng.uniform(12, 70, 2)
      value = int(rng.integers(100, 250))
      y = (y0 + vy * t) % (HEIGHT - 18 - h) + 12
      x = (x0 + vx * t) % (WIDTH - w)
      top, left = y.astype(np.int64), x.astype(np.int64)
      in_rows = (rows >= top[:, None]) & (rows <= top[:, None] + h)  # Plus an anti-aliased row.
      in_cols = (cols >= left[:, None]) & (cols < left[:, None] + w)
      n, r, c = np.nonzero(in_rows[:, :, None] & in_cols[:, None, :])
      weight = np.where(r == top[n] + h, (y % 1)[n], 1.0)
      frames[n, r, c] = (frames[n, r, c] * (1 - weight) + value * weight).astype(np.uint8)
    score = (t // 300) % 10
    frames[:, 2:8, 30:34] = (score * 20 + 50).astype(np.uint8)[:, None, None]
    return frames


def _write_npy_gzip(path: pathlib.Path, rows: int, row_shape: tuple, dtype: np.dtype,
                    block: Callable[[int, int], np.ndarray]) -> None:
  """The bytes np.save writes, gzip'd at level 1, produced block by block; renamed into place."""
  partial = path.with_name(path.name + '.partial')
  with gzip.GzipFile(partial, 'wb', compresslevel=1) as f:
    header = {'descr': np.lib.format.dtype_to_descr(np.dtype(dtype)), 'fortran_order': False,
              'shape': (rows,) + row_shape}
    np.lib.format.write_array_header_1_0(f, header)
    for start in range(0, rows, BLOCK):
      f.write(np.ascontiguousarray(block(start, min(rows, start + BLOCK)), dtype=dtype).tobytes())
  os.replace(partial, path)


def write_run(out: pathlib.Path, rows: int, checkpoints: int = 1, seed: int = 0) -> pathlib.Path:
  """Writes `checkpoints` checkpoints of `rows` rows each (skipping complete files); returns the
  manual_dir. The READY file is written last."""
  manual_dir = run_dir(out, rows, checkpoints)
  logs = manual_dir / 'Pong' / '1' / 'replay_logs'
  logs.mkdir(parents=True, exist_ok=True)
  stream = Stream(rows * checkpoints, seed)
  for k in range(checkpoints):
    base = k * rows
    columns = {'action': stream.action, 'reward': stream.reward, 'terminal': stream.terminal}
    for field in FIELDS:
      path = logs / f'$store$_{field}_ckpt.{k}.gz'
      if path.exists():
        continue
      started = time.perf_counter()
      if field == 'observation':
        _write_npy_gzip(path, rows, (HEIGHT, WIDTH), np.uint8,
                        lambda a, b: stream.frames(base + a, base + b))
      else:
        column = columns[field]
        _write_npy_gzip(path, rows, (), column.dtype, lambda a, b, c=column: c[base + a:base + b])
      print(f'{path.name}: {path.stat().st_size / 2**20:.0f} MiB in '
            f'{time.perf_counter() - started:.0f}s', flush=True)
    with gzip.open(logs / f'add_count_ckpt.{k}.gz', 'wb') as f:
      np.save(f, np.array(base + rows, np.int64))
  ready_file(out, rows, checkpoints).write_text(str(manual_dir) + '\n')
  return manual_dir


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--rows', type=int, default=1_000_000, help='rows per checkpoint')
  parser.add_argument('--checkpoints', type=int, default=1)
  parser.add_argument('--out', type=pathlib.Path, default=DEFAULT_OUT)
  args = parser.parse_args()
  print(write_run(args.out, args.rows, args.checkpoints))


if __name__ == '__main__':
  main()
