"""A recording's run in rlds_suite_provenance.json (see rlds_suite.tfds.provenance), kept current
while it records: written when the recording starts, rewritten whenever its metadata is (a shard
completed) and when it ends, and a 'recovery' run added by `recover`. So `verify` holds for a
recording stopped by Ctrl-C, a full disk, or a SIGKILL and then recovered. Completed shards are
hashed once: they are never rewritten (a trimmed one changes size and is hashed again).
"""

from __future__ import annotations

import datetime
import os
from typing import Any, Mapping

from rlds_suite.recording import shards
from rlds_suite.tfds import provenance


def timestamp() -> str:
  """Now, in UTC, as the runs record their times."""
  return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')


def _is_shard(name: str) -> bool:
  return '.tfrecord-' in name


def write_run(directory: str, recording: Mapping[str, Any], *, new: bool) -> None:
  """Writes this recording's run (`recording`: environment, policy, counts, status), as a new run
  or in place of the last one (its own, written earlier); raises OutputWriteError."""
  path = os.path.join(directory, provenance.FILE_NAME)
  with shards.writing(path):
    provenance.write(directory, produced_by={'recording': dict(recording)}, previous_runs=True,
                     replace_last_run=not new, write_once=_is_shard)


def note_recovery(directory: str, summary: Mapping[str, Any]) -> None:
  """Adds a 'recovery' run (what `recover` salvaged) to a dataset that has provenance."""
  path = os.path.join(directory, provenance.FILE_NAME)
  if not os.path.exists(path):
    return  # Recorded before provenance was kept: nothing to update.
  with shards.writing(path):
    provenance.write(directory, produced_by={'recovery': dict(summary)}, previous_runs=True,
                     write_once=_is_shard)
