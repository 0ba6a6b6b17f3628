"""DQN Replay conversion: streamed reading vs "np.load the whole gzip, then slice", same files, same run.

  python benchmarks/build_dqn_replay.py [--transitions 1000000] [--rounds 3] [--naive_4x]
  python benchmarks/build_dqn_replay.py --path beam [--sizes 100000 1000000 5x1000000]
      [--beam_runner direct|dask] [--workers 2]
      [--build_paths no_beam no_beam_build beam beam_build]

--path beam builds checkpoint sets of benchmarks/dqn_replay_data.py (reused when READY) as
`rlds-suite build` does (build, then its validation pass) and as the build alone, with Beam
(`beam`, `beam_build`) and without (`no_beam`, `no_beam_build`: `beam=False`, the writer of every
non-Beam builder), each in a fresh process whose whole process tree's resident memory is sampled
(sum over processes, every 0.1 s; killed above --limit_gb). It also says which processes of the
tree loaded TensorFlow, and measures `import tensorflow` alone in the same run (what a process
that loads it pays). 5x1000000 is not written by dqn_replay_data.py here (~20 min per 1M rows on a
loaded machine): it is made of the complete 1000000 set, its four checkpoint files hard-linked as
checkpoints 0..4 with add counts 1M..5M, so episodes run on across checkpoint files (the unfinished
episode at the end of one continues into the next's first rows); the output says so.

The non-Beam builder's RSS by thirds of the run (issue 17's "flat": 5x1000000-linked, the build
alone, the driver sampled every 0.5 s while it has pool workers, split by /proc status and
smaps; one run each, load 12-27 on the 2 shared cores): before 5df5394, 325 / 335 / 353 MiB
(anonymous memory 185 / 193 / 212; the anonymous mappings +26 MiB from the first third to the
last), because dqn_replay_spans.SpanReader kept every checkpoint's four gzip streams open to the
end, ~6 MiB of buffers each checkpoint (a 1 MiB BufferedReader, ISA-L's 512 KiB input chunk and
inflate state per field; 4 checkpoints read past: the +23-28 MiB). It now closes a checkpoint's
files once the spans have passed it: 269 / 276 / 283 MiB (anonymous 132 / 135 / 142; shared
memory 99 / 100 / 100, the pool's blocks filling in the first minutes; in 24 slices of the run
the median RSS stays within 267-287 MiB from the 4th slice on, the slices' maxima within 284-308).
This benchmark after the change (`--sizes 5x1000000 --build_paths no_beam_build --rounds 1`,
load 15-25): driver RSS first / middle / last third 283 / 288 / 288 MiB (was 376 / 384 / 399 in
the run that raised it), process-tree peak 807 MiB RSS / 480 MiB PSS, 899 s.
The last ~+10 MiB of anonymous memory is glibc keeping freed episode arrays (3-21 MB, allocated by
the read-ahead thread) in its arenas between the per-shard malloc_trim: with the mmap threshold
fixed at 1 MiB (MALLOC_MMAP_THRESHOLD_=1048576, i.e. mallopt(M_MMAP_THRESHOLD)) anonymous memory
was 92 / 93 / 92 MiB, flat and ~40 MiB lower, but every episode's arrays are then fresh pages
(the kernel zeroes ~7 GB and faults ~1.7M pages per 1M rows; its cost in build speed was not
measured here, under load 25): not set. Other engineers' uncommitted writer changes were in the
tree during these runs, so compare each run's thirds with each other, not base levels across runs.
What does grow with the dataset is O(shards) bookkeeping (progress.json's shard list, provenance's
digests of written files: ~160 entries of <1 KB for 5M rows), not per episode or per row.

Writes a batch_rl-style checkpoint of `--transitions` rows ((N, 84, 84) uint8 frames, int32
actions, float32 clipped rewards, uint8 terminals, each a gzip of the .npy bytes np.save writes, at
gzip's default level 9 as dopamine's GzipFile; episodes of 500-3,000 steps behind 3 zero padding
rows) and a second one of 4x the rows. Each measurement runs in a fresh process, so its peak
resident memory (ru_maxrss) is its own:
  ours   rlds_suite.readers.dqn_replay.read_run (header, then 1024-row blocks) -> episodes.to_episode
  naive  np.load of each whole gzip file, then the same cut: slices per episode -> to_episode
Both produce the same RLDS episode arrays (PNG encoding and TFDS writing excluded: they cost the
same for both and bound neither's memory). Rounds alternate ours and naive; the median and the
range over rounds are printed, with ours/naive ratios. Peak memory includes the interpreter and
the libraries each process imports. The naive reader is run on the 4x checkpoint only with
--naive_4x (it needs ~4x the memory, which a shared machine may not have).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dqn_replay_data  # pylint: disable=g-import-not-at-top,wrong-import-position

FIELDS = ('observation', 'action', 'reward', 'terminal')
BLOCK = 4096


def _write_npy_gzip(path: pathlib.Path, rows: int, row_shape: tuple, dtype, make_block) -> None:
  """The bytes np.save writes, gzip'd, produced block by block (a 1M-frame array is 7 GB)."""
  with gzip.open(path, 'wb') as f:
    header = {'descr': np.lib.format.dtype_to_descr(np.dtype(dtype)), 'fortran_order': False,
              'shape': (rows,) + row_shape}
    np.lib.format.write_array_header_1_0(f, header)
    for start in range(0, rows, BLOCK):
      f.write(np.ascontiguousarray(make_block(start, min(rows, start + BLOCK)), dtype=dtype).tobytes())


