"""pickle_stream: items of a pickled list one at a time, exactly as pickle.load gives them."""

import dataclasses
import gc
import io
import pickle
import pickletools
import re
import sys
import types
from unittest import mock
import tracemalloc
import weakref

import numpy as np
import pytest

from rlds_suite.core import errors
from rlds_suite.core import pickle_stream


def _stream(data: bytes) -> list:
  return list(pickle_stream.iter_list_items(lambda: io.BytesIO(data), source='test.pkl'))


@pytest.mark.parametrize('protocol', [3, 4, 5])
@pytest.mark.parametrize('count', [1, 2, 1001])  # APPEND, APPENDS, APPENDS + APPEND.
def test_items_equal_pickle_load(protocol, count):
  data = [{'states': [np.full((2, 2), i, np.int64)], 'actions': np.arange(i % 7),
           'dones': (i % 3 == 0,)} for i in range(count)]
  found = _stream(pickle.dumps(data, protocol=protocol))
  assert len(found) == count
  for got, want in zip(found, data):
    np.testing.assert_array_equal(got['states'][0], want['states'][0])
    np.testing.assert_array_equal(got['actions'], want['actions'])
    assert got['dones'] == want['dones']


def test_object_array_items_and_class_items():
  """An object ndarray (np.savez's arr_0) and items built with NEWOBJ + BUILD (dataclasses)."""
  array = np.empty(3, dtype=object)
  for i in range(3):
    array[i] = {'x': np.arange(i + 1)}
  found = _stream(pickle.dumps(array, protocol=3))
  assert [list(item['x']) for item in found] == [[0], [0, 1], [0, 1, 2]]
  module = types.ModuleType('imitation.data.types')
  cls = dataclasses.make_dataclass('TrajectoryWithRew', ['obs', 'acts'])
  cls.__module__, module.TrajectoryWithRew = module.__name__, cls
  parents = {name: types.ModuleType(name) for name in ('imitation', 'imitation.data')}
  with mock.patch.dict(sys.modules, {**parents, module.__name__: module}):
    data = pickle.dumps([cls(obs=np.ones(i + 2), acts=np.zeros(i + 1)) for i in range(4)],
                        protocol=5)  # Pickled under imitation's name, as the benchmark files are.
  found = _stream(data)
  assert [len(t.acts) for t in found] == [1, 2, 3, 4]


def test_items_are_released_once_handed_out():
  data = [np.arange(10) for _ in range(5)]
  alive = []
  for item in pickle_stream.iter_list_items(lambda: io.BytesIO(pickle.dumps(data, protocol=5)),
                                            source='x'):
    alive.append(weakref.ref(item))
    del item
    gc.collect()
    assert sum(ref() is not None for ref in alive) == 0  # Nothing in the unpickler keeps it.


def test_foreign_global_is_refused_before_it_runs():
  payload = b'\x80\x04]\x94(\x8c\x02os\x94\x8c\x06system\x94\x93\x94\x8c\x04echo\x94\x85\x94R\x94e.'
  with pytest.raises(errors.UnsafePickleError, match='test.pkl.*os.system'):
    _stream(payload)


def test_truncated_and_listless_pickles():
  data = pickle.dumps([np.arange(5)] * 1, protocol=5)
  with pytest.raises(errors.CorruptFileError, match='test.pkl'):
    _stream(data[:-8])
  with pytest.raises(errors.SchemaError, match='expected a pickled list'):
    _stream(pickle.dumps({'a': 1}))


@pytest.mark.parametrize('protocol', [3, 4])  # BINPUT and MEMOIZE memo numbering.
def test_memory_holds_about_one_item(protocol):
  """Nothing of a handed-out item stays in the unpickler (its arrays, their bytes, memo entries)."""
  data = pickle.dumps([{'frames': [np.full(16384, i % 256, np.uint8) for _ in range(4)]}
                       for i in range(300)], protocol=protocol)  # 300 items of 64 KiB.
  tracemalloc.start()
  try:
    count = 0
    for item in pickle_stream.iter_list_items(lambda: io.BytesIO(data), source='x'):
      assert item['frames'][0][0] == count % 256
      count += 1
      del item
    _, peak = tracemalloc.get_traced_memory()
  finally:
    tracemalloc.stop()
  assert count == 300
  assert peak < 20 * 65536, peak  # Far below the 300 items' 19 MiB.


