"""Compiled (numba) kernels for cached row blocks against the numpy the streams use (issue 21).

    pip install numba==0.68.0 && python benchmarks/stream_kernels.py [--rounds 5]

Not a dependency: measured, these kernels did not bring cached CartPole-like streams near 0.8x the
batched raw read (benchmarks/stream.py's docstring has the figures). This script keeps the
measurement repeatable on a quieter machine. Per unit of a 10,240-unit block, CPU ns in one
process, rounds interleaved, median [min..max]:
  * permutation: numpy's `default_rng(seed).permutation(n)` against the same permutation written
    out in numba (numpy's PCG64 as a 128-bit LCG in 64-bit halves, its masked-rejection
    Fisher-Yates), checked equal bit for bit;
  * unit rows: a block piece's first row per unit, np.repeat + np.arange against one numba loop;
  * gather: CartPole's 7 step fields (float32[4], int64, float32 x2, bool x3) at random rows,
    numpy `take` per field against a numba loop over all fields (literal_unroll).
The first numba call of a fresh process (loading its cache=True compile, or compiling) is printed.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

BLOCK = 10_240
ROWS = 47_000  # The --quick CartPole-like dataset's steps.
_MASK64 = (1 << 64) - 1


def _kernels():
  import numba  # pylint: disable=g-import-not-at-top
  jit = numba.njit(cache=True, nogil=True, boundscheck=False)
  literal_unroll = numba.literal_unroll

  @jit
  def shuffle_pcg64(values, state_hi, state_lo, inc_hi, inc_lo, has_uint32, uinteger):
    mult_hi, mult_lo = np.uint64(2549297995355413924), np.uint64(4865540595714422341)
    low32, s32 = np.uint64(0xFFFFFFFF), np.uint64(32)
    for i in range(len(values) - 1, 0, -1):
      mask = np.uint64(i)
      for shift in (1, 2, 4, 8, 16, 32):
        mask |= mask >> np.uint64(shift)
      while True:
        if has_uint32:
          has_uint32 = False
          draw = uinteger
        else:  # state = state * MULT + inc (mod 2**128), then the XSL-RR output.
          a0, a1, b0, b1 = state_lo & low32, state_lo >> s32, mult_lo & low32, mult_lo >> s32
          p00, p01, p10 = a0 * b0, a0 * b1, a1 * b0
          middle = (p00 >> s32) + (p01 & low32) + (p10 & low32)
          high = (a1 * b1 + (p01 >> s32) + (p10 >> s32) + (middle >> s32) +
                  state_lo * mult_hi + state_hi * mult_lo)
          low = state_lo * mult_lo
          state_lo = low + inc_lo
          state_hi = high + inc_hi + np.uint64(state_lo < low)
          xored, rotation = state_hi ^ state_lo, state_hi >> np.uint64(58)
          output = (xored >> rotation) | (xored << ((np.uint64(64) - rotation) & np.uint64(63)))
          has_uint32, uinteger = True, output >> s32
          draw = output & low32
        j = draw & mask
        if j <= np.uint64(i):
          break
      k = np.int64(j)
      values[i], values[k] = values[k], values[i]

  @jit
  def fill_unit_rows(shifts, before, lo, hi, offset, out):
    filled, stop = 0, offset + len(out)
    for episode in range(lo, hi):
      for position in range(max(before[episode], offset), min(before[episode + 1], stop)):
        out[filled] = shifts[episode] + position
        filled += 1

  @jit
  def gather_all(fields, first, order):
    for field in literal_unroll(fields):
      column, out = field
      for k in range(len(order)):
        row = np.intp(first[order[k]])
        for c in range(column.shape[1]):
          out[k, c] = column[row, c]

  return shuffle_pcg64, fill_unit_rows, gather_all


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--blocks', type=int, default=200, help='blocks timed per rate and round')
  args = parser.parse_args()
  start = time.perf_counter()
  shuffle_pcg64, fill_unit_rows, gather_all = _kernels()
  rng = np.random.default_rng(0)
  counts = rng.integers(20, 295, 300)
  before = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
  shifts = rng.integers(0, ROWS - 300, 300).astype(np.int64)
  columns = {'observation': rng.normal(size=(ROWS, 4)).astype(np.float32),
             'action': rng.integers(0, 2, ROWS), 'reward': np.ones(ROWS, np.float32),
             'discount': np.ones(ROWS, np.float32), 'is_first': np.zeros(ROWS, bool),
             'is_last': np.zeros(ROWS, bool), 'is_terminal': np.zeros(ROWS, bool)}
  first = rng.integers(0, ROWS, BLOCK).astype(np.int32)

  def numba_permutation(seed):
    state = np.random.default_rng(seed).bit_generator.state
    values = np.arange(BLOCK, dtype=np.int64)
    pcg, inc = state['state']['state'], state['state']['inc']
    shuffle_pcg64(values, np.uint64(pcg >> 64), np.uint64(pcg & _MASK64), np.uint64(inc >> 64),
                  np.uint64(inc & _MASK64), bool(state['has_uint32']), np.uint64(state['uinteger']))
    return values

  def pieces(offset):
    lo = int(np.searchsorted(before, offset, side='right')) - 1
    hi = int(np.searchsorted(before, offset + BLOCK, side='left'))
    return lo, hi

  def numpy_rows(offset):
    lo, hi = pieces(offset)
    base = np.repeat(shifts[lo:hi], np.diff(before[lo:hi + 1]))
    within = offset - int(before[lo])
    return (base[within:within + BLOCK] + np.arange(offset, offset + BLOCK)).astype(np.int32)

  def numba_rows(offset):
    out = np.empty(BLOCK, np.int32)
    fill_unit_rows(shifts, before, *pieces(offset), offset, out)
    return out

  def numpy_gather(order):
    rows = first[order].astype(np.intp)
    return {path: column.take(rows, axis=0) for path, column in columns.items()}

  def numba_gather(order):
    out = {path: np.empty((BLOCK, *c.shape[1:]), c.dtype) for path, c in columns.items()}
    gather_all(tuple((c.reshape(ROWS, -1), out[p].reshape(BLOCK, -1))
                     for p, c in columns.items()), first, order)
    return out

  order = np.random.default_rng(1).permutation(BLOCK)
  offsets = [int(o) for o in rng.integers(0, int(before[-1]) - BLOCK, args.blocks)]
  checks = (np.array_equal(numba_permutation([5, 7]), np.random.default_rng([5, 7]).permutation(
      BLOCK)) and np.array_equal(numba_rows(offsets[0]), numpy_rows(offsets[0])) and all(
          np.array_equal(a, b) for a, b in zip(numba_gather(order).values(),
                                               numpy_gather(order).values())))
  print(f'first numba calls (import, compile or cache load): {time.perf_counter() - start:.1f} s; '
        f'numba values equal numpy\'s: {checks}')
  rates = {
      'permutation numpy': lambda b: np.random.default_rng([5, b]).permutation(BLOCK),
      'permutation numba': lambda b: numba_permutation([5, b]),
      'unit rows numpy': lambda b: numpy_rows(offsets[b]),
      'unit rows numba': lambda b: numba_rows(offsets[b]),
      'gather numpy': lambda b: numpy_gather(order),
      'gather numba': lambda b: numba_gather(order),
  }
  times = {name: [] for name in rates}
  load = [os.getloadavg()[0]]
  for _ in range(args.rounds):
    for name, rate in rates.items():
      cpu = time.process_time()
      for block in range(args.blocks):
        rate(block)
      times[name].append((time.process_time() - cpu) / args.blocks / BLOCK * 1e9)
    load.append(os.getloadavg()[0])
  for name, values in times.items():
    print(f'{name:20s} {np.median(values):6.1f} ns a unit [{min(values):.1f}..{max(values):.1f}]')
  print(f'1-minute load during the rounds: {min(load):.1f}..{max(load):.1f}')


if __name__ == '__main__':
  main()
