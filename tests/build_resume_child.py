"""Builds tests/build_helpers.Counting datasets on request, each in a forked process that the test
may kill (tests/test_build_resume.py): the libraries are imported once here, not once per build
(a build imports no TensorFlow: tests/test_build_without_tensorflow.py).

Reads one JSON request a line: {"data_dir", "episodes", "delay", "workers", "shard_bytes",
"pool_after"}; writes {"pid": ...} when the build starts and {"status": ...} when it ends (0: built,
3: stopped by a signal with BuildStopped, 1: another error, negative: killed).
"""

import json
import os
import pathlib
import sys
import traceback

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from rlds_suite.tfds import writing  # pylint: disable=g-import-not-at-top
from tests import build_helpers  # pylint: disable=g-import-not-at-top


def build(request: dict) -> int:
  writing.POOL_AFTER_BYTES = request.get('pool_after', writing.POOL_AFTER_BYTES)
  writing.BATCH_BYTES = request.get('batch_bytes', writing.BATCH_BYTES)
  builder = build_helpers.Counting(data_dir=request['data_dir'], episodes=request['episodes'],
                                   delay=request['delay'])
  builder.writer_workers = request['workers']
  builder.writer_shard_bytes = request['shard_bytes']
  try:
    builder.download_and_prepare()
  except writing.BuildStopped as e:
    print(e, file=sys.stderr)
    return 3
  except BaseException:  # pylint: disable=broad-except
    traceback.print_exc()
    return 1
  return 0


def main() -> None:
  for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
      os._exit(build(request))  # pylint: disable=protected-access
    print(json.dumps({'pid': pid}), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps({'status': os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == '__main__':
  main()
