"""Restricted unpickling for benchmark pickles that reference classes our users do not have.

The pure-Python unpickler runs with every opcode that makes, fills or calls objects replaced by a
checked one, so a pickle can only:
  * name allow-listed globals (`find_class`): numpy's array, dtype and scalar hooks (replaced by
    `pickled_numpy`'s checked versions), builtin containers, and the known foreign classes mapped
    to local stand-ins;
  * call (REDUCE, INST, OBJ) or instantiate (NEWOBJ, copyreg's helpers) only those, each with its
    arguments checked; an array comes only from the file's bytes (or an object array from the
    pickle's own list), never from uninitialised memory or a pointer;
  * give state (BUILD) only to an object this load made: a stand-in's declared fields (per
    instance), an array's or a dtype's description; never to a class, function or module, so one
    file cannot change how another file loads;
  * fill only plain containers (SETITEM(S) dicts, APPEND(S) lists, ADDITEMS sets);
  * claim no more bytes (BINBYTES8, BINUNICODE8, FRAME, ...) than the stream can hold: a claim is
    checked against the stream's size when known and read in chunks otherwise, never allocated
    up front;
  * build at most MAX_BUILT objects (`_count`): an opcode may make an object from one byte of
    pickle, and a call may copy a container or bytes the load already holds, so the stream's
    size alone bounds nothing (8 KiB of gzip: 8M empty lists, 613 MiB).
Anything else raises UnsafePickleError before it runs; damaged data raises CorruptFileError.
Persistent ids and extension codes are refused (no supported format uses them).
"""

from __future__ import annotations

import _compat_pickle
import codecs
import collections
import dataclasses
import io
import os
import pickle
import stat
import struct
from typing import IO, Any, Callable, Mapping, NamedTuple, Optional

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import limits
from rlds_suite.core import pickled_numpy

# Exceptions that mean "damaged data" when raised while a pickle is read.
DAMAGE_ERRORS = (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
                 IndexError, KeyError, OSError, struct.error, OverflowError, RecursionError)


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

  def __init__(self, state: Optional[Mapping[str, Any]] = None):
    self.state = dict(state or {})

  def __repr__(self) -> str:
    return f'{self.kind}StandIn({self.state})'


class ColorSpaceStandIn(str):
  """Stand-in for imitation.augment.color.ColorSpace (an Enum of 'RGB'/'GRAY')."""


def _state_dict(state: Any, owner: type) -> dict:
  """BUILD's state as one dict: a dict, or (dict or None, slot dict or None)."""
  if type(state) is tuple and len(state) == 2:
    parts = [part for part in state if part is not None]
  else:
    parts = [state]
  if not all(type(part) is dict for part in parts):
    raise errors.UnsafePickleError(f'refusing state {pickled_numpy.short(state)} for '
                                   f'{owner.__name__}: expected a dict')
  return {key: value for part in parts for key, value in part.items()}


def _set_fields(instance: Any, state: Any) -> None:
  """BUILD of a dataclass stand-in: sets its declared fields on this instance only."""
  values = _state_dict(state, type(instance))
  fields = {field.name for field in dataclasses.fields(instance)}
  unknown = [key for key in values if key not in fields]
  if unknown:
    raise errors.UnsafePickleError(f'refusing state {unknown[:5]} for {type(instance).__name__}: '
                                   f'not among its fields {sorted(fields)}')
  for key, value in values.items():
    setattr(instance, key, value)


def _set_space_state(space: SpaceStandIn, state: Any) -> None:
  space.state = _state_dict(state, type(space))


def _inflate_object(cls: Any, state: Any) -> SpaceStandIn:
  """Stand-in for il_representations.envs.utils._inflate_object (rebuilds a space from its state)."""
  if not any(cls is space for space in _SPACES.values()):
    raise errors.UnsafePickleError(f'_inflate_object called on unexpected {_name(cls)}')
  return cls(_state_dict(state, cls))


def _color_space(value: Any) -> ColorSpaceStandIn:
  if type(value) is not str:
    raise errors.UnsafePickleError(f'refusing ColorSpace({pickled_numpy.short(value)})')
  return ColorSpaceStandIn(value)


_SPACE_MODULES = {'box': 'Box', 'discrete': 'Discrete', 'dict': 'Dict', 'tuple': 'Tuple',
                  'multi_discrete': 'MultiDiscrete', 'multi_binary': 'MultiBinary'}