def write_checkpoint(logs: pathlib.Path, rows: int, seed: int = 0) -> int:
  """Checkpoint 0 of `rows` rows in `logs`; returns the number of complete episodes."""
  logs.mkdir(parents=True, exist_ok=True)
  rng = np.random.default_rng(seed)
  lengths, total = [], 0
  while total < rows:
    lengths.append(int(rng.integers(500, 3001)) + 3)
    total += lengths[-1]
  terminal = np.zeros(total, np.uint8)
  terminal[np.cumsum(lengths) - 1] = 1
  padding = np.zeros(total, bool)
  for end in np.cumsum([0] + lengths[:-1]):
    padding[end:end + 3] = True
  terminal, padding = terminal[:rows], padding[:rows]
  palette = rng.integers(0, 256, (64, 21, 21), dtype=np.uint8)  # 4x4-pixel blocks: compressible.

  def frames(start, stop):
    index = np.arange(start, stop)
    block = palette[index % 64].repeat(4, axis=1).repeat(4, axis=2)
    block[:, 0, :8] = index[:, None].view(np.uint8).reshape(-1, 8)
    block[padding[start:stop]] = 0
    return block

  actions = (np.arange(rows) * 7 % 18).astype(np.int32)
  rewards = np.clip(rng.standard_normal(rows), -1, 1).astype(np.float32)
  actions[padding], rewards[padding] = 0, 0
  _write_npy_gzip(logs / '$store$_observation_ckpt.0.gz', rows, (84, 84), np.uint8, frames)
  _write_npy_gzip(logs / '$store$_action_ckpt.0.gz', rows, (), np.int32, lambda a, b: actions[a:b])
  _write_npy_gzip(logs / '$store$_reward_ckpt.0.gz', rows, (), np.float32, lambda a, b: rewards[a:b])
  _write_npy_gzip(logs / '$store$_terminal_ckpt.0.gz', rows, (), np.uint8, lambda a, b: terminal[a:b])
  with gzip.open(logs / 'add_count_ckpt.0.gz', 'wb') as f:
    np.save(f, np.array(rows))
  return int(terminal.sum())