def test_object_shared_between_items_is_refused():
  shared = np.arange(100)
  data = pickle.dumps([{'a': shared}, {'a': shared}], protocol=4)
  with pytest.raises(errors.SchemaError, match='item 1 refers to an object of an earlier item'):
    _stream(data)


def test_byte_claims_past_the_bound_are_refused_in_the_first_pass():
  claim = b'\x80\x04](\x8e' + (1 << 40).to_bytes(8, 'little') + b'abce.'
  with pytest.raises(errors.CorruptFileError,
                     match='test.pkl: opcode 3 claims 1099511627776 bytes, more than the 99'):
    list(pickle_stream.iter_list_items(lambda: io.BytesIO(claim), source='test.pkl', max_bytes=99))


def test_an_item_holding_an_array_without_its_data_is_refused():
  """np.savez's object array awaits its BUILD while its items are handed out; an item may not."""
  empty = (b'cnumpy.core.multiarray\n_reconstruct\ncnumpy\nndarray\nK\x00\x85C\x01b\x87R')
  with pytest.raises(errors.UnsafePickleError, match='test.pkl: item 0 holds an array or dtype '
                                                     'made without its data'):
    _stream(b'\x80\x02](' + empty + b'K\x01e.')


def _arrays_of_every_kind() -> list:
  """Arrays numpy pickles with the opcodes the first pass steps over at once, and neighbours."""
  arrays = [(np.arange(6) % 2).astype(dtype).reshape(shape)
            for dtype in ('u1', '<f4', '>i8', 'c8', '?')
            for shape in ((6,), (2, 3), (1, 2, 3), (1, 1, 2, 3))]
  arrays += [np.array(5), np.zeros((0,)), np.zeros((300, 2)), np.arange(6).reshape(2, 3).T,
             np.asfortranarray(np.ones((2, 3))), np.array(['ab', 'c']),
             np.array([np.datetime64('2020-01-01')]), np.array([{'x': 1}, None], dtype=object)]
  return arrays


@pytest.mark.parametrize('protocol', [2, 3, 4, 5])
@pytest.mark.parametrize('memo', [True, False])
def test_array_shortcut_finds_the_same_item_ends_as_the_opcode_walk(protocol, memo):
  """The first pass steps over each numpy array's opcodes at once; item ends (opcode indices)
  must equal those of the opcode-by-opcode walk, and the items those of pickle.load."""
  data = [[a, {'a': a, 'b': [a, a]}] for a in _arrays_of_every_kind()] + _arrays_of_every_kind()
  buffer = io.BytesIO()
  pickler = pickle.Pickler(buffer, protocol=protocol)
  pickler.fast = not memo
  pickler.dump(data)
  stream = buffer.getvalue()
  ends = pickle_stream._item_ends(io.BytesIO(stream), 'x', None)  # pylint: disable=protected-access
  with mock.patch.object(pickle_stream, '_ARRAY', re.compile(b'(?!)')):
    assert pickle_stream._item_ends(io.BytesIO(stream), 'x', None) == ends  # pylint: disable=protected-access
  found = _stream(stream)
  assert len(found) == len(data)
  for got, want in zip(found, pickle.loads(stream)):
    got, want = (got, want) if isinstance(want, list) else ([got], [want])
    np.testing.assert_array_equal(got[0], want[0])
    assert got[0].dtype == want[0].dtype and got[0].flags.f_contiguous == want[0].flags.f_contiguous


def _array_item_list(protocol: int = 3, memo: bool = False) -> bytes:
  buffer = io.BytesIO()
  pickler = pickle.Pickler(buffer, protocol=protocol)
  pickler.fast = not memo
  pickler.dump([np.full((2, 2), 7, np.uint8), np.full((2, 2), 8, np.uint8)])
  return buffer.getvalue()


