"""Where a dataset came from, and whether it is still what was written.

Every dataset we build or record gets `rlds_suite_provenance.json` beside its dataset_info.json:
the rlds_suite version, the builder and config (or the recording's environment, options, seed and
policy), the command or call that produced it, when, the size and sha256 of every source file, and
the size and sha256 of every file of the dataset itself. `verify` hashes them again.
Sources of a build are every file below the manual_dir it was given (downloads are checked by
TFDS against the builder's checksums.tsv). Pure Python: no TensorFlow.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json
import os
import sys
from typing import Any, Iterable, Mapping, Optional

from rlds_suite.core import errors

FILE_NAME = 'rlds_suite_provenance.json'
_CHUNK = 1 << 20


def digest(path: errors.PathLike) -> dict[str, Any]:
  """{'size': bytes, 'sha256': hex} of a file, read in 1 MiB chunks."""
  sha = hashlib.sha256()
  size = 0
  with open(path, 'rb') as f:
    while chunk := f.read(_CHUNK):
      sha.update(chunk)
      size += len(chunk)
  return {'size': size, 'sha256': sha.hexdigest()}


def digests(root: errors.PathLike, skip: Iterable[str] = ()) -> dict[str, dict[str, Any]]:
  """Digests of every regular file below `root`, by path relative to it (sorted)."""
  skipped = set(skip)
  found = {}
  for directory, subdirectories, files in os.walk(root):
    subdirectories.sort()
    for name in sorted(files):
      path = os.path.join(directory, name)
      relative = os.path.relpath(path, root)
      if relative not in skipped and os.path.isfile(path):
        found[relative] = digest(path)
  return found


def command_line() -> str:
  """The command that is running, as the user typed it (best effort)."""
  argv = list(sys.argv)
  if argv and argv[0].endswith(('__main__.py', '-m')):
    argv[0] = 'python3 -m rlds_suite'
  return ' '.join(argv)


def write(dataset_dir: errors.PathLike, *, produced_by: Mapping[str, Any],
          source_root: Optional[errors.PathLike] = None,
          previous_runs: bool = False) -> dict[str, Any]:
  """Writes the provenance of the dataset in `dataset_dir` (the directory of dataset_info.json).

  `produced_by` says what made it (builder and config, or environment and policy). With
  `previous_runs`, earlier runs already recorded (a recording appended to) are kept in 'runs'.
  """
  from rlds_suite import __version__  # pylint: disable=g-import-not-at-top
  path = os.path.join(dataset_dir, FILE_NAME)
  runs = []
  if previous_runs and os.path.exists(path):
    runs = read(dataset_dir).get('runs', [])
  run = {'rlds_suite_version': __version__, 'command': command_line(),
         'finished': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
         **produced_by}
  record = {
      'runs': runs + [run],
      'source_root': None if source_root is None else os.path.abspath(source_root),
      'sources': {} if source_root is None else digests(source_root),
      'dataset_files': digests(dataset_dir, skip=[FILE_NAME]),
  }
  temporary = path + '.tmp'
  with open(temporary, 'w') as f:
    json.dump(record, f, indent=1, default=str)
  os.replace(temporary, path)
  return record


def read(dataset_dir: errors.PathLike) -> dict[str, Any]:
  path = os.path.join(dataset_dir, FILE_NAME)
  if not os.path.exists(path):
    raise errors.EmptyInputError(f'no {FILE_NAME}: built or recorded before provenance was kept',
                                 path=dataset_dir)
  try:
    with open(path) as f:
      return json.load(f)
  except json.JSONDecodeError as e:
    raise errors.CorruptFileError(f'not JSON: {e}', path=path) from e


@dataclasses.dataclass
class VerifyReport:
  """Differences between the recorded digests and the files as they are now."""
  dataset_dir: str
  checked_dataset_files: int = 0
  checked_sources: int = 0
  sources_skipped: Optional[str] = None
  problems: list[str] = dataclasses.field(default_factory=list)

  @property
  def ok(self) -> bool:
    return not self.problems


def _compare(recorded: Mapping[str, Any], current: Mapping[str, Any], what: str) -> list[str]:
  problems = []
  for name, expected in recorded.items():
    found = current.get(name)
    if found is None:
      problems.append(f'{what} {name}: missing')
    elif found != expected:
      problems.append(f'{what} {name}: size {found["size"]} sha256 {found["sha256"][:12]}..., '
                      f'recorded size {expected["size"]} sha256 {expected["sha256"][:12]}...')
  problems.extend(f'{what} {name}: not recorded (added later)'
                  for name in current if name not in recorded)
  return problems


def verify(dataset_dir: errors.PathLike, manual_dir: Optional[errors.PathLike] = None) -> VerifyReport:
  """Hashes the dataset's files and, where present, its sources again and compares them."""
  recorded = read(dataset_dir)
  report = VerifyReport(dataset_dir=os.fspath(dataset_dir))
  current = digests(dataset_dir, skip=[FILE_NAME])
  report.checked_dataset_files = len(current)
  report.problems += _compare(recorded['dataset_files'], current, 'dataset file')
  sources = recorded.get('sources') or {}
  root = manual_dir or recorded.get('source_root')
  if not sources:
    report.sources_skipped = 'no source files recorded'
  elif root is None or not os.path.isdir(root):
    report.sources_skipped = f'source directory {root} not present (pass --manual_dir)'
  else:
    now = {name: digest(os.path.join(root, name)) for name in sources
           if os.path.isfile(os.path.join(root, name))}
    report.checked_sources = len(now)
    report.problems += _compare(sources, now, 'source')
  return report
