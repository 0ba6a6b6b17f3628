"""rlds_suite's registered builders: their names and configs, lookup with suggestions, listing."""

from __future__ import annotations

import dataclasses
import difflib
import os
from typing import Optional

import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.tfds import builder_base


@dataclasses.dataclass(frozen=True)
class BuilderEntry:
  """One registered builder of ours, as `rlds-suite list` shows it."""
  name: str
  description: str
  configs: tuple[str, ...]
  needs_manual_dir: bool
  downloads: bool
  version: str


def builder_classes() -> list[type[builder_base.RLDSBuilder]]:
  """Every builder class of rlds_suite.builders, sorted by name."""
  import rlds_suite.builders  # pylint: disable=g-import-not-at-top,unused-import,import-outside-toplevel
  found, todo = {}, list(builder_base.RLDSBuilder.__subclasses__())
  while todo:
    cls = todo.pop()
    todo.extend(cls.__subclasses__())
    if getattr(cls, 'name', None) and not getattr(cls, '_abstract', False):
      found[cls.name] = cls
  return [found[name] for name in sorted(found)]


def entries() -> list[BuilderEntry]:
  """What each builder reads and how it is prepared."""
  result = []
  for cls in builder_classes():
    doc = (cls.__doc__ or '').strip().splitlines()
    result.append(BuilderEntry(
        name=cls.name, description=doc[0] if doc else '',
        configs=tuple(c.name for c in (cls.BUILDER_CONFIGS or ())),
        needs_manual_dir=bool(getattr(cls, 'MANUAL_DOWNLOAD_INSTRUCTIONS', None)),
        downloads=(cls.pkg_dir_path / 'checksums.tsv').exists(),
        version=str(cls.VERSION)))
  return result


def full_names(listed: Optional[list[BuilderEntry]] = None) -> list[str]:
  """'builder' and 'builder/config' for every builder of ours (or of `listed`)."""
  names = []
  for entry in entries() if listed is None else listed:
    names.append(entry.name)
    names.extend(f'{entry.name}/{config}' for config in entry.configs)
  return names


def check_name(name: str) -> None:
  """Raises UnresolvedDatasetError, with the closest names, if `name` is no registered dataset.

  Accepts our builders ('d4rl/hopper-medium-v2', with or without a version) and any other
  builder TFDS has registered.
  """
  if name.startswith(('/', '.', '~')) or os.sep != '/' and os.sep in name:
    raise errors.EmptyInputError('no such directory (and not a registered dataset name)',
                                 path=name)
  parts = name.split(':')[0].split('/')
  listed = entries()
  ours = {entry.name: entry for entry in listed}
  builder = parts[0]
  if builder in ours:
    config = parts[1] if len(parts) > 1 and not parts[1][:1].isdigit() else None
    if config is None or config in ours[builder].configs or _configured_by_name(builder, config):
      return
    raise errors.UnresolvedDatasetError(
        f'{builder} has no config {config!r}{_suggest(f"{builder}/{config}", full_names(listed))}',
        path=name)
  others = list(tfds.list_builders(with_community_datasets=False))
  if builder in others:
    return
  raise errors.UnresolvedDatasetError(
      f'no registered dataset {builder!r} and no such directory'
      f'{_suggest(name, full_names(listed) + others)} (rlds-suite list shows them all)', path=name)


def _configured_by_name(builder: str, config: str) -> bool:
  """Whether a builder without listed configs makes one from any name (e.g. minari/<id>)."""
  cls = tfds.builder_cls(builder)
  if cls.BUILDER_CONFIGS:
    return False
  try:
    return cls.get_builder_config(config) is not None
  except Exception:  # pylint: disable=broad-except
    return False


def _suggest(name: str, candidates: list[str]) -> str:
  close = difflib.get_close_matches(name, candidates, n=3, cutoff=0.6)
  if not close and '/' in name:
    # A config typo: compare configs of the same builder by their own names.
    builder, config = name.split('/', 1)
    same = [c.split('/', 1)[1] for c in candidates if c.startswith(builder + '/')]
    close = [f'{builder}/{c}' for c in difflib.get_close_matches(config, same, n=3, cutoff=0.5)]
  close = list(dict.fromkeys(close))
  return f'; did you mean {", ".join(close)}?' if close else ''


def prepared(data_dir: Optional[str] = None) -> dict[str, list[str]]:
  """Datasets prepared under `data_dir` (TFDS's default when None): full name -> versions."""
  root = os.path.expanduser(data_dir or tfds.core.constants.DATA_DIR)
  found: dict[str, list[str]] = {}
  if not os.path.isdir(root):
    return found
  for dirpath, _, files in os.walk(root):
    if 'dataset_info.json' in files:
      relative = os.path.relpath(dirpath, root).split(os.sep)
      name, version = '/'.join(relative[:-1]), relative[-1]
      found.setdefault(name, []).append(version)
  return {name: sorted(versions) for name, versions in sorted(found.items())}