_SPACES: dict[str, type] = {kind: type(f'{kind}StandIn', (SpaceStandIn,), {'kind': kind})
                            for kind in _SPACE_MODULES.values()}


def _new_instance(cls: Any, args: tuple, kwargs: Optional[dict] = None) -> Any:
  """NEWOBJ(cls, args): only stand-in classes, each with the arguments its pickles use."""
  try:
    make = _NEW.get(cls)
  except TypeError:  # Unhashable.
    make = None
  if make is None or kwargs or type(args) is not tuple:
    raise errors.UnsafePickleError(f'refusing to create {_name(cls)}: only the known benchmark '
                                   f'classes may be instantiated, with their own arguments')
  return make(*args)


def _reconstructor(cls: Any, base: Any, state: Any) -> Any:
  """copyreg._reconstructor, which protocols 0 and 1 use for instances."""
  if base is object and state is None:
    return _new_instance(cls, ())
  if base is tuple and type(state) is tuple:
    return _new_instance(cls, state)
  raise errors.UnsafePickleError(f'refusing copyreg._reconstructor({_name(cls)}, {_name(base)})')


def _newobj(cls: Any, *args: Any) -> Any:
  """copyreg.__newobj__, as NEWOBJ."""
  return _new_instance(cls, args)


def _container(kind: type) -> Callable[..., Any]:
  """kind() or kind(plain container), as pickle calls dict, list, set, OrderedDict, ..."""
  def make(*args: Any) -> Any:
    if len(args) > 1 or (args and type(args[0]) not in (list, tuple, dict, set, frozenset)):
      raise errors.UnsafePickleError(f'refusing {kind.__name__}{pickled_numpy.short(args)}')
    return kind(*args)
  return make


def _byte_string(kind: type) -> Callable[..., Any]:
  """bytes()/bytearray() of bytes only: bytes(10**12) would allocate a terabyte."""
  def make(*args: Any) -> Any:
    if len(args) > 1 or (args and not isinstance(args[0], (bytes, bytearray))):
      raise errors.UnsafePickleError(f'refusing {kind.__name__}{pickled_numpy.short(args)}')
    return kind(*args)
  return make


def _complex(real: Any = 0.0, imag: Any = 0.0) -> complex:
  if not all(type(part) in (int, float) for part in (real, imag)):
    raise errors.UnsafePickleError(f'refusing complex({real!r}, {imag!r})')
  return complex(real, imag)


def _latin1(text: Any, encoding: Any = 'latin1') -> bytes:
  """_codecs.encode(str, 'latin1'): how protocol 2 stores bytes."""
  if type(text) is not str or encoding not in ('latin1', 'latin-1'):
    raise errors.UnsafePickleError(f'refusing _codecs.encode({pickled_numpy.short(text)}, '
                                   f'{encoding!r})')
  return codecs.encode(text, 'latin1')


# (module, name) as pickled -> what find_class gives. Some are the real objects (classes whose
# only use is as a checked argument or a key of _CALL/_NEW), the rest checked replacements.
_GLOBALS: dict[tuple[str, str], Any] = {
    ('milbench.baselines.saved_trajectories', 'MILBenchTrajectory'): MILBenchTrajectory,
    ('magical.saved_trajectories', 'MAGICALTrajectory'): MILBenchTrajectory,
    # imitation's first Trajectory was a NamedTuple (acts, obs, rews, infos), the layout MAGICAL
    # recorded with; MAGICAL's own loader maps both to one class.
    ('imitation.util.rollout', 'Trajectory'): MILBenchTrajectory,
    ('imitation.data.types', 'Trajectory'): ImitationTrajectory,
    ('imitation.data.types', 'TrajectoryWithRew'): ImitationTrajectory,
    ('il_representations.envs.utils', '_inflate_object'): _inflate_object,
    ('imitation.augment.color', 'ColorSpace'): ColorSpaceStandIn,
    ('numpy', 'ndarray'): np.ndarray,
    ('numpy', 'dtype'): np.dtype,
    ('collections', 'OrderedDict'): collections.OrderedDict,
    ('builtins', 'dict'): dict,
    ('builtins', 'list'): list,
    ('builtins', 'tuple'): tuple,
    ('builtins', 'set'): set,
    ('builtins', 'frozenset'): frozenset,
    ('builtins', 'bytes'): bytes,
    ('builtins', 'bytearray'): bytearray,
    ('builtins', 'complex'): complex,
    ('builtins', 'object'): object,
    ('copyreg', '_reconstructor'): _reconstructor,
    ('copyreg', '__newobj__'): _newobj,
    ('_codecs', 'encode'): _latin1,
}
for _package in ('gym', 'gymnasium'):
  for _module, _space in _SPACE_MODULES.items():
    _GLOBALS[(f'{_package}.spaces.{_module}', _space)] = _SPACES[_space]
