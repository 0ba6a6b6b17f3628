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
from typing import Any, Callable, Iterable, Mapping, Optional

from rlds_suite.core import errors
from rlds_suite.core import progress

FILE_NAME = 'rlds_suite_provenance.json'
# Where `rlds-suite build` keeps the report of a dataset that failed validation (not data: it is
# not among the dataset's recorded files, and goes when a later validation passes).
VALIDATION_FAILED = 'VALIDATION_FAILED.json'
_CHUNK = 1 << 20


# Digests taken by this process of the files it wrote (tfrecord_files.RecordWriter), by the file's
# identity: device, inode, size and modification time (kept by the renames and hard links that
# place a shard; a later change of the file changes them). At most _MAX_REMEMBERED, the oldest
# forgotten first (a forgotten file is read again): a long-lived process, such as the creator
# recording for days, writes files without end.
_written: dict[tuple[int, int, int, int], dict[str, Any]] = {}
_MAX_REMEMBERED = 1 << 16  # ~200 B each.


def _identity(path: errors.PathLike) -> tuple[int, int, int, int]:
  stat = os.stat(path)
  return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


def remember(path: errors.PathLike, written: dict[str, Any]) -> None:
  """Records the digest of a file this process has just written and closed, taken from the bytes
  as they were written: `write` uses it instead of reading the file again."""
  _written[_identity(path)] = dict(written)
  while len(_written) > _MAX_REMEMBERED:
    del _written[next(iter(_written))]


def digest(path: errors.PathLike, trust_written: bool = False) -> dict[str, Any]:
  """{'size': bytes, 'sha256': hex} of a file, read in 1 MiB chunks; with `trust_written`, one
  that `remember` recorded for the file as it still is (no read)."""
  known = _written.get(_identity(path)) if trust_written else None
  if known is not None:
    progress.file_done()
    return dict(known)
  sha = hashlib.sha256()
  size = 0
  with open(path, 'rb') as f:
    while chunk := f.read(_CHUNK):
      sha.update(chunk)
      size += len(chunk)
  progress.file_done()  # On verify's bar.
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


def dataset_digests(dataset_dir: errors.PathLike, previous: Mapping[str, Any] = {},
                    write_once: Callable[[str], bool] = lambda name: False,
                    trust_written: bool = False) -> dict[str, Any]:
  """Digests of a dataset's own files: all but the provenance, a failed validation's report and
  hidden files (a recording's lock and unfinished shard). A `write_once` file keeps its `previous`
  digest while its size holds; `trust_written`: see `digest` (`verify` reads every file)."""
  found = {}
  for directory, subdirectories, files in os.walk(dataset_dir):
    subdirectories[:] = sorted(d for d in subdirectories if not d.startswith('.'))
    for name in sorted(files):
      path = os.path.join(directory, name)
      relative = os.path.relpath(path, dataset_dir)
      if (name.startswith('.') or relative in (FILE_NAME, VALIDATION_FAILED) or
          not os.path.isfile(path)):
        continue
      known = previous.get(relative)
      if known and write_once(relative) and known['size'] == os.path.getsize(path):
        found[relative] = known
      else:
        found[relative] = digest(path, trust_written)
  return found


def command_line() -> str:
  """The command that is running, as the user typed it (best effort)."""
  argv = list(sys.argv)
  if argv and argv[0].endswith(('__main__.py', '-m')):
    argv[0] = 'python3 -m rlds_suite'
  return ' '.join(argv)


def write(dataset_dir: errors.PathLike, *, produced_by: Mapping[str, Any],
          source_root: Optional[errors.PathLike] = None,
          previous_runs: bool = False, replace_last_run: bool = False,
          write_once: Callable[[str], bool] = lambda name: False) -> dict[str, Any]:
  """Writes the provenance of the dataset in `dataset_dir` (the directory of dataset_info.json).

  `produced_by` says what made it (builder and config, or environment and policy). With
  `previous_runs`, earlier runs already recorded (a recording appended to) are kept in 'runs';
  `replace_last_run` replaces the last of them (a recording updating its own run as it goes).
  Files for which `write_once` holds (completed shards) are not hashed again while their size holds;
  nor are the files this process wrote with tfrecord_files.RecordWriter (hashed as written).
  """
  from rlds_suite import __version__  # pylint: disable=g-import-not-at-top
  path = os.path.join(dataset_dir, FILE_NAME)
  runs, previous = [], {}
  if (previous_runs or replace_last_run) and os.path.exists(path):
    recorded = read(dataset_dir)
    runs, previous = recorded.get('runs', []), recorded.get('dataset_files', {})
    runs = runs[:-1] if replace_last_run else runs
  run = {'rlds_suite_version': __version__, 'command': command_line(),
         'finished': datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds'),
         **produced_by}
  record = {
      'runs': runs + [run],
      'source_root': None if source_root is None else os.path.abspath(source_root),
      'sources': {} if source_root is None else digests(source_root),
      'dataset_files': dataset_digests(dataset_dir, previous, write_once, trust_written=True),
  }
  temporary = os.path.join(dataset_dir, f'.{FILE_NAME}.tmp')
  try:
    with open(temporary, 'w') as f:
      json.dump(record, f, indent=1, default=str)
    os.replace(temporary, path)
  finally:
    if os.path.exists(temporary):  # A full disk: the previous provenance stands.
      os.remove(temporary)
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
  with progress.Bar(progress.Totals(files=len(recorded['dataset_files'])), 'verify'):
    current = dataset_digests(dataset_dir)
  report.checked_dataset_files = len(current)
  report.problems += _compare(recorded['dataset_files'], current, 'dataset file')
  sources = recorded.get('sources') or {}
  root = manual_dir or recorded.get('source_root')
  if not sources:
    report.sources_skipped = 'no source files recorded'
  elif root is None or not os.path.isdir(root):
    report.sources_skipped = f'source directory {root} not present (pass --manual_dir)'
  else:
    with progress.Bar(progress.Totals(files=len(sources)), 'verify sources'):
      now = {name: digest(os.path.join(root, name)) for name in sources
             if os.path.isfile(os.path.join(root, name))}
    report.checked_sources = len(now)
    report.problems += _compare(sources, now, 'source')
  return report