def test_array_shortcut_vouches_for_nothing_it_steps_over():
  """The first pass steps over an array's opcodes by their shape alone; the second pass still
  checks each: a foreign global in `_reconstruct`'s place, a dtype fetched from the memo that is
  not a dtype, a data length past the bound."""
  data = _array_item_list()
  reconstruct = data[data.index(b'cnumpy'):data.index(b'\n_reconstruct\n') + 14]
  evil = data.replace(reconstruct, b'cos\nsystem\n', 1)
  assert pickle_stream._ARRAY.match(evil, evil.index(b'cos\n'))  # pylint: disable=protected-access
  with pytest.raises(errors.UnsafePickleError, match='test.pkl: refusing to load global os.system'):
    _stream(evil)
  memoized = _array_item_list(memo=True)
  ops = list(pickletools.genops(memoized))
  dtype_get = [pos for (op, _, pos), (after, _, _) in zip(ops, ops[1:])
               if op.name == 'BINGET' and after.name == 'NEWFALSE']
  assert len(dtype_get) == 1  # The second array fetches the first one's dtype.
  at = dtype_get[0]
  not_a_dtype = memoized[:at] + b'h\x02' + memoized[at + 2:]  # Memo 2: numpy.ndarray.
  assert pickle_stream._ARRAY.match(not_a_dtype, not_a_dtype.rindex(b'h\x01', 0, at))  # pylint: disable=protected-access
  with pytest.raises(errors.UnsafePickleError, match='test.pkl: expected a numpy dtype'):
    _stream(not_a_dtype)
  claim = data.replace(b'C\x04\x07\x07\x07\x07', b'\x8e' + (1 << 40).to_bytes(8, 'little'), 1)
  with pytest.raises(errors.CorruptFileError, match='test.pkl: opcode .* claims 1099511627776 '
                                                    'bytes, more than the 1000'):
    list(pickle_stream.iter_list_items(lambda: io.BytesIO(claim), source='test.pkl',
                                       max_bytes=1000))
  with pytest.raises(errors.CorruptFileError, match='test.pkl'):  # No bound: truncated.
    _stream(claim)


