"""il-representations native demos: our builders vs il-representations' own loading, same files.

  python benchmarks/build_ilr.py [--steps 20000] [--repeats 3] [--multiples 1,5]

Writes an Atari demo file (`np.savez_compressed` of trajectory dicts, 500 steps each, as the shipped
ones) and a dm_control demo file (gzip + cloudpickle of TrajectoryWithRew lists, 125 actions each,
reacher-easy shaped) of `--steps` steps each to a temp dir, then for each format:

  * throughput, steps/s: ours = `download_and_prepare` of ilr_atari_demos/pong or
    ilr_dm_control_demos/reacher_easy (reading, episode conversion, then rlds_suite.tfds.writing:
    ZLIB encoding in one worker process per core, shards in generation order); baseline = il-representations' loading approach, `load_dataset_atari` (np.load of
    the whole file, np.stack into the obs/next_obs/acts/dones dict, channels-first transpose) and
    `load_dataset_dm_control` (cloudpickle.load of the whole list and np.concatenate, with
    `dm_control_frame_stack=1`, since its default of 3 triples the dict and exceeds this machine's
    memory). Each runs in a fresh process, alternating ours and baseline, `--repeats` times; the
    ratio printed is the median of the paired per-repeat ratios ours/baseline, with min..max.
    The baseline only loads into memory, ours writes an encoded dataset: the ratio says what the
    lossless, bounded-memory build costs relative to that load, not which is better.
  * peak RSS (VmHWM of the process) of our build and of the baseline for files of `--multiples`
    times `--steps` steps (more trajectories of the same length): ours reads one trajectory at a
    time, so its peak should stay flat beyond TensorFlow, the trajectory in hand and TFDS's writer
    buffers; the baseline's grows with the file.

Files are written in a child process. Atari files carry np.savez's opcodes (`SavezPickler`: a memo
PUT after every object, GETs for numpy's functions, dtypes and dict keys; the opcode counts of
the authors' shipped pong.npz, to the opcode) but the writer remembers no frame (numpy's own call
keeps every frame's bytes, ~3x the raw frames); `BUILD_ILR_NO_MEMO=1` writes them without a memo,
as before issue 17 (~50% more opcodes per array: each array's dtype is built again).
dm_control files are pickled without a memo (cloudpickle's call memoizes every frame). The
issue's 100k-step file is `--steps 100000`: the baseline then needs ~3x the raw frames
(~8 GB for Atari), more than a shared 24 GB machine should give one process, so the default
measures throughput at 20k steps and memory at 1x and 5x (= 100k steps).

Measured (defaults, 2 shared vCPUs with other engineers' jobs running, 3 paired repeats; median
(min-max)):
  Atari (20k steps, 40 trajectories): ours 2,282 steps/s wall (1,847-3,628), 3,583 steps/s CPU;
    il-representations' load 4,456 (3,552-6,723) wall, 5,742 CPU; ours/baseline 0.64x
    (0.27-0.81x) wall, 0.60x (0.36-0.75x) CPU. Peak RSS ours 966 MiB at 20k steps, 984 MiB at
    100k (flat: ~900 MiB of it is TensorFlow); baseline 1,666 MiB at 20k, ~8 GiB estimated at 100k.
  dm_control (20k steps, 160 trajectories): ours 378 steps/s wall (297-470), 841 CPU (836-842);
    baseline 1,104 (1,098-1,881) wall, 3,277 CPU; ours/baseline 0.27x (0.25-0.34x) wall, 0.26x
    (0.25-0.28x) CPU. Peak RSS ours 1,337 MiB at 20k, 2,036 MiB at 100k: the growth is TFDS's
    writer holding serialized examples in memory up to its 1 GiB buffer (399 MiB of examples at
    20k, 1,994 MiB at 100k), not trajectories; baseline 1,769 MiB at 20k.
  (The numbers above were taken with TFDS's writer. With rlds_suite.tfds.writing, same defaults,
  load 11-15 on the 2 cores: Atari ours 441 steps/s wall (358-567), baseline 475 (472-1,935);
  ours/baseline 0.76x (0.29-0.93x) wall; peak RSS ours 1,115 MiB, baseline 1,665 MiB.)
  (Issue 17, after ISA-L inflates zip members, same defaults but --formats atari, load 22-26:
  ours/baseline 0.51x (0.51-0.71x) and 0.71x (0.68-0.82x) wall, 0.74x and 0.82x CPU of the
  builder's process (its ZLIB workers not counted); the restricted streaming unpickler's two
  Python passes were 62% of the build.)
  Issue 17, after the first pass steps over each array's ~30 opcodes with one regex match, dtypes
  are kept by their pickled state and the second pass reads its buffer once (--formats atari,
  7 paired repeats, load 3-5): np.savez-like file: ours 7,226 steps/s wall (4,355-7,649), 10,379
  CPU; baseline 7,669 (3,531-10,205) wall, 9,628 CPU; ours/baseline 0.82x (0.70-1.23x) wall, 1.08x
  (0.92-1.48x) CPU. Without a memo (BUILD_ILR_NO_MEMO=1), two runs: 0.80x (0.66-1.43x) and 1.09x
  (0.42-2.16x) wall, 1.08x (0.90-2.01x) and 1.67x (1.10-1.91x) CPU. The 1x wall target is not met
  robustly: the baseline itself varies 1.8-4.2 s CPU between repeats, and ours' wall exceeds its
  process's CPU (~1.9-2.3 s) by ~0.7 s, the writer's spawned encoder workers. Peak RSS ours
  232 MiB at 20k steps, 247 MiB at 100k; baseline 1,669 MiB at 20k. Reading alone (CPU, same
  files): np.savez-like 2.0 s -> 1.6 s, no memo 2.8 s -> 1.7 s; py-spy of the reader on the
  np.savez-like file: second pass 58% (per array ~15 us of Python: ~22 opcodes dispatched one by
  one, _reconstruct, the state's checks, the copy into the array), first pass 27%, ISA-L inflate
  24% (counted in both: the member is inflated once per pass), stacking rows 7%. 48,015 opcodes
  per 500-step trajectory without a memo, 31,519 with; 3 arrays per step.
  Issue 17, one read for both passes (the second runs the first's kept bytes one trajectory
  behind; the zip member is inflated once), same command and repeats as before and after in
  turn: before 1.27x (0.84-1.67x) wall, 1.55x (1.14-2.06x) CPU at load 1-5; after 1.24x
  (0.96-1.68x) wall, 1.83x (1.25-2.23x) CPU at load 2-4 (at load 4-10: 1.06x (0.65-1.54x) before,
  1.01x (0.72-1.49x) after). The baseline's own 2.2-4.1 s CPU spread decides these ratios; ours'
  process CPU is 1.92 s median (1.82-2.39) after, 2.00 s (1.92-2.06) before. Reading alone,
  interleaved, 5 pairs: 1.81 s (1.70-1.89) -> 1.59 s (1.57-1.67) CPU; dm_control 5k steps 0.88 s
  -> 0.65 s (0.61-0.77). Peak RSS ours 272 MiB at 20k steps (was 232): two trajectories' pickled
  bytes are held (the one being built, the one being scanned).
  dm_control after issue 17's changes (3 repeats, --multiples 1, load 3-4): ours 2,006 steps/s
  wall (1,573-2,331), 4,225 CPU; baseline 2,251 (2,096-2,259), 3,704 CPU; 0.96x (0.70-1.04x) wall,
  1.12x (0.95-1.20x) CPU; peak RSS ours 186 MiB, baseline 1,768 MiB.
  Issue 17, the encoder workers started when the split starts and batches serialized in the
  builder's process until they are up (they were started at 32 MiB and waited for), --formats
  atari --repeats 5, before then after: 1.28x (1.09-1.69x) wall at load 3.3-2.5, then 1.74x
  (0.89-1.88x) at load 2.5-2.0 (the baseline's 1.8-4.9 s spread decides the ratio); ours' wall
  less its process's CPU 0.69 s (0.18-1.28) -> 0.15 s (0.13-0.17), ours' wall 2.56 s -> 2.05 s.
  Ours alone, 6 interleaved pairs at load 4.1-4.5: 2.82 s (2.56-2.98) -> 2.68 s (2.57-2.82),
  0.94x (0.90-1.03x) paired; there the wall-CPU gap stays ~0.85 s: builder and workers share
  the 2 cores.
What bounded ours with TFDS's writer: per step, TFDS's ZLIB encoding of the frames (30 KB for dm_control, 28 KB for
Atari) and serialization; reading costs two passes over one read of the pickle in Python (the first finds
where each trajectory ends, so that one can be handed out at a time, stepping over each numpy
array's opcodes at once; the second runs the restricted unpickler opcode by opcode). The baseline only unpickles
and concatenates: it writes nothing, and cannot hold a file larger than ~1/3 of memory.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import os
import pickle
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
import types
import zipfile

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
# The demo files below repeat a pool of frames, so they deflate far better than real ones: past the
# readers' decompression-bomb limit (rlds_suite.readers.files), which these children raise.
os.environ.setdefault('RLDS_SUITE_EXPANSION_FACTOR', '5000')

import numpy as np  # pylint: disable=g-import-not-at-top

ATARI_TRAJECTORY = 500
DM_CONTROL_ACTIONS = 125


def write_atari(path: pathlib.Path, steps: int) -> None:
  """Demo file of `steps` steps. Each state is a distinct view of one pool of frames, so writing
  needs little memory while every state is stored in full, as in a real file."""
  rng = np.random.default_rng(0)
  pool = np.zeros((ATARI_TRAJECTORY + 3, 84, 84), np.uint8)
  for t in range(len(pool)):  # A Pong-like frame: background, a paddle and a ball that move.
    pool[t] = 87
    pool[t, 10 + t % 60:26 + t % 60, 70:74] = 148
    pool[t, (3 * t) % 80:(3 * t) % 80 + 2, (5 * t) % 80:(5 * t) % 80 + 2] = 236
  stacks = np.lib.stride_tricks.sliding_window_view(pool, 4, axis=0)  # (T, 84, 84, 4) views.
  demos = np.empty(steps // ATARI_TRAJECTORY, dtype=object)
  for index in range(len(demos)):
    demos[index] = {'states': [stacks[t] for t in range(ATARI_TRAJECTORY)],
                    'actions': [np.array(a, np.int64) for a in rng.integers(0, 6, ATARI_TRAJECTORY)],
                    'dones': [np.array(False) for _ in range(ATARI_TRAJECTORY)]}
  # np.savez_compressed's layout: arr_0.npy in a deflated zip, pickled as numpy pickles it.
  with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as archive:
    with archive.open('arr_0.npy', 'w', force_zip64=True) as f:
      np.lib.format.write_array_header_1_0(f, np.lib.format.header_data_from_array_1_0(demos))
      if os.environ.get(NO_MEMO_ENV):
        pickler = pickle.Pickler(f, protocol=3)
        pickler.fast = True
      else:
        pickler = SavezPickler(f)
      pickler.dump(demos)


NO_MEMO_ENV = 'BUILD_ILR_NO_MEMO'  # Set: Atari files pickled without a memo (as before issue 17).


class SavezPickler(pickle._Pickler):  # pylint: disable=protected-access
  """The opcodes np.savez writes (protocol 3, a memo PUT after every object, GETs for objects
  pickled again: numpy's functions, dtypes, b'b', dict keys), remembering only such small
  objects: numpy's own call keeps every frame's bytes in its memo, ~3x the raw frames."""

  def __init__(self, file):
    super().__init__(file, protocol=3)
    self._puts = 0

  def memoize(self, obj):
    self.write(self.put(self._puts))
    if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType, np.dtype, str)) or (
        isinstance(obj, bytes) and len(obj) < 64):
      self.memo[id(obj)] = self._puts, obj
    self._puts += 1


@dataclasses.dataclass(frozen=True)
class TrajectoryWithRew:
  """imitation.data.types.TrajectoryWithRew as il-representations' dm_control demos pickle it."""
  obs: np.ndarray
  acts: np.ndarray
  infos: list
  rews: np.ndarray


def _imitation_module() -> None:
  module = types.ModuleType('imitation.data.types')
  TrajectoryWithRew.__module__ = module.__name__
  module.TrajectoryWithRew = TrajectoryWithRew
  for name in ('imitation', 'imitation.data'):
    sys.modules.setdefault(name, types.ModuleType(name))
  sys.modules[module.__name__] = module


def write_dm_control(path: pathlib.Path, steps: int) -> None:
  import cloudpickle  # pylint: disable=g-import-not-at-top
  _imitation_module()
  rng = np.random.default_rng(0)
  pool = rng.integers(0, 40, (DM_CONTROL_ACTIONS + 1, 3, 100, 100), dtype=np.uint8) + 100
  demos = []
  for _ in range(steps // DM_CONTROL_ACTIONS):
    demos.append(TrajectoryWithRew(
        obs=pool[:],  # A distinct view object: pickled in full for every trajectory.
        acts=rng.uniform(-1, 1, (DM_CONTROL_ACTIONS, 2)).astype(np.float32),
        infos=[{'internal_state': rng.normal(size=4), 'discount': 1.0}
               for _ in range(DM_CONTROL_ACTIONS)],
        rews=rng.integers(0, 9, DM_CONTROL_ACTIONS).astype(np.float64)))
  with gzip.open(path, 'wb') as f:
    pickler = cloudpickle.CloudPickler(f, protocol=4)
    pickler.fast = True  # No memo: it would keep every pickled frame (see write_atari).
    pickler.dump(demos)


# ---- Work run in a child process (fresh memory), printing one JSON line. ----

def _ours(name: str, manual_dir: str, data_dir: str) -> int:
  """TFDS's own build call with a plain DownloadConfig: these builders use no Beam (building Beam
  runner options, as rlds_suite.tfds.datasets.build does for every builder, imports Apache Beam:
  ~3 s of CPU that is not the conversion's)."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  builder = tfds.builder(name, data_dir=data_dir)
  builder.download_and_prepare(download_config=tfds.download.DownloadConfig(manual_dir=manual_dir))
  return sum(f.stat().st_size for f in pathlib.Path(data_dir).rglob('*.tfrecord*'))


def _baseline_atari(path: str) -> int:  # Returns 0: it writes nothing.
  """il-representations' load_dataset_atari (chans_first=True; no shuffle, all trajectories)."""
  trajectories, = np.load(path, allow_pickle=True).values()
  merged = {'obs': [], 'next_obs': [], 'acts': [], 'dones': []}
  for traj in list(trajectories):
    merged['obs'] += traj['states'][:-1]
    merged['next_obs'] += traj['states'][1:]
    merged['acts'] += traj['actions'][:-1]
    merged['dones'] += traj['dones'][:-1]
  dataset = {key: np.stack(values, axis=0) for key, values in merged.items()}
  for key in ('obs', 'next_obs'):
    dataset[key] = np.transpose(dataset[key], (0, 3, 1, 2))
  assert len(dataset['acts'])
  return 0


def _baseline_dm_control(path: str) -> int:
  """il-representations' load_dataset_dm_control with dm_control_frame_stack=1."""
  import cloudpickle  # pylint: disable=g-import-not-at-top
  _imitation_module()
  with gzip.GzipFile(path, 'rb') as fp:
    trajs = cloudpickle.load(fp)
  dataset = {
      'obs': np.concatenate([t.obs[:-1] for t in trajs], axis=0),
      'next_obs': np.concatenate([t.obs[1:] for t in trajs], axis=0),
      'acts': np.concatenate([t.acts for t in trajs], axis=0),
      'infos': np.concatenate([t.infos for t in trajs], axis=0),
      'rews': np.concatenate([t.rews for t in trajs], axis=0),
      'dones': np.concatenate([np.array([False] * (len(t.acts) - 1) + [True]) for t in trajs]),
  }
  assert len(dataset['acts'])
  return 0


def _peak_rss_mib() -> float:
  """This process's peak RSS (VmHWM). Not getrusage's ru_maxrss: Linux carries that across exec, so
  a child would report its parent's size at fork."""
  with open('/proc/self/status') as f:
    for line in f:
      if line.startswith('VmHWM:'):
        return int(line.split()[1]) / 1024
  raise RuntimeError('no VmHWM in /proc/self/status')


def child(kind: str, *args: str) -> None:
  """Runs one measurement; imports (TensorFlow's take seconds) happen before the clocks start."""
  if kind == 'write':
    fmt, path, steps = args
    FORMATS[fmt][0](pathlib.Path(path), int(steps))
    return
  import cloudpickle  # pylint: disable=g-import-not-at-top,unused-import
  if kind == 'ours':
    import rlds_suite  # pylint: disable=g-import-not-at-top,unused-import
    import tensorflow_datasets  # pylint: disable=g-import-not-at-top,unused-import
  work = {'ours': _ours, 'baseline_atari': _baseline_atari,
          'baseline_dm_control': _baseline_dm_control}[kind]
  wall, cpu = time.perf_counter(), time.process_time()
  written = work(*args)
  wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
  peak_mib = _peak_rss_mib()
  print(json.dumps({'wall': wall, 'cpu': cpu, 'written': written, 'peak_mib': peak_mib}))


def run_child(*args: str) -> dict:
  out = subprocess.run([sys.executable, __file__, '--child', *args], check=False,
                       capture_output=True, text=True)
  if out.returncode:
    raise RuntimeError(f'{args[0]} failed (exit {out.returncode}):\n' +
                       '\n'.join(out.stderr.strip().splitlines()[-8:]))
  return json.loads(out.stdout.strip().splitlines()[-1])


# ---- The benchmark. ----

FORMATS = {
    # name: (writer, file name, builder name, baseline, steps per trajectory in our episodes)
    'atari': (write_atari, 'pong.npz', 'ilr_atari_demos/pong', 'baseline_atari'),
    'dm_control': (write_dm_control, 'reacher-easy-bench.pkl.gz',
                   'ilr_dm_control_demos/reacher_easy', 'baseline_dm_control'),
}


def _spread(values: list[float]) -> str:
  return f'{statistics.median(values):.2f}x ({min(values):.2f}-{max(values):.2f}x)'


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--steps', type=int, default=20_000)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--multiples', default='1,5', help='file sizes for peak RSS, x --steps')
  parser.add_argument('--formats', default='atari,dm_control')
  args = parser.parse_args()
  multiples = [int(m) for m in args.multiples.split(',')]
  print(f'build_ilr: {args.steps} steps per file, {args.repeats} paired repeats; '
        f'{os.cpu_count()} CPUs (shared machine: other jobs may run)')
  with tempfile.TemporaryDirectory() as tmp:
    tmp = pathlib.Path(tmp)
    for fmt in args.formats.split(','):
      writer, file_name, builder_name, baseline = FORMATS[fmt]
      files = {}
      for multiple in sorted(set([1] + multiples)):
        manual_dir = tmp / f'{fmt}_{multiple}x'
        manual_dir.mkdir()
        subprocess.run([sys.executable, __file__, '--child', 'write', fmt,
                        str(manual_dir / file_name), str(args.steps * multiple)], check=True)
        files[multiple] = manual_dir
      size = (files[1] / file_name).stat().st_size / 2**20
      print(f'\n[{fmt}] {args.steps} steps, {size:.0f} MiB on disk')

      def ours(multiple: int) -> dict:
        data_dir = tempfile.mkdtemp(dir=tmp)
        return run_child('ours', builder_name, str(files[multiple]), data_dir)

      def base(multiple: int) -> dict:
        return run_child(baseline, str(files[multiple] / file_name))

      rates = {'ours': [], 'baseline': []}
      cpu_rates = {'ours': [], 'baseline': []}
      peaks = {'ours': {}, 'baseline': {}}
      written = {}
      for repeat in range(args.repeats):
        for label, measure in (('ours', ours), ('baseline', base))[::1 if repeat % 2 == 0 else -1]:
          result = measure(1)
          rates[label].append(args.steps / result['wall'])
          cpu_rates[label].append(args.steps / result['cpu'])
          peaks[label].setdefault(1, []).append(result['peak_mib'])
          written.setdefault(1, result['written'])
          print(f'  repeat {repeat} {label:8s}: {result["wall"]:7.2f}s wall {result["cpu"]:7.2f}s '
                f'cpu {args.steps / result["wall"]:9,.0f} steps/s  peak RSS '
                f'{result["peak_mib"]:6,.0f} MiB')
      for clock, measured in (('wall', rates), ('cpu', cpu_rates)):
        ratios = [o / b for o, b in zip(measured['ours'], measured['baseline'])]
        print(f'  throughput ({clock}) ours {statistics.median(measured["ours"]):,.0f} steps/s '
              f'({min(measured["ours"]):,.0f}-{max(measured["ours"]):,.0f}), baseline '
              f'{statistics.median(measured["baseline"]):,.0f} steps/s '
              f'({min(measured["baseline"]):,.0f}-{max(measured["baseline"]):,.0f}); '
              f'ours/baseline {_spread(ratios)}')
      for multiple in multiples:
        if multiple == 1:
          continue
        for label, measure in (('ours', ours), ('baseline', base)):
          if label == 'baseline' and multiple * args.steps * 30_000 * 3 > 6 * 2**30:
            print(f'  {multiple}x baseline skipped: it would hold ~'
                  f'{multiple * args.steps * 30_000 * 3 / 2**30:.0f} GiB')
            continue
          result = measure(multiple)
          peaks[label].setdefault(multiple, []).append(result['peak_mib'])
          if label == 'ours':
            written[multiple] = result['written']
      for label in ('ours', 'baseline'):
        shown = ', '.join(f'{m}x ({m * args.steps} steps): {statistics.median(v):,.0f} MiB'
                          for m, v in sorted(peaks[label].items()))
        print(f'  peak RSS {label:8s}: {shown}')
      print('  dataset written by ours: ' + ', '.join(
                f'{m}x: {w / 2**20:,.0f} MiB' for m, w in sorted(written.items())))


if __name__ == '__main__':
  if len(sys.argv) > 1 and sys.argv[1] == '--child':
    child(*sys.argv[2:])
  else:
    main()
