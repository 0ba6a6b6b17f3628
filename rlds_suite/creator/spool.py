"""The steps of episodes in flight, appended to a file per episode every few seconds, so that a
killed server still has them: at restart they are recorded as ABANDONED episodes.

A spool file is a sequence of records: 8-byte big-endian length, an `.npz` archive of the chunk's
steps (no pickles), 4-byte CRC-32 of the archive. A torn last record (the process died writing it)
is dropped. Each chunk holds timesteps `start..start+n` (EnvLogger `StepData`: the timestep, the
action that led to it, the step metadata) and the keys of step `start - 1`, which were not known
when that step was spooled (they are those of the action taken at it).
"""

from __future__ import annotations

import io
import os
import struct
import zlib
from typing import Any, Optional, Sequence

import dm_env
from envlogger import step_data
import numpy as np

from rlds_suite.core import nested

SUFFIX = '.steps'
_SEPARATOR = '|'  # Between a step's index, its part and the path inside the part.
_PREVIOUS_KEYS = 'previous_keys'


def path(directory: str, episode_id: str) -> str:
  return os.path.join(directory, episode_id + SUFFIX)


def append(file_path: str, steps: Sequence[step_data.StepData],
           previous_keys: Optional[str]) -> None:
  """Appends one chunk and hands it to the OS (a killed process keeps it)."""
  arrays: dict[str, np.ndarray] = {}
  if previous_keys is not None:
    arrays[_PREVIOUS_KEYS] = np.asarray(previous_keys)
  for index, data in enumerate(steps):
    timestep = data.timestep
    parts = {'step_type': int(timestep.step_type), 'reward': timestep.reward,
             'discount': timestep.discount, 'observation': timestep.observation,
             'action': data.action, 'custom': data.custom_data}
    for part, value in parts.items():
      if value is None:
        continue
      flat = nested.flatten_paths(value) if isinstance(value, dict) else {'': value}
      for leaf_path, leaf in flat.items():
        arrays[f'{index}{_SEPARATOR}{part}{_SEPARATOR}{leaf_path}'] = np.asarray(leaf)
  buffer = io.BytesIO()
  np.savez(buffer, **arrays)
  payload = buffer.getvalue()
  os.makedirs(os.path.dirname(file_path), exist_ok=True)
  with open(file_path, 'ab') as f:
    f.write(struct.pack('>Q', len(payload)) + payload + struct.pack('>I', zlib.crc32(payload)))


def read(file_path: str, keys_field: str) -> list[step_data.StepData]:
  """The spooled steps, in order, up to the first torn or damaged record."""
  steps: list[step_data.StepData] = []
  with open(file_path, 'rb') as f:
    data = f.read()
  offset = 0
  while offset + 8 <= len(data):
    (length,) = struct.unpack('>Q', data[offset:offset + 8])
    payload = data[offset + 8:offset + 8 + length]
    crc = data[offset + 8 + length:offset + 12 + length]
    if len(payload) < length or len(crc) < 4 or struct.unpack('>I', crc)[0] != zlib.crc32(payload):
      break
    offset += 12 + length
    with np.load(io.BytesIO(payload), allow_pickle=False) as archive:
      chunk = {key: archive[key] for key in archive.files}
    previous = chunk.pop(_PREVIOUS_KEYS, None)
    if previous is not None and steps and isinstance(steps[-1].custom_data, dict):
      steps[-1].custom_data[keys_field] = str(previous)
    steps.extend(_steps_of(chunk))
  return steps


def _steps_of(chunk: dict[str, np.ndarray]) -> list[step_data.StepData]:
  by_step: dict[int, dict[str, dict[str, np.ndarray]]] = {}
  for key, value in chunk.items():
    index, part, leaf_path = key.split(_SEPARATOR, 2)
    by_step.setdefault(int(index), {}).setdefault(part, {})[leaf_path] = value
  steps = []
  for index in sorted(by_step):
    parts = {part: _unflat(flat) for part, flat in by_step[index].items()}
    custom = parts.get('custom')
    if isinstance(custom, dict):
      custom = {k: (str(v) if v.dtype.kind == 'U' else v) for k, v in custom.items()}
    timestep = dm_env.TimeStep(dm_env.StepType(int(parts['step_type'])), parts.get('reward'),
                               parts.get('discount'), parts['observation'])
    steps.append(step_data.StepData(timestep, parts.get('action'), custom))
  return steps


def _unflat(flat: dict[str, np.ndarray]) -> Any:
  if set(flat) == {''}:
    return flat['']
  return nested.unflatten_paths(flat)
