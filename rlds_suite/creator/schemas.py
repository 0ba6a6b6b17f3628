"""What every HTTP request body and WebSocket message of the creator may hold, checked before use.

Each schema is a dict of field -> checker; `check(data, schema, what)` returns the fields present
(with defaults where declared), refusing anything else with a SchemaError that says in words which
field is wrong and what was expected. Numbers are finite (NaN and infinity are refused), ids fit
the databases' 64-bit integers, lists are lists (a string is not a list of its letters).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Optional

from rlds_suite.core import errors

MAX_ID = 2 ** 63 - 1  # SQLite's and PostgreSQL's BIGINT.
Checker = Callable[[Any, str], Any]
_MISSING = object()


def _fail(field: str, expected: str, value: Any) -> errors.SchemaError:
  shown = repr(value) if isinstance(value, (str, int, float, bool)) or value is None else \
      f'a JSON {_json_type(value)}'
  return errors.SchemaError(f'expected {expected}, got {shown[:80]}', field=field)


def _json_type(value: Any) -> str:
  return {dict: 'object', list: 'array', str: 'string', bool: 'boolean', int: 'number',
          float: 'number', type(None): 'null'}.get(type(value), type(value).__name__)


def integer(low: int = 0, high: int = MAX_ID) -> Checker:
  def check(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
      raise _fail(field, f'a whole number from {low} to {high}', value)
    return value
  return check


def identifier() -> Checker:
  return integer(1, MAX_ID)


def number(low: float, high: float) -> Checker:
  def check(value: Any, field: str) -> float:
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or
        not math.isfinite(value) or not low <= value <= high):
      raise _fail(field, f'a number from {low:g} to {high:g}', value)
    return float(value)
  return check


def boolean(value: Any, field: str) -> bool:
  if not isinstance(value, bool):
    raise _fail(field, 'true or false', value)
  return value


def text(max_length: int = 10000) -> Checker:
  def check(value: Any, field: str) -> str:
    if not isinstance(value, str) or len(value) > max_length:
      raise _fail(field, f'a string of at most {max_length} characters', value)
    return value
  return check


def one_of(*choices: str) -> Checker:
  def check(value: Any, field: str) -> str:
    if value not in choices:
      raise _fail(field, 'one of ' + ', '.join(repr(c) for c in choices), value)
    return value
  return check


def list_of(item: Checker, max_items: int = 1000) -> Checker:
  def check(value: Any, field: str) -> list:
    if not isinstance(value, list) or len(value) > max_items:
      raise _fail(field, f'a list (at most {max_items} items)', value)
    return [item(v, f'{field}[{i}]') for i, v in enumerate(value)]
  return check


def pair(first: Checker, second: Checker) -> Checker:
  def check(value: Any, field: str) -> tuple:
    if not isinstance(value, list) or len(value) != 2:
      raise _fail(field, 'a pair [step, label]', value)
    return first(value[0], f'{field}[0]'), second(value[1], f'{field}[1]')
  return check


def json_object(value: Any, field: str) -> dict:
  if not isinstance(value, dict):
    raise _fail(field, 'a JSON object', value)
  return value


def optional(checker: Checker) -> Checker:
  def check(value: Any, field: str) -> Any:
    return None if value is None else checker(value, field)
  return check


def nested(schema: Mapping[str, Any], what: str) -> Checker:
  def check(value: Any, field: str) -> dict:
    return check_fields(value, schema, f'{field} ({what})')
  return check


def check_fields(data: Any, schema: Mapping[str, Any], what: str) -> dict[str, Any]:
  """`data` checked against `schema` {field: checker or (checker, default)}; unknown fields and
  wrong types are refused."""
  if not isinstance(data, dict):
    raise errors.SchemaError(f'expected a JSON object, got a JSON {_json_type(data)}', field=what)
  unknown = sorted(set(data) - set(schema))
  if unknown:
    raise errors.SchemaError(f'unknown fields {unknown[:5]}; known: {sorted(schema)}', field=what)
  out = {}
  for key, spec in schema.items():
    checker, default = spec if isinstance(spec, tuple) else (spec, _MISSING)
    if key in data:
      out[key] = checker(data[key], key)
    elif default is not _MISSING:
      out[key] = default
  return out


# HTTP bodies.
_NAME, _TEXT = text(100), text(20000)
ENVIRONMENT = {'id': optional(identifier()), 'name': optional(_NAME), 'spec': text(200),
               'options': optional(json_object), 'keymap': optional(json_object),
               'instructions': optional(_TEXT)}
STUDY = {'name': _NAME, 'description': _TEXT, 'instructions': _TEXT, 'record_frames': boolean,
         'active': boolean,
         'environments': list_of(nested(ENVIRONMENT, 'an environment'), max_items=50)}
ENROLL = {'join': text(200), 'name': (_NAME, 'player')}
ANNOTATE = {'add_tags': (list_of(_NAME), []), 'remove_tags': (list_of(_NAME), []),
            'notes': optional(_TEXT),
            'add_step_tags': (list_of(pair(integer(0, 10 ** 9), _NAME)), []),
            'remove_step_tags': (list_of(pair(integer(0, 10 ** 9), _NAME)), [])}
DOWNLOAD = {'study_id': identifier(), 'environment_id': optional(identifier()),
            'states': optional(list_of(text(16))), 'tags': optional(list_of(_NAME)),
            'player_ids': optional(list_of(identifier())), 'strip_metadata': (boolean, False),
            'end_tags': optional(list_of(_NAME)), 'step_tag_fields': (boolean, True),
            'format': (one_of('zip', 'directory'), 'zip')}
CHECK_ENVIRONMENT = {'spec': text(200), 'options': (json_object, {})}

# WebSocket messages, by type.
MIN_FPS, MAX_FPS = 1.0, 60.0
_KEYS = list_of(text(16), max_items=32)
_AXES = list_of(number(-1.0, 1.0), max_items=16)
MESSAGES = {
    'hello': {'token': text(200)},
    'start': {'environment_id': identifier()},
    'keys': {'keys': (_KEYS, []), 'axes': optional(_AXES)},
    'step': {'keys': (_KEYS, []), 'axes': optional(_AXES)},
    'pause': {}, 'resume': {}, 'cancel': {}, 'new': {}, 'ping': {},
    'speed': {'fps': number(MIN_FPS, MAX_FPS)},
    'verdict': {'accept': boolean},
}


def message(data: Any) -> dict[str, Any]:
  """A play message checked against its type's schema."""
  if not isinstance(data, dict):
    raise errors.SchemaError(f'expected a JSON object with a "type", got a JSON {_json_type(data)}',
                             field='message')
  kind = data.get('type')
  if kind not in MESSAGES:
    raise errors.SchemaError(f'unknown message type {str(kind)[:40]!r}; known: '
                             f'{", ".join(sorted(MESSAGES))}', field='type')
  body = {k: v for k, v in data.items() if k != 'type'}
  return {'type': kind, **check_fields(body, MESSAGES[kind], f'"{kind}" message')}


def route_id(value: str, what: str) -> int:
  """An id from a URL (digits by the route's pattern); one the database cannot hold names nothing."""
  number_ = int(value)
  if not 1 <= number_ <= MAX_ID:
    raise LookupError(f'no {what} {value[:30]}')
  return number_


def query_id(value: Optional[str], what: str) -> Optional[int]:
  if value is None:
    return None
  if not value.isdigit() or not 1 <= int(value) <= MAX_ID:
    raise errors.SchemaError(f'expected a {what} id (a whole number from 1 to {MAX_ID}), got '
                             f'{value[:30]!r}', field=what)
  return int(value)
