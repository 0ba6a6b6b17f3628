"""Restricted unpickling for benchmark pickles that reference classes our users do not have.

Only an explicit allow-list of globals is resolved: numpy array reconstruction, a few builtins and
collections, and known foreign classes mapped to local stand-ins. Any other global (os.system,
subprocess, builtins.eval, ...) raises UnsafePickleError before anything is called.
"""

from __future__ import annotations

import codecs
import collections
import copyreg
import dataclasses
import io
import pickle
from typing import IO, Any, Mapping, NamedTuple, Optional

import numpy as np

from rlds_suite.core import errors


class MILBenchTrajectory(NamedTuple):
  """Stand-in for milbench.baselines.saved_trajectories.MILBenchTrajectory (MAGICAL demos)."""
  acts: Any
  obs: Any
  rews: Any
  infos: Any


@dataclasses.dataclass
class ImitationTrajectory:
  """Stand-in for imitation.data.types.Trajectory / TrajectoryWithRew (fields as in imitation)."""
  obs: Any = None
  acts: Any = None
  infos: Any = None
  terminal: bool = True
  rews: Any = None


class SpaceStandIn:
  """Stand-in for a pickled gym/gymnasium space: keeps its kind and whatever state was pickled."""
  kind = 'Space'

  def __init__(self, *args, **kwargs):
    self.state = {'args': args, **kwargs}

  def __setstate__(self, state):
    self.state = dict(state) if isinstance(state, Mapping) else {'state': state}

  def __repr__(self) -> str:
    return f'{self.kind}StandIn({self.state})'


def _inflate_object(cls: Any, state: Mapping[str, Any]) -> Any:
  """Stand-in for il_representations.envs.utils._inflate_object (rebuilds a space from its state)."""
  if not (isinstance(cls, type) and issubclass(cls, SpaceStandIn)):
    raise errors.UnsafePickleError(f'_inflate_object called on unexpected {cls!r}')
  obj = cls.__new__(cls)
  obj.__setstate__(state)
  return obj


class ColorSpaceStandIn(str):
  """Stand-in for imitation.augment.color.ColorSpace (an Enum of 'RGB'/'GRAY')."""


_SPACE_MODULES = {'box': 'Box', 'discrete': 'Discrete', 'dict': 'Dict', 'tuple': 'Tuple',
                  'multi_discrete': 'MultiDiscrete', 'multi_binary': 'MultiBinary'}

# Foreign classes -> local stand-ins. Keys are (module, name) as pickled.
KNOWN_CLASSES: dict[tuple[str, str], Any] = {
    ('milbench.baselines.saved_trajectories', 'MILBenchTrajectory'): MILBenchTrajectory,
    ('magical.saved_trajectories', 'MAGICALTrajectory'): MILBenchTrajectory,
    # imitation's first Trajectory was a NamedTuple (acts, obs, rews, infos), the layout MAGICAL
    # recorded with; MAGICAL's own loader maps both to one class.
    ('imitation.util.rollout', 'Trajectory'): MILBenchTrajectory,
    ('imitation.data.types', 'Trajectory'): ImitationTrajectory,
    ('imitation.data.types', 'TrajectoryWithRew'): ImitationTrajectory,
    ('il_representations.envs.utils', '_inflate_object'): _inflate_object,
    ('imitation.augment.color', 'ColorSpace'): ColorSpaceStandIn,
}
for _package in ('gym', 'gymnasium'):
  for _module, _name in _SPACE_MODULES.items():
    KNOWN_CLASSES[(f'{_package}.spaces.{_module}', _name)] = type(
        f'{_name}StandIn', (SpaceStandIn,), {'kind': _name})

# Globals numpy and the standard library need to rebuild plain data.
_PLAIN_GLOBALS: dict[tuple[str, str], Any] = {
    ('numpy', 'ndarray'): np.ndarray,
    ('numpy', 'dtype'): np.dtype,
    ('collections', 'OrderedDict'): collections.OrderedDict,
    ('builtins', 'dict'): dict,
    ('builtins', 'list'): list,
    ('builtins', 'tuple'): tuple,
    ('builtins', 'set'): set,
    ('builtins', 'frozenset'): frozenset,
    ('builtins', 'bytearray'): bytearray,
    ('builtins', 'complex'): complex,
    ('builtins', 'object'): object,
    ('copyreg', '_reconstructor'): copyreg._reconstructor,
    ('copyreg', '__newobj__'): copyreg.__newobj__,
    ('_codecs', 'encode'): codecs.encode,  # Protocol 2 stores bytes as encode(str, 'latin1').
}


def _plain_global(module: str, name: str) -> Any:
  """The allowed standard global for (module, name), or None."""
  if module in ('numpy.core.multiarray', 'numpy._core.multiarray') and name in ('_reconstruct',
                                                                                 'scalar'):
    from numpy._core import multiarray  # pylint: disable=g-import-not-at-top
    return getattr(multiarray, name)
  if module in ('numpy.core.numeric', 'numpy._core.numeric') and name == '_frombuffer':
    from numpy._core import numeric  # pylint: disable=g-import-not-at-top
    return numeric._frombuffer  # Protocol 5 arrays.  # pylint: disable=protected-access
  if module == 'numpy.dtypes' and name.endswith('DType'):
    return getattr(np.dtypes, name, None)
  return _PLAIN_GLOBALS.get((module, name))


class RestrictedUnpickler(pickle.Unpickler):
  """An Unpickler that resolves only allow-listed globals and known stand-ins."""

  def __init__(self, file: IO[bytes], *, source: str = '',
               extra_classes: Optional[Mapping[tuple[str, str], Any]] = None):
    super().__init__(file)
    self._source = source
    self._classes = {**KNOWN_CLASSES, **(extra_classes or {})}

  def find_class(self, module: str, name: str) -> Any:
    found = self._classes.get((module, name)) or _plain_global(module, name)
    if found is None:
      raise errors.UnsafePickleError(
          f'refusing to load global {module}.{name}: only numpy arrays, builtin containers and '
          f'the known benchmark classes may be unpickled', path=self._source or None)
    return found

  def persistent_load(self, pid: Any) -> Any:
    raise errors.UnsafePickleError(f'refusing persistent id {pid!r}', path=self._source or None)


def loads(data: bytes, *, source: str = '', **kwargs) -> Any:
  return load(io.BytesIO(data), source=source, **kwargs)


def load(file: IO[bytes], *, source: str = '',
         extra_classes: Optional[Mapping[tuple[str, str], Any]] = None) -> Any:
  """Unpickles with the restricted unpickler; damaged data raises CorruptFileError naming `source`."""
  try:
    return RestrictedUnpickler(file, source=source, extra_classes=extra_classes).load()
  except errors.RLDSSuiteError:
    raise
  except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError,
          KeyError, OSError) as e:
    raise errors.CorruptFileError(f'cannot unpickle: {type(e).__name__}: {e}',
                                  path=source or None) from e