def measure(kind: str, logs: str) -> dict:
  """Runs in a child process: converts every episode, returns seconds, counts and peak RSS."""
  from rlds_suite.core import episodes  # pylint: disable=g-import-not-at-top
  from rlds_suite.readers import dqn_replay  # pylint: disable=g-import-not-at-top
  start = time.perf_counter()
  count = steps = 0
  if kind == 'ours':
    trajectories = dqn_replay.read_run(logs)
  else:
    arrays = {}
    for field in FIELDS:
      with gzip.open(dqn_replay.store_file(logs, field, 0), 'rb') as f:
        arrays[field] = np.load(f)
    rows = dqn_replay.Rows(*(arrays[f] for f in FIELDS), first_add=0)
    ends = np.flatnonzero(rows.terminal) + 1
    starts = np.concatenate([[0], ends[:-1]])
    selection = lambda add: 0
    trajectories = (dqn_replay.to_trajectory(rows.take(a, b), selection)
                    for a, b in zip(starts, ends))
  for trajectory in trajectories:
    if trajectory.ending is episodes.Ending.TRUNCATED and kind == 'ours':
      if trajectory.metadata['first_add_index'] + len(trajectory.rewards) >= rows_in(logs):
        continue  # The unfinished tail: the naive cut (at terminals only) leaves it out too.
    episode = episodes.to_episode(trajectory)
    count += 1
    steps += episode.num_steps
  seconds = time.perf_counter() - start
  peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
  return {'seconds': seconds, 'episodes': count, 'steps': steps, 'peak_bytes': peak}


def rows_in(logs: str) -> int:
  with gzip.open(pathlib.Path(logs) / '$store$_terminal_ckpt.0.gz', 'rb') as f:
    np.lib.format.read_magic(f)
    return np.lib.format.read_array_header_1_0(f)[0][0]


def run_child(kind: str, logs: pathlib.Path) -> dict:
  out = subprocess.run([sys.executable, __file__, '--child', kind, str(logs)], check=True,
                       capture_output=True, text=True).stdout
  return json.loads(out.strip().splitlines()[-1])


def spread(values: list[float]) -> str:
  return f'{statistics.median(values):.3g} [{min(values):.3g}-{max(values):.3g}]'


# --- The Beam path: `rlds-suite build dqn_replay/Pong-run1` as a user runs it, peak memory of its
# whole process tree (driver, Beam/Dask workers, validation).

def tree_peak(command: list[str], limit_bytes: int, interval: float = 0.1) -> dict:
  """Runs `command`, sampling the summed RSS of its process tree; kills the tree above
  `limit_bytes`. Returns seconds, the sampled peak, the peak of the summed PSS (pages shared
  between the processes counted once, sampled every second), the sum of each process's own peak
  (VmHWM, last seen: an upper bound), and the exit code (-9: killed at the limit)."""
  import psutil  # pylint: disable=g-import-not-at-top
  start = time.perf_counter()
  process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  root = psutil.Process(process.pid)
  peak, hwm, killed, with_tf, samples, pss_peak = 0, {}, False, set(), 0, 0
  driver = []  # The driver's own RSS while it has worker processes (writing, not importing).
  while process.poll() is None:
    try:
      tree = [root] + root.children(recursive=True)
    except psutil.NoSuchProcess:
      break
    if len(tree) > 1:
      with contextlib.suppress(psutil.NoSuchProcess):
        driver.append(root.memory_info().rss)
    total = 0
    for p in tree:
      try:
        total += p.memory_info().rss
        with open(f'/proc/{p.pid}/status') as f:
          hwm[p.pid] = next(int(line.split()[1]) * 1024 for line in f if line.startswith('VmHWM'))
      except (psutil.NoSuchProcess, FileNotFoundError, StopIteration, ProcessLookupError):
        pass
    peak = max(peak, total)
    if samples % 10 == 0:  # Every ~1 s: the tree's proportional set size (shared pages split).
      pss = 0
      for p in tree:
        with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied, ProcessLookupError):
          pss += p.memory_full_info().pss
      pss_peak = max(pss_peak, pss)
    if samples % 20 == 0:  # Every ~2 s: which processes have TensorFlow's library mapped.
      with_tf |= {('driver' if p.pid == process.pid else 'worker') for p in tree
                  if _has_tensorflow(p.pid)}
    samples += 1
    if total > limit_bytes:
      killed = True
      for p in reversed(tree):
        with contextlib.suppress(psutil.NoSuchProcess):
          p.kill()
    time.sleep(interval)
  output = process.communicate()[0]
  return {'seconds': time.perf_counter() - start, 'peak_bytes': peak,
          'hwm_sum_bytes': sum(hwm.values()), 'processes': len(hwm),
          'returncode': -9 if killed else process.returncode, 'output': output,
          'tensorflow': ' and '.join(sorted(with_tf)), 'pss_peak_bytes': pss_peak,
          'driver_thirds': thirds(driver)}


