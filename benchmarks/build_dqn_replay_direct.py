"""DQN Replay built without Beam: rows/s and peak memory of the process tree, against the floor and
TFDS's own writer, same files, same run.

  python benchmarks/build_dqn_replay_direct.py [--rows 100000 1000000] [--rounds 2]
      [--tfds_rows 100000] [--workers N] [--kinds KIND ...]  (floor and direct always run)

Checkpoints come from benchmarks/dqn_replay_data.py (/work/bench_data/dqn_replay/NAME, NAME = ROWS
or 5x1000000; written first when missing: minutes per million rows). Each measurement is a fresh
process whose process tree's summed RSS is sampled every 0.1 s (workers included):
  floor   gunzip (Python's gzip module) + np.frombuffer of the checkpoint's four files, in
          1024-row blocks, no writing: the issue's floor
  isal    the same with ISA-L's gunzip (isal.igzip, what the reader inflates with): ~2.5x faster,
          so the stricter floor
  png     isal, plus PNG-encoding every frame as the dataset stores it (compression.png_rows with
          the builds' setting, episode_wire.png_encoder), still no writing: the least work that
          yields the declared output, on one core
  direct  the dqn_replay builder with beam=False: rlds_suite.tfds.writing (batch-per-field wire
          serialization in --workers processes, resumable shards); PNG frames deflated by ISA-L
          at level 0 with one Huffman table per episode (compression.BUILD, 'isal-table')
  direct-l1  the same, each frame deflated at ISA-L level 1 (a table per frame: builds before
          the per-episode table, and recordings)
  direct-l0  the same, frames deflated at ISA-L level 0 with its default table: the speed a
          1.45x larger dataset would buy
  tfds    the same builder with TFDS's own writer (per-example encoding, shuffle buffer), the path
          the issue measured at 1,560 rows/s; only at --tfds_rows (it takes ~10 min per 1M rows)
Rounds alternate the kinds; medians [min..max] over rounds; ratios are paired by round. Each
build's dataset size (every file under its data_dir) is printed beside its rate, and its peak
memory twice: summed RSS (a shared-memory block mapped by the builder and a worker counts twice)
and summed PSS (each page once). CPU seconds of the measured process and of its (reaped) workers
are printed too, with the 2-core bound rows / max(main, tree / 2): what a build can reach on 2
idle cores, which a loaded machine stretches far less than wall time (the build below measured
47,021 rows/s on a quiet machine; the same code's bound at load ~23 was 47,264).

Measured with the per-episode PNG table (--rows 1000000 --rounds 2; load 5.4 at the start, 10.6
at the end, so wall rates are 3-4x below a quiet machine's and the CPU figures are what compares):
direct (table) builder 9.34 s [8.86..9.81] + workers 17.7 [17.3..18.0] CPU-s, bound 74,126
[71,843..76,410] rows/s, 0.543x [0.526..0.560] the floor's (136,538); direct-l1 (per-frame
level 1, the default before) 9.25 + 24.4 s, bound 59,518, 0.436x [0.434..0.438]; direct-l0
11.9 + 16.1 s, bound 71,377, 0.523x (its 1.45x larger shards cost the builder's process 2.6 s
more, written and hashed). Wall, paired by round: direct / direct-l1 1.28x [1.14..1.41], direct /
direct-l0 1.00x [0.87..1.12], direct / floor 0.276x [0.223..0.329] at that load. Dataset 2,015
MiB (level 1: 2,000; level 0: 2,898); process tree peak 814 MiB [785..844] RSS, 476 PSS. Again at
load 3.7 (2 rounds, the build's own ~2.5 included): direct 54,982 [44,466..65,497] rows/s, 0.422x
[0.329..0.514] the floor (131,276), bound 0.545x [0.528..0.562]; direct-l1 0.44x by bounds.
Then, with one ctypes call less per frame (12.2 vs 13.1 us), floor and direct alone, alternated
(6 rounds, load 1.9-2.6, mostly the build's own): direct 66,149 [58,814..67,862] rows/s, floor
143,788 [140,135..144,307], direct / floor 0.460x [0.408..0.484]; CPU 9.8 + 16.3 s, so the
2-core bound is ~0.53x and the wall 0.88x of it: the 0.5x target is not met in wall time (the
floor itself runs ~25% faster on this quieter machine than the 115k rows/s of earlier runs). A
timeline of one such build (CPU of each process per 0.5 s) had the tree at 1.84-1.98 of 2 cores
from 1.0 s to the end, workers up at 1.0 s, the imports' first 0.5 s on one core and a 0.3 s
tail: what is left is CPU, not waiting (13.8 s for 1M rows, 72,250 rows/s, in its best case).
Then CPU was cut three ways, each measured against the tree before it in the same run (CPU
seconds per 1M rows, alternated rounds): (1) compression.png_items writes a column's PNGs in
place, 'isal-table' deflating each frame straight into its slot among the column's BytesList
items (the stream's fields set with one struct.pack_into), so a record takes one piece per 1024
frames instead of four bytes objects per frame; (2) pool workers keep their freed heap (mallopt)
instead of faulting and clearing fresh pages for every batch's records (~1 us a frame); (1) and
(2): workers 16.5 [16.4..16.9] -> 15.4 [15.1..16.4] (3 rounds, load 1.7-3.1), same bytes
(sha256 of a 4-batch sample's records unchanged); (3) RecordWriter hashes and writes a worker's
frames 256 KiB at a time, so the kernel's copy into the page cache reads what sha256 has just
read into this core's cache (they were written on the other core): builder 10.6 [10.5..10.7] ->
9.23 [8.64..9.61] (3 rounds, load 1.8-3.8; 64 KiB 9.6, 1 MiB 9.5). py-spy of the workers now:
~73% of their time in the ISA-L deflate call itself (~9.4 of ~10.3 us a frame with its ctypes
calls), scanlines 4%, headers and CRCs ~6%, the record's join, CRC-32C and copy into the block
~7%. Tried and not kept: headers and CRC trailers of a column written in numpy after its
deflates (fixed slots, one join): 12.8-13.1 vs 12.6 us a frame, and png_bytes of one frame 33
vs 12.7 us; the loop over a column's frames inside png_deflate (10.3 vs 10.25 us a frame: the
ctypes calls are not the cost); glibc kept from handing the builder's freed memory back
(MALLOC_ARENA_MAX=1, fixed mmap and trim thresholds, no malloc_trim per shard): perf showed the
reader thread's page clearing (~1.3 s) gone, yet the builder's CPU did not drop (10.7 vs 10.8
[10.4..11.4], 3 rounds); 128-frame encode chunks, so a chunk's scanlines stay in L2: no change.
The tree at the start of this work (36ff460) and after it, alternated with the floor in one run
(3 rounds, load 3.2-3.8 from others' work, so CPU compares and wall does not): builder 11.2
[10.8..11.3] -> 9.15 [8.96..11.5] + workers 17.5 [17.4..18.5] -> 15.5 [15.1..16.6] CPU-s (the
tree 28.7 -> 24.7), 2-core bound 0.52x -> 0.61x the floor's (133k rows/s); wall 0.34x [0.27..0.37]
-> 0.32x [0.28..0.39] at that load, where the build gets what the others leave of 2 cores.
Wall time needs the 2 cores to ourselves (the floor uses one, the build two: others' processes
stretch the build far more), so each measurement now records the cores the machine's other
processes used meanwhile (/proc/stat less the run's own CPU), and the ratio is also printed over
the rounds where they used at most QUIET_CORES during both floor and direct. --rounds 4 --kinds
direct with the others idle throughout (0.007-0.013 of a core; load 2.0-2.8, the build's own):
direct 77,057 [76,770..79,288] rows/s, floor 146,712 [144,201..147,169], direct / floor 0.529x
[0.524..0.540]: the 0.5x target met; CPU builder 7.8 [7.49..8.05] + workers 14.8 [14.6..15.0] s,
bound 0.62x [0.61..0.63]; peak 830 MiB [821..860] summed RSS, 513 PSS; dataset 2,015 MiB. The
same pairs run one by one whenever the machine was idle (11 of 16 with others under 0.05 of a
core): 0.572x [0.514..0.582], direct 79,673 [70,723..83,036] rows/s. Under others' load it is
not met: 5 rounds at load 1.3-4.0 gave 0.333x [0.293..0.429] for a bound of 0.596x. Again by
the lead, quiet (--rounds 3 --kinds direct, others under 0.01 of a core): direct 77,062
[74,745..77,555] rows/s, floor 142,606, 0.544x [0.511..0.569]; CPU 7.75 + 14.8 s; peak 831 MiB.
--five (five separate 1M checkpoints, 1 round, quiet): 56,359 rows/s, 0.432x the floor (130,357),
peak 855 MiB, +11 MiB last third vs middle; run again by hand, 67,900 rows/s (~0.52x): the
builder's process takes 10.8-12.5 CPU-s per 1M rows there against 7.75 (system time: 10 GB
written, the page cache full), so a 5M-row build sits at the target's edge.
Where the CPU went before the table (perf over the whole tree, 1M rows, load ~5, 33.9 CPU-s):
ISA-L level-1 deflate 18.6 s (a Huffman table per frame 8.4, matching 6.8, encoding 3.4), the
interpreter 3.1, memmove 2.3, the kernel's copy into the page cache 1.6 and page clearing and
faults 1.1, sha256 of the shards 1.45 (OpenSSL with SHA-NI, 1.8 GB/s here: a cheaper checksum
would save little and change what provenance records), inflate ~1-2. Tried and not kept: one ISA-L
compressobj per column with a full flush per frame (no gain: the stream's set-up is not the cost),
libdeflate through ctypes with a reused compressor (26 us/frame at best against ISA-L 1's 18.4),
three pool workers on two cores (same CPU; wall within noise at load 6-7), no fsync per shard
(the builder's system time stayed 4.4-4.7 s).

Measured (--rows 1000000, 2 shared cores), after the builder's process stopped joining row blocks
(each episode is inflated into one array per field), joining each TFRecord frame into one buffer
(writev) and reading its shards again to hash them (hashed as written): at load 0.7-0.9, 2 rounds:
floor 141,210 rows/s [140,526..141,894], isal 354,339, png 65,741 (level-0 PNGs); the build with level-1 PNGs
(today's direct) 47,021 [46,339..47,703] (process tree 693 MiB; dataset 2,000 MiB), with level-0
PNGs (today's direct-l0; it was the default during that run) 46,926 [46,789..47,064] (728 MiB,
+4 MiB last third vs middle; dataset 2,898 MiB). direct / floor 0.33x [0.332..0.333] (target
0.5x: not met); level 0 / level 1 1.00x [0.99..1.01] at this load and 1.19x
[0.67..1.24] at load 4-6 (3 rounds; level-0 build / floor 0.36x [0.21..0.36] there), so builds
went back to level 1 and its 31% smaller dataset. Before (same
benchmark, load 1.3-3.7, level 0): direct / floor 0.25x [0.20..0.30] and 0.27x [0.23..0.31].

Measured after the workers frame the records into the batch's shared-memory block (none pickled
back; the builder writes and hashes them from there), shards are completed by a thread (fsync
off the writing thread), and the workers die with the builder (--rows 1000000 --rounds 2, load
15-24, so wall rates are ~5x below a quiet machine's and only the CPU figures compare): floor
7.55 s CPU [7.45..7.64] (bound 132,487 rows/s); direct, builder 10.5 s [10.1..11.0] + workers
24.5 s [24.3..24.8], bound 57,035 [56,750..57,321] rows/s: direct / floor 0.431x [0.423..0.438]
by the 2-core bounds. The writer changes alone, paired against the same tree with the writer's
files as before them (2 rounds, load 20-26): builder 12.5 s [12.3..12.7] -> 10.7 [10.6..10.8],
workers 25.1 -> 25.2 (pickling saved, framing and checksums paid), bound 53,227 -> 55,660 rows/s
(+4.6%); wall / floor 0.246x [0.221..0.271] -> 0.320x [0.292..0.349], as the builder's process
gets a third of the cores under load; summed RSS 638 -> 801 MiB. (The tree at 00539e1, before
the reader's uncopied episodes too: builder 16.6 + workers 25.7 s, 0.372x, one round.)
direct-l0 (level-0 PNGs), builder 11.9 s
[11.4..12.4] + workers 15.9 s [15.8..16.0], bound 72,124 [70,548..73,700]: 0.545x
[0.526..0.563] the floor, for a 2,898 vs 2,000 MiB dataset. A bound is the most a quiet machine
gives, never less: level 1 cannot reach the 0.5x target (the PNG deflate is ~20 of the workers'
24.5 s); level 0 can, with ~9% to spare, to be confirmed by wall time on a quiet machine.
Memory (one more run, load ~17-20, one batch in flight per worker): direct peak 803 MiB summed
RSS, 459 MiB PSS, last third vs middle +25 MiB; direct-l0 838 MiB, 469 MiB PSS, +2 MiB. With two
batches per worker summed RSS was 957 MiB (level 0: 1,033), so the pool keeps one (plus one).

Where the time goes (py-spy of the builder's process, 1M rows, load ~3-5, active seconds):
before, 37.7 s in the build: TFRecord frames joined and written 8.0 s, the reader's row blocks
joined into episodes 7.2 s, provenance's sha256 re-reading the shards 3.6 s; after, 14.5 s: the
TFRecord writer 4.6 s (sha256 as written 2.2 s, writev 2.4 s), placing rows into episodes
(core.nested.interleave_rows) 4.2 s, the workers' serialized records over pipes 3.6 s (executor
thread), copying batches into shared memory 1.7 s, provenance 0.3 s (the sources only). Neither
this benchmark nor `rlds-suite build` imports TensorFlow (tensorflow_datasets + rlds_suite import
in 0.8 s). A writer thread (hash and writev off the main thread) was slower at load 4-6, paired
A/B: not kept. benchmarks/png_encoders.py has the encoder table behind the level.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import IO, Any, Callable, Optional

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).parent))
import dqn_replay_data  # pylint: disable=g-import-not-at-top

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
FIELDS = ('observation', 'action', 'reward', 'terminal')
QUIET_CORES = 0.1  # A round counts as uncontended where others used at most this much CPU.


def _isal_open() -> Callable[..., IO[bytes]]:
  from isal import igzip  # pylint: disable=g-import-not-at-top
  return igzip.open


def _png_rows() -> Callable[[np.ndarray], Any]:
  from rlds_suite.tfds import compression  # pylint: disable=g-import-not-at-top
  from rlds_suite.tfds import episode_wire  # pylint: disable=g-import-not-at-top
  return lambda frames: compression.png_rows(frames, episode_wire.png_encoder)


# Kind -> (its gunzip, its frame encoder).
FLOORS = {'floor': lambda: (gzip.open, None), 'isal': lambda: (_isal_open(), None),
          'png': lambda: (_isal_open(), _png_rows())}


def floor(manual_dir: str, gunzip: Callable[..., IO[bytes]] = gzip.open,
          encode: Optional[Callable[[np.ndarray], Any]] = None) -> int:
  """Inflates every store file of the run into arrays, block by block (frames given to `encode`);
  returns rows read."""
  logs = pathlib.Path(manual_dir) / 'Pong' / '1' / 'replay_logs'
  rows = 0
  for path in sorted(logs.glob('$store$_*_ckpt.*.gz')):
    with gunzip(path, 'rb') as f:
      np.lib.format.read_magic(f)
      shape, _, dtype = np.lib.format.read_array_header_1_0(f)
      row_bytes = int(np.prod(shape[1:], dtype=np.int64)) * dtype.itemsize
      while True:
        data = f.read(1024 * row_bytes)
        if not data:
          break
        rows_read = np.frombuffer(data, dtype=dtype)
        if encode is not None and 'observation' in path.name:
          encode(rows_read.reshape((-1,) + tuple(shape[1:]) + (1,)))
    rows += shape[0] if 'terminal' in path.name else 0
  return rows


def build(manual_dir: str, data_dir: str, kind: str, workers: int) -> int:
  """Builds dqn_replay/Pong-run1 without Beam; returns the steps written."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  import rlds_suite  # pylint: disable=g-import-not-at-top,unused-import
  builder = tfds.builder('dqn_replay/Pong-run1', data_dir=data_dir, beam=False)
  builder.tfds_writer = kind == 'tfds'
  builder.writer_workers = workers
  if kind in ('direct-l0', 'direct-l1'):  # Frames deflated by ISA-L level 0 or 1 per frame.
    from rlds_suite.tfds import compression  # pylint: disable=g-import-not-at-top
    from rlds_suite.tfds import episode_wire  # pylint: disable=g-import-not-at-top
    episode_wire.png_encoder = compression.PngEncoder(level=int(kind[-1]))
  # No Beam options: a non-Beam build needs none (building them imports Apache Beam, ~3 s).
  builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=manual_dir))
  return builder.info.splits['train'].num_examples