for _core in ('numpy.core', 'numpy._core'):
  _GLOBALS[(f'{_core}.multiarray', '_reconstruct')] = pickled_numpy.new_array
  _GLOBALS[(f'{_core}.multiarray', 'scalar')] = pickled_numpy.scalar
  _GLOBALS[(f'{_core}.numeric', '_frombuffer')] = pickled_numpy.from_buffer  # Protocol 5.

# What REDUCE (and INST/OBJ) may call, keyed by what find_class gave: the checked maker.
_CALL: dict[Any, Callable[..., Any]] = {
    np.dtype: pickled_numpy.new_dtype,
    pickled_numpy.new_array: pickled_numpy.new_array,
    pickled_numpy.scalar: pickled_numpy.scalar,
    pickled_numpy.from_buffer: pickled_numpy.from_buffer,
    _inflate_object: _inflate_object,
    ColorSpaceStandIn: _color_space,
    _reconstructor: _reconstructor,
    _newobj: _newobj,
    _latin1: _latin1,
    bytes: _byte_string(bytes),
    bytearray: _byte_string(bytearray),
    complex: _complex,
    **{kind: _container(kind) for kind in (dict, list, tuple, set, frozenset,
                                           collections.OrderedDict)},
}
# What NEWOBJ may instantiate, and how.
_NEW: dict[Any, Callable[..., Any]] = {
    MILBenchTrajectory: MILBenchTrajectory,  # Exactly its four fields, or TypeError.
    ImitationTrajectory: lambda: ImitationTrajectory(),  # pylint: disable=unnecessary-lambda
    **{cls: (lambda cls=cls: cls()) for cls in _SPACES.values()},
}
# BUILD on an instance of exactly these types (besides this load's pending dtypes and arrays).
_STATE: dict[type, Callable[[Any, Any], None]] = {
    ImitationTrajectory: _set_fields,
    **{cls: _set_space_state for cls in _SPACES.values()},
}
# Container opcodes and the only types they may fill.
_FILLS = {'dict': (dict, collections.OrderedDict), 'list': (list,), 'set': (set,)}
_CHUNK = 1 << 24  # Unbounded claims above this are read in chunks, never allocated up front.
# The most one load (pickle_stream: one item) may build, counted so that one count costs at most
# ~45 bytes: each opcode run counts one, one that makes a container or a memo entry more
# (_MORE_BUILT: an empty list ~72 bytes counts two, an empty set ~235 six), a set's or dict's items
# one each, and a call or BUILD that copies what the load already holds the items it copies
# (`_copied`): ~180 MiB at this cap (measured: 2M empty lists 137 MiB, 2M empty sets 449 MiB).
# Real files count far fewer: a MAGICAL demo ~3.8k (its arrays ~40 each, whatever their size),
# imitation's CartPole rollouts' infos ~1.3 a step (a memoized dict each; 34k for 27k steps), a
# fresh {} a step 4.3, {'TimeLimit.truncated': False} 7.3. The cap holds a 1M-step imitation
# file with a fresh {} a step, 3.2M steps of the real layout, a thousand MAGICAL demos.
MAX_BUILT = 1 << 22
CHECK_EVERY = 1 << 16  # Opcodes counted at once (the count may pass the cap by this many).
# Calls and BUILDs may copy twice the bytes the stream can hold (protocol 2 copies an array's data
# twice: text to bytes, bytes to array; others, none): 1 GiB when unknown and no bound was given.
_MAX_COPIED = 1 << 29
_LENGTHS = {fmt: struct.Struct(fmt) for fmt in ('<I', '<Q', '<i')}
_UINT32 = _LENGTHS['<I']


def _name(value: Any) -> str:
  name = getattr(value, '__qualname__', None)
  return f'{getattr(value, "__module__", "")}.{name}' if isinstance(name, str) else (
      pickled_numpy.short(value))