def thirds(values: list[int]) -> list[float]:
  """Medians of the first, middle and last third of `values` (a flat curve: three alike)."""
  k = len(values) // 3
  return [statistics.median(part) for part in (values[:k], values[k:2 * k], values[2 * k:])
          ] if k else []


def _has_tensorflow(pid: int) -> bool:
  try:
    with open(f'/proc/{pid}/maps') as f:
      return any('_pywrap_tensorflow_internal' in line for line in f)
  except OSError:
    return False


def build_command(manual_dir: str, data_dir: str, runner: str, workers: int,
                  path: str) -> list[str]:
  """beam: `rlds-suite build` (build, then validate); no_beam: the same with `beam=False` (what
  `rlds-suite build` runs: datasets.build, then its validation pass and report); beam_build /
  no_beam_build: the build alone (datasets.build) with Beam or without."""
  if path == 'beam':
    return [sys.executable, '-m', 'rlds_suite', 'build', 'dqn_replay/Pong-run1',
            '--manual_dir', manual_dir, '--data_dir', data_dir, '--beam_runner', runner,
            '--workers', str(workers)]
  code = ('import sys; from rlds_suite.tfds import beam, datasets\n'
          'from rlds_suite.cli import validate\n'
          'with beam.options_for(sys.argv[3], int(sys.argv[4])) as options:\n'
          '  builder = datasets.build("dqn_replay/Pong-run1", manual_dir=sys.argv[1], '
          'data_dir=sys.argv[2], beam_options=options, beam=sys.argv[5] == "beam_build")\n'
          'if sys.argv[5] == "no_beam":\n'
          '  sys.exit(validate.print_report(datasets.validate(builder, progress_bar=True)))')
  return [sys.executable, '-c', code, manual_dir, data_dir, runner, str(workers), path]


def linked_run(out: pathlib.Path, rows: int, checkpoints: int) -> pathlib.Path:
  """A set of `checkpoints` checkpoints made of the complete single-checkpoint set of `rows` rows:
  its four files hard-linked as each checkpoint, add counts rows, 2 rows, ...; returns the
  manual_dir (written once, then reused)."""
  single = dqn_replay_data.ready_file(out, rows, 1)
  if not single.exists():
    dqn_replay_data.write_run(out, rows, 1)
  source = pathlib.Path(single.read_text().strip()) / 'Pong' / '1' / 'replay_logs'
  manual_dir = pathlib.Path(out) / f'{checkpoints}x{rows}-linked'
  ready = pathlib.Path(out) / f'READY_{checkpoints}x{rows}-linked'
  if ready.exists():
    return manual_dir
  logs = manual_dir / 'Pong' / '1' / 'replay_logs'
  logs.mkdir(parents=True, exist_ok=True)
  for k in range(checkpoints):
    for field in FIELDS:
      target = logs / f'$store${"_"}{field}_ckpt.{k}.gz'
      if not target.exists():
        os.link(source / f'$store${"_"}{field}_ckpt.0.gz', target)
    with gzip.open(logs / f'add_count_ckpt.{k}.gz', 'wb') as f:
      np.save(f, np.array((k + 1) * rows, np.int64))
  ready.write_text(str(manual_dir) + '\n')
  return manual_dir


def import_peak(module: str) -> int:
  """Peak RSS of a fresh process that imports `module` and nothing else."""
  code = f'import resource, {module}; print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)'
  out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True)
  return int(out.stdout.split()[-1]) * 1024


