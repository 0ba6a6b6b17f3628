"""Which keys a person presses -> which action an environment takes.

Keys are canonical names sent by the page: 'up', 'down', 'left', 'right' (arrows or WASD), 'space'
(the main action), digits '0'-'9'. Atari takes its bindings from ALE's action meanings and procgen
from its button combos; a few gymnasium and dm_control environments have bindings written here; a study
environment may declare its own (`keymap` in its config), which wins.

Asynchronous environments step at `fps` with the held keys (`idle_action` when none is bound);
synchronous ones step once per key press and ignore presses that bind to nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Optional

import dm_env
import numpy as np

from rlds_suite.core import errors

KEYS = ('up', 'down', 'left', 'right', 'space') + tuple(str(d) for d in range(10))
# ALE action meanings are concatenations of these tokens ('UPRIGHTFIRE').
_ALE_TOKENS = {'UP': 'up', 'DOWN': 'down', 'LEFT': 'left', 'RIGHT': 'right', 'FIRE': 'space'}
# procgen's buttons (procgen/env.py `get_combos`, the same for every game). Its A/W/S/Q/E buttons go
# to digits here, so that WASD can move as everywhere else; D, the main action, is SPACE.
_PROCGEN_COMBOS = (('LEFT', 'DOWN'), ('LEFT',), ('LEFT', 'UP'), ('DOWN',), (), ('UP',),
                   ('RIGHT', 'DOWN'), ('RIGHT',), ('RIGHT', 'UP'), ('D',), ('A',), ('W',), ('S',),
                   ('Q',), ('E',))
_PROCGEN_BUTTONS = {'LEFT': 'left', 'RIGHT': 'right', 'UP': 'up', 'DOWN': 'down', 'D': 'space',
                    'A': '1', 'W': '2', 'S': '3', 'Q': '4', 'E': '5'}
# gymnasium classic-control and box2d ids -> (bindings, idle action, synchronous).
_GYMNASIUM = {
    # CartPole has no "do nothing": it steps once per LEFT/RIGHT press.
    'CartPole': ({('left',): 0, ('right',): 1}, None, True),
    'MountainCar': ({('left',): 0, ('right',): 2}, 1, False),
    'Acrobot': ({('left',): 0, ('right',): 2}, 1, False),
    # Main engine up; the side engines push the lander away from their side.
    'LunarLander': ({('up',): 2, ('left',): 3, ('right',): 1}, 0, False),
}
DEFAULT_FPS = 15.0


@dataclasses.dataclass(frozen=True)
class KeyMap:
  """Key combinations -> actions of one environment, and how it is paced."""
  bindings: tuple[tuple[frozenset[str], Any], ...]
  idle_action: Any = None  # Taken by asynchronous environments when no binding is held.
  synchronous: bool = False
  fps: float = DEFAULT_FPS

  def __post_init__(self):
    if not self.synchronous and self.idle_action is None:
      raise errors.SchemaError('an asynchronous key map needs an idle action', field='keymap')
    unknown = {k for keys, _ in self.bindings for k in keys} - set(KEYS)
    if unknown:
      raise errors.SchemaError(f'unknown keys {sorted(unknown)}; known: {list(KEYS)}',
                               field='keymap')

  def action(self, keys: Iterable[str]) -> Optional[Any]:
    """The action of the largest bound combination among `keys`; the idle action (None when
    synchronous) if none is held."""
    held = frozenset(keys)
    best, best_size = self.idle_action, 0
    for combo, action in self.bindings:
      if combo <= held and len(combo) > best_size:
        best, best_size = action, len(combo)
    return best

  def as_json(self) -> dict[str, Any]:
    return {'bindings': [[sorted(keys), _plain(action)] for keys, action in self.bindings],
            'idle_action': _plain(self.idle_action), 'synchronous': self.synchronous,
            'fps': self.fps}


def from_json(data: Mapping[str, Any]) -> KeyMap:
  """A KeyMap from its JSON form: {"bindings": [[["left"], 0], ...], "idle_action": 1,
  "synchronous": false, "fps": 15}."""
  try:
    bindings = tuple((frozenset(keys), action) for keys, action in data['bindings'])
    return KeyMap(bindings, data.get('idle_action'), bool(data.get('synchronous', False)),
                  float(data.get('fps', DEFAULT_FPS)))
  except (KeyError, TypeError, ValueError) as e:
    raise errors.SchemaError(f'expected {{"bindings": [[keys, action], ...], ...}}: {e!r}',
                             field='keymap') from e


def for_environment(spec: str, env: dm_env.Environment,
                    declared: Optional[Mapping[str, Any]] = None) -> KeyMap:
  """The key map of `env` made from `spec` ('atari:Breakout'); `declared` (JSON form) wins."""
  if declared:
    return from_json(declared)
  family, _, name = spec.partition(':')
  if family == 'atari':
    meanings = env.environment.unwrapped.get_action_meanings()
    return KeyMap(tuple((_ale_keys(m), i) for i, m in enumerate(meanings) if m != 'NOOP'),
                  meanings.index('NOOP'))
  if family == 'procgen':
    bindings = tuple((frozenset(_PROCGEN_BUTTONS[b] for b in combo), i)
                     for i, combo in enumerate(_PROCGEN_COMBOS) if combo)
    return KeyMap(bindings, _PROCGEN_COMBOS.index(()))
  if family == 'gymnasium' and name.split('-')[0] in _GYMNASIUM:
    table, idle, synchronous = _GYMNASIUM[name.split('-')[0]]
    return KeyMap(tuple((frozenset(k), a) for k, a in table.items()), idle, synchronous)
  spec_ = env.action_spec()
  if isinstance(spec_, dm_env.specs.BoundedArray) and spec_.dtype.kind == 'f' and spec_.shape:
    return _continuous(spec_)
  if isinstance(spec_, dm_env.specs.DiscreteArray) and spec_.num_values <= 10:
    return KeyMap(tuple((frozenset({str(i)}), i) for i in range(spec_.num_values)),
                  synchronous=True)
  raise errors.SchemaError(f'no key mapping for {spec!r} (action spec {spec_}); declare one as '
                           f'"keymap" in the environment config', field='keymap')


def _ale_keys(meaning: str) -> frozenset[str]:
  keys, rest = set(), meaning
  while rest:
    token = next((t for t in _ALE_TOKENS if rest.startswith(t)), None)
    if token is None:
      raise errors.SchemaError(f'unknown ALE action meaning {meaning!r}', field='keymap')
    keys.add(_ALE_TOKENS[token])
    rest = rest[len(token):]
  return frozenset(keys)


def _continuous(spec: dm_env.specs.BoundedArray) -> KeyMap:
  """LEFT/RIGHT push the first action dimension to its bounds, UP/DOWN the second (dm_control)."""
  low = np.broadcast_to(spec.minimum, spec.shape).astype(spec.dtype)
  high = np.broadcast_to(spec.maximum, spec.shape).astype(spec.dtype)
  idle = np.clip(np.zeros(spec.shape, spec.dtype), low, high)
  bindings = []
  for dim, (negative, positive) in enumerate((('left', 'right'), ('down', 'up'))[:spec.shape[-1]]):
    for key, bound in ((negative, low), (positive, high)):
      action = idle.copy()
      action.flat[dim] = bound.flat[dim]
      bindings.append((frozenset({key}), action.tolist()))
  return KeyMap(tuple(bindings), idle.tolist())


def _plain(action: Any) -> Any:
  return np.asarray(action).tolist() if action is not None else None


def as_action(action: Any, spec: Any) -> np.ndarray:
  """A key map's action as the environment's action array."""
  return np.asarray(action, dtype=spec.dtype).reshape(spec.shape)


__all__ = ['KEYS', 'KeyMap', 'for_environment', 'from_json', 'as_action']
