"""Child process of test_streams_memory: streams a dataset under a memory budget, prints peak RSS.

    python -m tests.streams_memory_child DIRECTORY BUDGET_BYTES UNIT BATCH BATCHES

Prints JSON {baseline, peak, stream (MiB), description}: VmHWM after TensorFlow started and a
first tiny stream ran (the runtime's own memory), and after reading BATCHES batches.
"""

import json
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')


def vm_hwm_mib() -> float:
  with open('/proc/self/status') as f:
    return int(next(l for l in f if l.startswith('VmHWM:')).split()[1]) / 1024


def main(directory: str, memory_budget: int, unit: str, batch: int, batches: int) -> None:
  import itertools  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  from rlds_suite import streams  # pylint: disable=g-import-not-at-top
  tf.constant(0)
  make = lambda: streams.stream(
      [directory], unit={'steps': streams.StepUnit(), 'transitions': streams.Transitions()}[unit],
      batch_size=batch, seed=0, shuffle=streams.Shuffle(memory_budget=memory_budget))
  baseline = vm_hwm_mib()
  stream = make()
  total = 0
  for b in itertools.islice(streams.as_numpy(stream), batches):
    total += len(b[streams.DATASET_INDEX])
  peak = vm_hwm_mib()
  print(json.dumps({'baseline': baseline, 'peak': peak, 'stream': peak - baseline,
                    'units': total, 'description': stream.description}))


if __name__ == '__main__':
  main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