def beam_main(args: argparse.Namespace) -> None:
  """Peak memory and rate of each build path per checkpoint set, as `rlds-suite build` runs it."""
  print(f'load: {", ".join(f"{x:.1f}" for x in os.getloadavg())} (1/5/15 min), runner '
        f'{args.beam_runner}, {args.workers} workers, kill above {args.limit_gb} GB, '
        f'{args.rounds} round(s)')
  tf_alone = [import_peak('tensorflow') for _ in range(2)]
  tfds_alone = [import_peak('tensorflow_datasets, rlds_suite') for _ in range(2)]
  print(f'import tensorflow alone: peak RSS {spread([p / 2**20 for p in tf_alone])} MiB; '
        f'import tensorflow_datasets, rlds_suite: {spread([p / 2**20 for p in tfds_alone])} MiB')
  with tempfile.TemporaryDirectory() as tmp:
    peaks = {}
    for size in args.sizes:
      checkpoints, _, rows_each = size.rpartition('x')
      checkpoints, rows_each = int(checkpoints or 1), int(rows_each)
      rows = checkpoints * rows_each
      ready = dqn_replay_data.ready_file(args.bench_data, rows_each, checkpoints)
      if ready.exists():
        manual_dir = ready.read_text().strip()
      elif checkpoints > 1 and not args.write_checkpoints:
        manual_dir = linked_run(args.bench_data, rows_each, checkpoints)
        print(f'{size}: the {rows_each:,}-row checkpoint hard-linked as {checkpoints} checkpoints '
              f'(add counts {rows_each:,}..{rows:,}; episodes run on across files): {manual_dir}')
      else:
        start = time.perf_counter()
        manual_dir = dqn_replay_data.write_run(args.bench_data, rows_each, checkpoints)
        print(f'{size}: wrote the checkpoints in {time.perf_counter() - start:.0f}s')
      paths = tuple(args.build_paths)
      for round_ in range(args.rounds):
        for path in paths:
          data_dir = pathlib.Path(tmp) / f'out-{rows}-{path}-{round_}'
          result = tree_peak(build_command(str(manual_dir), str(data_dir), args.beam_runner,
                                           args.workers, path),
                             int(args.limit_gb * 2**30))
          shutil.rmtree(data_dir, ignore_errors=True)
          if result['returncode'] != 0:
            print(f'  {path}: exit {result["returncode"]} after {result["seconds"]:.0f}s, peak '
                  f'{result["peak_bytes"] / 2**30:.2f} GiB; last output:\n'
                  + '\n'.join(result['output'].splitlines()[-5:]))
            continue
          peaks.setdefault((rows, path), []).append(result)
          print(f'  {size} {path}: {result["seconds"]:.0f}s, tree peak '
                f'{result["peak_bytes"] / 2**20:.0f} MiB RSS, {result["pss_peak_bytes"] / 2**20:.0f} '
                f'MiB PSS, TensorFlow loaded by '
                f'{result["tensorflow"] or "no process"}; driver RSS while writing, first / '
                f'middle / last third: '
                f'{" / ".join(f"{v / 2**20:.0f}" for v in result["driver_thirds"])} MiB',
                flush=True)
      for path in paths:
        runs = peaks.get((rows, path), [])
        if runs:
          print(f'  {rows:,} rows {path:13s}: {spread([rows / r["seconds"] for r in runs])} rows/s; '
                f'process-tree peak {spread([r["peak_bytes"] / 2**20 for r in runs])} MiB RSS, '
                f'{spread([r["pss_peak_bytes"] / 2**20 for r in runs])} MiB PSS (sum of per-process peaks {spread([r["hwm_sum_bytes"] / 2**20 for r in runs])} '
                f'MiB, {runs[0]["processes"]} processes)', flush=True)
    for path in args.build_paths:
      by_rows = {rows: statistics.median(r['peak_bytes'] for r in runs)
                 for (rows, p), runs in peaks.items() if p == path}
      if len(by_rows) >= 2 and min(by_rows.values()) > 0:
        low, high = min(by_rows), max(by_rows)
        print(f'{path}: tree peak at {high:,} rows / at {low:,} rows: '
              f'{by_rows[high] / by_rows[low]:.2f}x for {high / low:.0f}x the rows')
      if by_rows:
        print(f'{path}: tree peak under 1 GiB (2^30 bytes) at every size: '
              f'{"yes" if max(by_rows.values()) < 2**30 else "no"}')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--transitions', type=int, default=1_000_000)
  parser.add_argument('--rounds', type=int, default=3)
  parser.add_argument('--naive_4x', action='store_true')
  parser.add_argument('--child', nargs=2, help=argparse.SUPPRESS)
  parser.add_argument('--path', choices=('read', 'beam'), default='read',
                      help='read: the reader alone (above); beam: `rlds-suite build` with Beam, '
                      'peak memory of its process tree at each of --rows')
  parser.add_argument('--sizes', nargs='+', default=['100000', '200000', '1000000', '5x1000000'],
                      help='checkpoint sets: ROWS or CHECKPOINTSxROWS (benchmarks/dqn_replay_data.py)')
  parser.add_argument('--beam_runner', default='direct')
  parser.add_argument('--workers', type=int, default=2)
  parser.add_argument('--limit_gb', type=float, default=6.0,
                      help='kill a build whose process tree exceeds this (shared machines)')
  parser.add_argument('--bench_data', type=pathlib.Path, default=dqn_replay_data.DEFAULT_OUT,
                      help='where benchmarks/dqn_replay_data.py keeps (or writes) checkpoint sets')
  parser.add_argument('--build_paths', nargs='+',
                      default=['no_beam', 'no_beam_build', 'beam', 'beam_build'],
                      choices=('beam', 'beam_build', 'no_beam', 'no_beam_build'),
                      help='beam / no_beam: as rlds-suite build runs them (build, then validate) '
                      'with Beam or with beam=False; beam_build / no_beam_build: the build alone')
  parser.add_argument('--write_checkpoints', action='store_true',
                      help='write multi-checkpoint sets with dqn_replay_data.py instead of '
                      'hard-linking the single-checkpoint set (~20 min per 1M rows)')
  args = parser.parse_args()
  if args.child:
    print(json.dumps(measure(*args.child)))
    return
  if args.path == 'beam':
    beam_main(args)
    return

  with tempfile.TemporaryDirectory() as tmp:
    results = {}
    for scale in (1, 4):
      logs = pathlib.Path(tmp) / f'{scale}x' / 'replay_logs'
      rows = scale * args.transitions
      start = time.perf_counter()
      episodes = write_checkpoint(logs, rows, seed=scale)
      size = sum(p.stat().st_size for p in logs.iterdir())
      print(f'{scale}x: wrote {rows:,} rows ({episodes} episodes, {rows * 84 * 84 / 2**30:.2f} GiB '
            f'of frames, {size / 2**20:.0f} MiB gzip) in {time.perf_counter() - start:.0f}s')
      kinds = ('ours', 'naive') if scale == 1 or args.naive_4x else ('ours',)
      for _ in range(args.rounds):
        for kind in kinds:
          results.setdefault((scale, kind), []).append(run_child(kind, logs))
      for kind in kinds:
        runs = results[(scale, kind)]
        assert len({(r['episodes'], r['steps']) for r in runs}) == 1
        rate = [rows / r['seconds'] for r in runs]
        peak = [r['peak_bytes'] / 2**20 for r in runs]
        print(f'  {kind:5s}: {runs[0]["episodes"]} episodes, {runs[0]["steps"]:,} steps; '
              f'{spread(rate)} transitions/s; peak RSS {spread(peak)} MiB')
      if ('ours' in kinds and 'naive' in kinds):
        ours, naive = results[(scale, 'ours')], results[(scale, 'naive')]
        if ours[0]['steps'] != naive[0]['steps']:
          print('  ours and naive produced different episodes: no ratio')
          continue
        speed = [n['seconds'] / o['seconds'] for o, n in zip(ours, naive)]
        memory = [o['peak_bytes'] / n['peak_bytes'] for o, n in zip(ours, naive)]
        print(f'  ours/naive: throughput {spread(speed)}x, peak memory {spread(memory)}x '
              '(paired by round)')
    ours_1x = statistics.median(r['peak_bytes'] for r in results[(1, 'ours')])
    ours_4x = statistics.median(r['peak_bytes'] for r in results[(4, 'ours')])
    print(f'ours peak memory 4x/1x: {ours_4x / ours_1x:.2f}x; under 1 GiB at both: '
          f'{"yes" if max(ours_1x, ours_4x) < 2**30 else "no"}')


if __name__ == '__main__':
  main()