def stream_size(file: IO[bytes]) -> Optional[int]:
  """The bytes `file` holds from its position on, when cheap to know (in-memory data and regular
  files), else None."""
  if isinstance(file, io.BytesIO):  # Not getbuffer(), which copies data the BytesIO shares.
    here = file.tell()
    end = file.seek(0, io.SEEK_END)
    file.seek(here)
    return end - here
  raw = file.raw if isinstance(file, io.BufferedReader) else file
  if isinstance(raw, io.FileIO):
    try:
      info = os.fstat(raw.fileno())
      return info.st_size - file.tell() if stat.S_ISREG(info.st_mode) else None
    except OSError:
      return None
  return None


class RestrictedUnpickler(pickle._Unpickler):  # pylint: disable=protected-access
  """An Unpickler that resolves only allow-listed globals and gives objects only checked state.

  `max_bytes` bounds what any one opcode may claim (default: the stream's size, when known), and
  the bytes calls and BUILDs may copy; `max_built` what one load may build (default MAX_BUILT), times core.limits.factor().
  """

  dispatch = dict(pickle._Unpickler.dispatch)  # pylint: disable=protected-access

  def __init__(self, file: IO[bytes], *, source: str = '', max_bytes: Optional[int] = None,
               max_built: Optional[int] = None):
    super().__init__(file)
    self._source = source
    bounds = [b for b in (stream_size(file), max_bytes) if b is not None]
    self._max_bytes = min(bounds) if bounds else None
    self._max_built = int((MAX_BUILT if max_built is None else max_built) * limits.factor())
    self._built = 0  # Opcodes run and objects made, counted toward max_built.
    self._bytes_copied = 0
    self._unbuilt: dict[int, Any] = {}  # id -> dtype or array made by REDUCE, awaiting BUILD.
    self._globals: dict[tuple[bytes, bytes, bool], Any] = {}  # GLOBAL's lines -> find_class's.

  def _refuse(self, problem: str) -> errors.UnsafePickleError:
    return errors.UnsafePickleError(problem, path=self._source or None)

  # What one load may build.

  def load(self) -> Any:
    """pickle's own load loop, counting the opcodes it runs every CHECK_EVERY."""
    self._unframer = pickle._Unframer(self._file_read, self._file_readline)  # pylint: disable=protected-access
    self.read, self.readinto, self.readline = (self._unframer.read, self._unframer.readinto,
                                               self._unframer.readline)
    self.metastack, self.stack, self.proto = [], [], 0
    self.append = self.stack.append
    read, dispatch = self.read, self.dispatch
    try:
      while True:
        for _ in range(CHECK_EVERY):
          key = read(1)
          if not key:
            raise EOFError('pickle data was truncated')
          dispatch[key[0]](self)
        self._count(CHECK_EVERY)
    except pickle._Stop as stop:  # pylint: disable=protected-access
      return stop.value

  def _what(self) -> str:
    """What the count is of, for its refusal."""
    return 'the pickle'

  def _count(self, built: int, copied: int = 0) -> None:
    """Counts `built` opcodes or objects (and `copied` bytes copied) toward this load's caps."""
    self._built += built
    self._bytes_copied += copied
    if self._built > self._max_built:
      raise errors.CorruptFileError(
          f'{self._what()} builds more than {self._max_built} objects (opcodes run, items copied; '
          f'the most one load may build: each opcode may make an object; {limits.how_to_allow()})',
          path=self._source or None)
    if copied and self._bytes_copied > 2 * (self._max_bytes or _MAX_COPIED):
      raise errors.CorruptFileError(
          f'{self._what()} copies more than {2 * (self._max_bytes or _MAX_COPIED)} bytes of data '
          f'(twice what the pickle stream can hold)', path=self._source or None)

  def find_class(self, module: str, name: str) -> Any:
    if self.proto < 3:  # Python 2 names, as pickle maps them.
      module, name = _compat_pickle.NAME_MAPPING.get(
          (module, name), (_compat_pickle.IMPORT_MAPPING.get(module, module), name))
    found = _GLOBALS.get((module, name))
    if found is None:
      raise self._refuse(f'refusing to load global {module}.{name}: only numpy arrays, builtin '
                         f'containers and the known benchmark classes may be unpickled')
    return found

  def load_global(self) -> None:
    """GLOBAL, with what find_class gave each (module, name) line pair kept: numpy's pickles
    without a memo name the same three globals for every array."""
    key = (self.readline(), self.readline(), self.proto < 3)
    found = self._globals.get(key)
    if found is None:
      found = self.find_class(key[0][:-1].decode('utf-8'), key[1][:-1].decode('utf-8'))
      self._globals[key] = found
    self.append(found)

  def persistent_load(self, pid: Any) -> Any:
    raise self._refuse(f'refusing persistent id {pickled_numpy.short(pid)}')

  # Calls.

  def _call(self, func: Any, args: Any) -> Any:
    try:
      make = _CALL.get(func)
    except TypeError:  # Unhashable: not a global.
      make = None
    if make is None:
      raise self._refuse(f'refusing to call {_name(func)}: only numpy arrays, builtin containers '
                         f'and the known benchmark classes may be made')
    if type(args) is not tuple:
      raise self._refuse(f'refusing call arguments {pickled_numpy.short(args)}')
    made = make(*args)
    self._count(*_copied(made))
    if func is np.dtype or func is pickled_numpy.new_array:  # Incomplete until their BUILD.
      self._unbuilt[id(made)] = made
    return made

  def load_reduce(self) -> None:
    args = self.stack.pop()
    self.stack[-1] = self._call(self.stack[-1], args)

  def _instantiate(self, klass: Any, args: list) -> None:  # INST and OBJ.
    self.append(self._call(klass, tuple(args)))

  def load_newobj(self) -> None:
    args = self.stack.pop()
    cls = self.stack.pop()
    self.append(_new_instance(cls, args))

  def load_newobj_ex(self) -> None:
    kwargs = self.stack.pop()
    args = self.stack.pop()
    cls = self.stack.pop()
    self.append(_new_instance(cls, args, kwargs))

  def load_ext(self) -> None:
    raise self._refuse('refusing an extension code (EXT1/2/4): no supported format uses them')

  # State.

  def load_build(self) -> None:
    state = self.stack.pop()
    inst = self.stack[-1]
    if self._unbuilt.pop(id(inst), None) is not None:
      if type(inst) is pickled_numpy.PendingDType:
        dtype = pickled_numpy.build_dtype(inst, state)
        self.stack[-1] = dtype
        for key in inst.memo_keys:
          if self.memo.get(key) is inst:
            self.memo[key] = dtype
      else:
        pickled_numpy.set_array_state(inst, state)
        self._count(*_copied(inst))
      return
    apply = _STATE.get(type(inst))
    if apply is None:
      raise self._refuse(f'refusing to set the state of {_name(type(inst))} object '
                         f'{pickled_numpy.short(inst)}: only this file\'s stand-in instances '
                         f'take state')
    apply(inst, state)
    self._count(*_copied(inst))

  def load_stop(self) -> None:
    """STOP ends the stream: with one finished value, and nothing after it (a byte changed into
    STOP would otherwise return part of the data as the whole)."""
    if self.metastack or len(self.stack) != 1:
      raise errors.CorruptFileError('the pickle stops inside an unfinished value',
                                    path=self._source or None)
    frame = self._unframer.current_frame
    if (frame is not None and frame.read(1)) or self._file_read(1):
      raise errors.CorruptFileError('data follows the end of the pickle', path=self._source or None)
    self._check_all_built()
    super().load_stop()

  def _check_all_built(self) -> None:
    if self._unbuilt:
      kinds = sorted({type(v).__name__ for v in self._unbuilt.values()})
      raise self._refuse(f'refusing {len(self._unbuilt)} {"/".join(kinds)} object(s) made without '
                         f'their data (no BUILD)')

  # Memo: objects awaiting BUILD may not be fetched again; BUILD replaces a pending dtype in it.

  def _memo_put(self, key: int) -> None:
    self._built += 1
    value = self.stack[-1]
    self.memo[key] = value
    if type(value) is pickled_numpy.PendingDType:
      value.memo_keys.append(key)

  def load_put(self) -> None:
    key = int(self.readline()[:-1])
    if key < 0:
      raise ValueError('negative PUT argument')
    self._memo_put(key)

  def load_binput(self) -> None:
    self._memo_put(self.read(1)[0])

  def load_long_binput(self) -> None:  # np.savez's pickles: one after every object.
    key, = _UINT32.unpack(self.read(4))
    self._built += 1
    value = self.memo[key] = self.stack[-1]
    if type(value) is pickled_numpy.PendingDType:
      value.memo_keys.append(key)

  def load_memoize(self) -> None:
    self._memo_put(len(self.memo))

  def _memo_get(self, key: int) -> None:
    try:
      value = self.memo[key]
    except KeyError:
      raise pickle.UnpicklingError(f'Memo value not found at index {key}') from None
    if id(value) in self._unbuilt:
      self._check_complete(value)
    self.append(value)

  def _check_complete(self, value: Any) -> None:
    if id(value) in self._unbuilt:
      raise self._refuse(f'refusing to use a {type(value).__name__} before its data (BUILD)')

  def load_get(self) -> None:
    self._memo_get(int(self.readline()[:-1]))

  def load_binget(self) -> None:
    self._memo_get(self.read(1)[0])

  def load_long_binget(self) -> None:
    self._memo_get(_UINT32.unpack(self.read(4))[0])

  def load_dup(self) -> None:
    self._check_complete(self.stack[-1])
    self.append(self.stack[-1])

  # Containers.

  def _target(self, kind: str) -> Any:
    target = self.stack[-1]
    if type(target) not in _FILLS[kind]:
      raise self._refuse(f'refusing to add items to {_name(type(target))}: only a {kind} takes '
                         f'them here')
    return target

  def load_setitem(self) -> None:
    value = self.stack.pop()
    key = self.stack.pop()
    self._target('dict')[key] = value

  def load_setitems(self) -> None:
    items = self.pop_mark()
    target = self._target('dict')
    self._built += len(items) // 2
    for i in range(0, len(items), 2):
      target[items[i]] = items[i + 1]

  def load_append(self) -> None:
    value = self.stack.pop()
    self._target('list').append(value)

  def load_appends(self) -> None:
    items = self.pop_mark()
    self._target('list').extend(items)

  def load_additems(self) -> None:
    items = self.pop_mark()
    self._built += len(items)
    self._target('set').update(items)

  # Lengths claimed by the file.

  def _claimed(self, size: int, opcode: str, read: Optional[Callable[[int], bytes]] = None
               ) -> bytes:
    """`size` bytes, refused before reading when more than the stream can hold. Within a bound,
    one read: a buffered stream's read makes the result once and fills it as data arrives (pages
    untouched stay unused), where chunks joined would hold the claim twice."""
    if self._max_bytes is not None and size > self._max_bytes:
      raise errors.CorruptFileError(f'{opcode} claims {size} bytes, more than the {self._max_bytes} '
                                    f'the pickle stream can hold', path=self._source or None)
    read = read or self.read
    if size <= _CHUNK or self._max_bytes is not None:
      data = read(size)
    else:
      chunks, left = [], size
      while left:
        chunk = read(min(left, _CHUNK))
        if not chunk:
          break
        chunks.append(chunk)
        left -= len(chunk)
      data = b''.join(chunks)
    if len(data) != size:
      raise errors.CorruptFileError(f'truncated: {opcode} claims {size} bytes, {len(data)} remain',
                                    path=self._source or None)
    return data

  def _length(self, fmt: str) -> int:
    length = _LENGTHS[fmt]
    size = length.unpack(self.read(length.size))[0]
    if size < 0:
      raise pickle.UnpicklingError(f'negative byte count {size}')
    return size

  def load_binbytes(self) -> None:
    self.append(self._claimed(self._length('<I'), 'BINBYTES'))

  def load_binbytes8(self) -> None:
    self.append(self._claimed(self._length('<Q'), 'BINBYTES8'))

  def load_bytearray8(self) -> None:
    self.append(bytearray(self._claimed(self._length('<Q'), 'BYTEARRAY8')))

  def load_binunicode(self) -> None:
    self.append(str(self._claimed(self._length('<I'), 'BINUNICODE'), 'utf-8', 'surrogatepass'))

  def load_binunicode8(self) -> None:
    self.append(str(self._claimed(self._length('<Q'), 'BINUNICODE8'), 'utf-8', 'surrogatepass'))

  def load_binstring(self) -> None:
    self.append(self._decode_string(self._claimed(self._length('<i'), 'BINSTRING')))

  def load_long4(self) -> None:
    self.append(pickle.decode_long(self._claimed(self._length('<i'), 'LONG4')))

  def load_frame(self) -> None:
    size = self._length('<Q')
    unframer = self._unframer
    if unframer.current_frame and unframer.current_frame.read() != b'':
      raise pickle.UnpicklingError('beginning of a new frame before end of current frame')
    unframer.current_frame = io.BytesIO(self._claimed(size, 'FRAME', self._file_read))