def test_text_arguments_across_the_first_pass_reads():
  """Newline-ended arguments (protocol 0's UNICODE, GLOBAL) that cross the first pass's reads,
  one three reads long."""
  chunk = pickle_stream._SCAN_CHUNK  # pylint: disable=protected-access
  sizes = [chunk // 3 + i for i in range(12)] + [3 * chunk, 5]
  items = b''.join(b'V' + b'x' * size + b'\n' for size in sizes)
  stream = b'\x80\x02](' + items + b'cnumpy\ndtype\ne.'
  found = _stream(stream)
  assert found[:-1] == ['x' * size for size in sizes] and found[-1] is np.dtype
  assert found == pickle.loads(stream)
  with pytest.raises(errors.CorruptFileError, match='test.pkl'):
    _stream(stream[:len(stream) // 2])


class _CountingStream(io.BytesIO):
  """A stream that counts the bytes read from it."""
  read_bytes = 0

  def read(self, size=-1):
    data = super().read(size)
    _CountingStream.read_bytes += len(data)
    return data


def test_the_stream_is_opened_and_read_once():
  data = pickle.dumps([{'x': np.full(50_000, i, np.uint8)} for i in range(40)], protocol=3)
  opened = []

  def open_stream():
    opened.append(1)
    return _CountingStream(data)

  _CountingStream.read_bytes = 0
  found = list(pickle_stream.iter_list_items(open_stream, source='test.pkl'))
  assert [int(item['x'][0]) for item in found] == list(range(40))
  assert len(opened) == 1
  assert _CountingStream.read_bytes == len(data)  # Each byte once (a zip member inflates once).


@dataclasses.dataclass
class _Traj:
  obs: object = None
  acts: object = None


def _equal(got, want) -> bool:
  if isinstance(want, np.ndarray):
    return isinstance(got, np.ndarray) and got.dtype == want.dtype and np.array_equal(got, want)
  if isinstance(want, dict):
    return type(got) is dict and got.keys() == want.keys() and all(
        _equal(got[k], want[k]) for k in want)
  if isinstance(want, (list, tuple)):
    return type(got) is type(want) and len(got) == len(want) and all(
        _equal(g, w) for g, w in zip(got, want))
  if dataclasses.is_dataclass(want):
    return _equal(got.obs, want.obs) and _equal(got.acts, want.acts)
  return type(got) is type(want) and got == want


def _dump(data, protocol: int, memo: bool) -> bytes:
  buffer = io.BytesIO()
  pickler = pickle.Pickler(buffer, protocol=protocol)
  pickler.fast = not memo
  pickler.dump(data)
  return buffer.getvalue()


@pytest.mark.parametrize('protocol', [2, 3, 4, 5])
@pytest.mark.parametrize('memo', [True, False])
def test_items_of_every_shape_equal_pickle_loads(protocol, memo):
  """Items whose end shows only later (a one-key dict, a one-item list, an empty dict, a dict of
  1001 keys, a pair of finished values, objects with state, strings) come out as pickle.loads
  gives them, read in one pass."""
  module = types.ModuleType('imitation.data.types')
  cls = dataclasses.make_dataclass('TrajectoryWithRew', ['obs', 'acts'])
  cls.__module__, module.TrajectoryWithRew = module.__name__, cls
  parents = {name: types.ModuleType(name) for name in ('imitation', 'imitation.data')}
  arrays = [np.arange(i + 2, dtype=np.float32) for i in range(6)]  # Items share no object.
  data = [{'a': arrays[0]}, [arrays[1]], {}, {str(i): i for i in range(1001)},
          ({'x': 1, 'y': 2}, [1, 2]), 'text', cls(obs=arrays[2], acts=arrays[3]), arrays[4],
          list(range(1000)), [{'states': [arrays[5]] * 3, 'dones': (True,)}], 7,
          cls(obs=np.ones((2, 2)), acts=None)]
  with mock.patch.dict(sys.modules, {**parents, module.__name__: module}):
    stream = _dump(data, protocol, memo)
    want = pickle.loads(stream)
  found = _stream(stream)
  assert len(found) == len(want)
  for got, expected in zip(found, want):
    if dataclasses.is_dataclass(expected):
      assert type(got).__name__ == 'ImitationTrajectory'
    assert _equal(got, expected), (got, expected)
  assert pickle_stream._item_ends(io.BytesIO(stream), 'x', None) == _exact_ends(stream)  # pylint: disable=protected-access


def _exact_ends(stream: bytes) -> set[int]:
  """Item ends known only from the whole list (each APPENDS/APPEND of the first list)."""
  ends, levels, target = set(), [[]], None
  for index, (op, _, _) in enumerate(pickletools.genops(stream)):
    level = levels[-1]
    before = op.stack_before
    if op.name == 'MARK':
      levels.append([])
      continue
    if pickletools.markobject in before:
      closed = levels.pop()
      level = levels[-1]
      if op.name == 'APPENDS' and target == (len(levels) - 1, len(level) - 1):
        ends.update(closed)
      pops = before.index(pickletools.markobject)
    else:
      pops = len(before)
    if op.name == 'APPEND' and target == (len(levels) - 1, len(level) - 2):
      ends.add(level[-1])
    if op.name == 'EMPTY_LIST' and target is None:
      target = (len(levels) - 1, len(level))
    del level[len(level) - pops:]
    level.extend([index] * len(op.stack_after))
  return ends


def test_an_item_taken_apart_after_it_was_handed_out_is_refused():
  """A tuple of three finished values: the first was handed out before TUPLE3 took it."""
  stream = pickle.dumps([{'a': 1, 'b': 2}, ({'c': 3, 'd': 4}, [5, 6], {'e': 7, 'f': 8})],
                        protocol=3)
  with pytest.raises(errors.SchemaError, match='test.pkl: opcode .* takes apart an item'):
    _stream(stream)


def test_a_truncated_stream_names_the_file_wherever_it_ends():
  data = pickle.dumps([{'x': np.arange(3000), 'y': [np.ones(200)] * 3} for _ in range(3)],
                      protocol=4)
  for cut in range(7, len(data) - 1, 997):
    with pytest.raises(errors.CorruptFileError, match='test.pkl'):
      _stream(data[:cut])


def test_an_item_larger_than_max_bytes_is_refused():
  """Each opcode claims little, but the item held until it is complete does not fit."""
  data = pickle.dumps([{f'k{i}': np.full(5000, i % 256, np.uint8) for i in range(100)}
                       for _ in range(2)], protocol=3)  # Items of ~0.5 MB.
  found = list(pickle_stream.iter_list_items(lambda: io.BytesIO(data), source='test.pkl',
                                             max_bytes=len(data)))
  assert len(found) == 2
  with pytest.raises(errors.CorruptFileError, match='test.pkl: an item takes more than 200000'):
    list(pickle_stream.iter_list_items(lambda: io.BytesIO(data), source='test.pkl',
                                       max_bytes=200_000))


def test_items_waiting_for_their_batch_are_bounded_too():
  """Tuples end only at their batch's end, so their bytes wait: a stream of them holds no more
  than the bound, whatever it expands to."""
  data = pickle.dumps([(bytes(40), i) for i in range(900)], protocol=3)
  assert [item[1] for item in _stream(data)] == list(range(900))
  with mock.patch.object(pickle_stream, '_MAX_HELD', 20_000):
    with pytest.raises(errors.CorruptFileError, match='test.pkl: an item takes more than 20000'):
      _stream(data)