def child(kind: str, manual_dir: str, data_dir: str, workers: int) -> None:
  started = time.perf_counter()
  if kind in FLOORS:
    count = floor(manual_dir, *FLOORS[kind]())
  else:
    count = build(manual_dir, data_dir, kind, workers)
  seconds = time.perf_counter() - started
  written = sum(path.stat().st_size for path in pathlib.Path(data_dir).rglob('*') if path.is_file())
  own, workers = (resource.getrusage(who) for who in (resource.RUSAGE_SELF,
                                                     resource.RUSAGE_CHILDREN))
  print(json.dumps({'seconds': seconds, 'count': count, 'bytes': written,
                    'cpu_main': own.ru_utime + own.ru_stime,
                    'cpu_workers': workers.ru_utime + workers.ru_stime}))


def measure(kind: str, manual_dir: pathlib.Path, workers: int) -> dict:
  """Runs one measurement in a fresh process; its result plus the sampled process-tree peak."""
  import psutil  # pylint: disable=g-import-not-at-top
  busy, own, begun = _busy_seconds(), resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
  with tempfile.TemporaryDirectory(dir='/tmp') as data_dir:
    process = subprocess.Popen(
        [sys.executable, __file__, '--child', kind, str(manual_dir), data_dir, str(workers)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    root, peak, peak_pss, samples = psutil.Process(process.pid), 0, 0, []
    started = time.perf_counter()
    while process.poll() is None:
      total = pss = 0
      try:
        for p in [root] + root.children(recursive=True):
          total += p.memory_info().rss
          pss += _pss(p.pid)
      except psutil.NoSuchProcess:
        pass
      peak, peak_pss = max(peak, total), max(peak_pss, pss)
      samples.append((time.perf_counter() - started, total))
      time.sleep(0.1)
    out = process.stdout.read()
    if process.returncode:
      raise RuntimeError(f'{kind} failed with exit {process.returncode}')
  result = json.loads(out.strip().splitlines()[-1])
  # Cores the machine's other processes used meanwhile: its busy CPU seconds less this run's
  # (the child's and this process's sampling).
  mine = resource.getrusage(resource.RUSAGE_SELF)
  sampling = mine.ru_utime + mine.ru_stime - own.ru_utime - own.ru_stime
  wall = time.perf_counter() - begun
  result['others_cores'] = max(0.0, (_busy_seconds() - busy - sampling - result['cpu_main'] -
                                     result['cpu_workers']) / wall)
  # Growth: the peak of the run's last third against its middle third's (start-up, TensorFlow's
  # import and the workers' start, lies in the first third).
  end = samples[-1][0] if samples else 0
  last = [rss for t, rss in samples if t > 2 * end / 3]
  middle = [rss for t, rss in samples if end / 3 < t <= 2 * end / 3]
  result.update(peak_bytes=peak, peak_pss_bytes=peak_pss,
                growth_bytes=(max(last) - max(middle)) if last and middle else 0)
  return result


def _busy_seconds() -> float:
  """CPU seconds every process on the machine has used since boot (/proc/stat)."""
  with open('/proc/stat') as f:
    ticks = [int(field) for field in f.readline().split()[1:]]
  return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf('SC_CLK_TCK')  # Less idle and iowait.


def _pss(pid: int) -> int:
  """A process's proportional set size: its private pages, and its share of each shared page
  (the pool's shared-memory blocks are mapped by the builder and a worker: summed RSS counts
  them twice)."""
  try:
    with open(f'/proc/{pid}/smaps_rollup') as f:
      for line in f:
        if line.startswith('Pss:'):
          return int(line.split()[1]) * 1024
  except OSError:
    pass
  return 0


def spread(values: list[float], digits: str = '.3g') -> str:
  return (f'{statistics.median(values):{digits}} [{min(values):{digits}}..'
          f'{max(values):{digits}}]')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--rows', type=int, nargs='+', default=[100_000, 1_000_000])
  parser.add_argument('--five', action='store_true', help='also 5 checkpoints of 1M rows')
  parser.add_argument('--tfds_rows', type=int, nargs='*', default=[100_000])
  parser.add_argument('--rounds', type=int, default=2)
  parser.add_argument('--workers', type=int, default=os.cpu_count() or 1)
  parser.add_argument('--out', type=pathlib.Path, default=dqn_replay_data.DEFAULT_OUT)
  parser.add_argument('--kinds', nargs='+', help='only these kinds (floor and direct always)')
  parser.add_argument('--child', nargs=4, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    kind, manual_dir, data_dir, workers = args.child
    child(kind, manual_dir, data_dir, int(workers))
    return
  print(f'load {os.getloadavg()[0]:.1f} (1 min), {os.cpu_count()} cores, {args.workers} workers')
  sets = [(rows, 1) for rows in args.rows] + ([(1_000_000, 5)] if args.five else [])
  for rows, checkpoints in sets:
    manual_dir = dqn_replay_data.run_dir(args.out, rows, checkpoints)
    if not dqn_replay_data.ready_file(args.out, rows, checkpoints).exists():
      dqn_replay_data.write_run(args.out, rows, checkpoints)
    total = rows * checkpoints
    kinds = (list(FLOORS) + ['direct', 'direct-l1', 'direct-l0'] +
             (['tfds'] if total in args.tfds_rows else []))
    if args.kinds:
      kinds = [kind for kind in kinds if kind in {'floor', 'direct', *args.kinds}]
    results: dict[str, list[dict]] = {kind: [] for kind in kinds}
    for _ in range(args.rounds):
      for kind in kinds:
        results[kind].append(measure(kind, manual_dir, args.workers))
    print(f'{dqn_replay_data.name(rows, checkpoints)} rows:')
    for kind in kinds:
      runs = results[kind]
      written = (f'; dataset {spread([r["bytes"] / 2**20 for r in runs], ",.0f")} MiB'
                 if runs[0]['bytes'] else '')
      print(f'  {kind:9s}: {spread([total / r["seconds"] for r in runs], ",.0f")} rows/s; '
            f'process-tree peak {spread([r["peak_bytes"] / 2**20 for r in runs], ",.0f")} MiB '
            f'(PSS {spread([r["peak_pss_bytes"] / 2**20 for r in runs], ",.0f")}); '
            f'growth last third vs middle {spread([r["growth_bytes"] / 2**20 for r in runs], ",.0f")} MiB'
            f'{written}')
    # CPU seconds, which a loaded machine stretches far less than wall time: a build on 2 idle
    # cores takes at least max(its main process's, half the tree's) (workers included).
    print('  CPU seconds, main process / workers; the 2-core bound rows/s = rows / max(main, '
          'tree / 2):')
    bounds = {kind: [total / max(r['cpu_main'], (r['cpu_main'] + r['cpu_workers']) / 2)
                     for r in results[kind]] for kind in kinds}
    for kind in kinds:
      runs = results[kind]
      print(f'  {kind:9s}: {spread([r["cpu_main"] for r in runs])} / '
            f'{spread([r["cpu_workers"] for r in runs])}; bound {spread(bounds[kind], ",.0f")}')
    for kind in [kind for kind in ('direct', 'direct-l1', 'direct-l0') if kind in kinds]:
      ratios = [d / f for d, f in zip(bounds[kind], bounds['floor'])]
      print(f'  {kind} / floor, 2-core bounds: {spread(ratios)}x')
    direct = results['direct']
    quiet = [i for i, d in enumerate(direct) if max(
        d['others_cores'], results['floor'][i]['others_cores']) <= QUIET_CORES]
    print(f'  others\' cores during direct: {spread([d["others_cores"] for d in direct])}; rounds '
          f'where others used at most {QUIET_CORES} of a core during both floor and direct: '
          f'{len(quiet)} of {len(direct)}')
    if quiet:
      ratios = [results['floor'][i]['seconds'] / direct[i]['seconds'] for i in quiet]
      print(f'  direct / floor rate, those rounds: {spread(ratios)}x; >= 0.5x target '
            f'{"met" if statistics.median(ratios) >= 0.5 else "not met"} there')
    for baseline in kinds:
      if baseline == 'direct':
        continue
      ratios = [b['seconds'] / d['seconds'] for d, b in zip(direct, results[baseline])
                if d['seconds'] > 0 and b['seconds'] > 0]
      if ratios:
        verdict = ''
        if baseline in ('floor', 'isal'):  # The target: within 2x of the floor.
          verdict = f'; >= 0.5x target {"met" if statistics.median(ratios) >= 0.5 else "not met"}'
        print(f'  direct / {baseline} rate: {spread(ratios)}x (paired by round){verdict}')


if __name__ == '__main__':
  main()