def _copied(made: Any) -> tuple[int, int]:
  """(counts, bytes) a call or BUILD may have copied into `made` from objects the load holds:
  a container's items (set(x), dict(x), a space's state: one each; list(x), tuple(x), an object
  array from a list: a pointer each, 8 bytes, one per 4), or the bytes of bytes, text or an array
  that holds its own data (bytearray(x), '>f8' data)."""
  if isinstance(made, (bytes, bytearray, str)):
    return 0, len(made)
  if isinstance(made, np.ndarray):
    if not made.flags.owndata:  # A view of the pickle's own bytes.
      return 0, 0
    return (made.size // 4, 0) if made.dtype.hasobject else (0, made.nbytes)
  if isinstance(made, SpaceStandIn):
    return len(made.state), 0
  if isinstance(made, (list, tuple)):
    return len(made) // 4, 0
  if isinstance(made, (dict, set, frozenset)):
    return len(made), 0
  return 0, 0


_OPCODES = {
    pickle.REDUCE: 'load_reduce', pickle.NEWOBJ: 'load_newobj', pickle.NEWOBJ_EX: 'load_newobj_ex',
    pickle.EXT1: 'load_ext', pickle.EXT2: 'load_ext', pickle.EXT4: 'load_ext',
    pickle.BUILD: 'load_build', pickle.STOP: 'load_stop',
    pickle.PUT: 'load_put', pickle.BINPUT: 'load_binput', pickle.LONG_BINPUT: 'load_long_binput',
    pickle.MEMOIZE: 'load_memoize', pickle.GET: 'load_get', pickle.BINGET: 'load_binget',
    pickle.LONG_BINGET: 'load_long_binget', pickle.DUP: 'load_dup',
    pickle.SETITEM: 'load_setitem', pickle.SETITEMS: 'load_setitems',
    pickle.APPEND: 'load_append', pickle.APPENDS: 'load_appends', pickle.ADDITEMS: 'load_additems',
    pickle.GLOBAL: 'load_global', pickle.BINBYTES: 'load_binbytes', pickle.BINBYTES8: 'load_binbytes8',
    pickle.BYTEARRAY8: 'load_bytearray8', pickle.BINUNICODE: 'load_binunicode',
    pickle.BINUNICODE8: 'load_binunicode8', pickle.BINSTRING: 'load_binstring',
    pickle.LONG4: 'load_long4', pickle.FRAME: 'load_frame',
}
RestrictedUnpickler.dispatch.update(
    {code[0]: getattr(RestrictedUnpickler, name) for code, name in _OPCODES.items()})
# Opcodes that make a container, and what each counts beyond the one every opcode counts.
_MORE_BUILT = {pickle.EMPTY_LIST: 1, pickle.EMPTY_DICT: 1, pickle.EMPTY_SET: 5,
               pickle.FROZENSET: 5, pickle.TUPLE: 1, pickle.TUPLE1: 1, pickle.TUPLE2: 1,
               pickle.TUPLE3: 1}


def _counted(load_op: Callable[[Any], None], more: int) -> Callable[[Any], None]:
  def counted(self: RestrictedUnpickler) -> None:
    load_op(self)
    self._built += more  # pylint: disable=protected-access
  return counted


RestrictedUnpickler.dispatch.update(
    {code[0]: _counted(RestrictedUnpickler.dispatch[code[0]], more)
     for code, more in _MORE_BUILT.items()})


def loads(data: bytes, *, source: str = '') -> Any:
  return load(io.BytesIO(data), source=source)


def load(file: IO[bytes], *, source: str = '', max_bytes: Optional[int] = None) -> Any:
  """Unpickles with the restricted unpickler; damaged data raises CorruptFileError naming `source`."""
  try:
    return RestrictedUnpickler(file, source=source, max_bytes=max_bytes).load()
  except errors.RLDSSuiteError as e:
    if e.path is None and source:
      raise e.at(source) from e
    raise
  except DAMAGE_ERRORS as e:
    raise errors.CorruptFileError(f'cannot unpickle: {type(e).__name__}: {e}',
                                  path=source or None) from e

