"""Typed errors of rlds_suite. Each names the file (or dataset), the field and what was wrong."""

from __future__ import annotations

import contextlib
import errno
import os
from typing import Iterator, Optional, Union

PathLike = Union[str, os.PathLike]


class RLDSSuiteError(Exception):
  """Base class of every error rlds_suite raises on purpose."""

  def __init__(self, problem: str, *, path: Optional[PathLike] = None,
               field: Optional[str] = None):
    self.problem = problem
    self.path = None if path is None else os.fspath(path)
    self.field = field
    where = ': '.join(part for part in (self.path, field) if part)
    super().__init__(f'{where}: {problem}' if where else problem)

  def at(self, path: PathLike) -> 'RLDSSuiteError':
    """Returns the same error, located in `path` (for errors raised below the file level)."""
    return type(self)(self.problem, path=path, field=self.field)


class NativeFormatError(RLDSSuiteError, ValueError):
  """A native dataset file cannot be read as the format it claims to be."""


class CorruptFileError(NativeFormatError):
  """The file is truncated or its compression/container is damaged."""


class SizeLimitError(NativeFormatError):
  """Compressed data expands, or a header declares a size, beyond what the file can hold
  (a decompression bomb, or a limit to raise: see rlds_suite.core.limits)."""


class SchemaError(NativeFormatError):
  """The file is readable but lacks a field, or a field has the wrong type or shape."""


class EpisodeBoundaryError(NativeFormatError):
  """Arrays of one episode disagree in length, or episode-end flags are inconsistent."""


class InvalidValueError(NativeFormatError):
  """A value is not allowed, e.g. a NaN or infinite reward."""


class UnsafePickleError(NativeFormatError):
  """A pickle refers to a global that the restricted unpickler does not allow."""


class EmptyInputError(NativeFormatError):
  """No input files were found where data was expected."""


class ValidationError(RLDSSuiteError, ValueError):
  """An RLDS dataset violates the episode invariants (see rlds_suite.core.validation)."""


class SpecMismatchError(RLDSSuiteError, ValueError):
  """Datasets or steps disagree on observation/action specs."""


class UnresolvedDatasetError(RLDSSuiteError, LookupError):
  """A dataset_configs entry names no registered dataset (rlds_suite.streams.catalog)."""


class UsageError(RLDSSuiteError, ValueError):
  """Arguments that cannot work together: a build without the config it needs, or of files a
  builder would download when downloads were not allowed."""


class OutputWriteError(RLDSSuiteError, OSError):
  """An output cannot be written: a read-only directory, a full disk, a quota. What was complete
  before it is kept (the message says what)."""

  _REASONS = {errno.ENOSPC: 'disk full', errno.EDQUOT: 'disk quota exceeded',
              errno.EROFS: 'read-only file system', errno.EACCES: 'permission denied',
              errno.EPERM: 'permission denied'}

  @classmethod
  def from_os_error(cls, error: OSError, path: PathLike) -> 'OutputWriteError':
    """'disk full while writing PATH' (quota, read-only, permission denied, or the OS's words)."""
    reason = cls._REASONS.get(error.errno) or error.strerror or str(error)
    return cls(f'{reason} while writing {os.fspath(path)}')


class UnknownEnvironmentError(RLDSSuiteError, LookupError):
  """An environment spec names no environment, or passes an option it does not take."""


class MissingDependencyError(RLDSSuiteError, ImportError):
  """An optional dependency is needed for this feature and is not installed."""


class UnfinishedRecordingError(RLDSSuiteError, RuntimeError):
  """A dataset directory is being recorded into, or holds an interrupted recording's unfinished
  shards (`rlds-suite recover DIR` salvages them)."""


@contextlib.contextmanager
def located(path: PathLike) -> Iterator[None]:
  """Attributes rlds_suite errors raised inside the block to `path` when they name no file yet."""
  try:
    yield
  except RLDSSuiteError as e:
    if e.path is None:
      raise e.at(path) from e
    raise
