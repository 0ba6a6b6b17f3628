"""Which keys a person presses -> which action an environment takes.

Keys are canonical names sent by the page: 'up', 'down', 'left', 'right' (arrows or WASD), 'space'
(the main action), digits '0'-'9'. Atari takes its bindings from ALE's action meanings and procgen
from its button combos; a few gymnasium and dm_control environments have bindings written here; a study
environment may declare its own (`keymap` in its config), which wins.

Asynchronous environments step at `fps` with the held keys (`idle_action` when none is bound);
synchronous ones step once per key press and ignore presses that bind to nothing.

Continuous actions (dm_control, gymnasium's continuous tasks) have `axes`: each moves one action
dimension between its bounds. A held key ramps its axis towards the bound (full after
`ramp_seconds`), releasing it returns the axis to the idle value; a gamepad stick sets the axis
directly (the standard layout's axis numbers: 0 left stick x, 1 left stick y, 2/3 the right one).
Gamepad buttons (the browser's Gamepad API, standard layout) stand for keys: `gamepad` maps button
numbers to key names (by default A is SPACE, the d-pad the arrows, B/X/Y the digits 1-3); on
discrete environments the left stick is the arrows too.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Mapping, Optional, Sequence

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
DEFAULT_RAMP_SECONDS = 0.5
STICK = 'stick'  # Recorded among the keys when a gamepad stick moved a continuous axis.
# Standard-layout gamepad buttons -> keys.
DEFAULT_GAMEPAD = {0: 'space', 1: '1', 2: '2', 3: '3', 12: 'up', 13: 'down', 14: 'left', 15: 'right'}
STICK_DEADZONE = 0.15  # Stick values closer to 0 count as 0.


@dataclasses.dataclass(frozen=True)
class Axis:
  """One continuous action dimension: keys that push it down/up, the gamepad axis that sets it."""
  dim: int
  negative: str
  positive: str
  gamepad_axis: int


@dataclasses.dataclass(frozen=True)
class KeyMap:
  """Key combinations -> actions of one environment, and how it is paced."""
  bindings: tuple[tuple[frozenset[str], Any], ...]
  idle_action: Any = None  # Taken by asynchronous environments when no binding is held.
  synchronous: bool = False
  fps: float = DEFAULT_FPS
  axes: tuple[Axis, ...] = ()  # Continuous actions: bindings are empty, idle_action the rest value.
  low: Any = None  # Bounds of a continuous action.
  high: Any = None
  ramp_seconds: float = DEFAULT_RAMP_SECONDS
  gamepad: tuple[tuple[int, str], ...] = tuple(DEFAULT_GAMEPAD.items())

  def __post_init__(self):
    if not self.synchronous and self.idle_action is None:
      raise errors.SchemaError('an asynchronous key map needs an idle action', field='keymap')
    if self.axes and (self.low is None or self.high is None or self.synchronous):
      raise errors.SchemaError('continuous axes need the action bounds and asynchronous play',
                               field='keymap')
    if not 0 < self.fps <= 60 or not 0 < self.ramp_seconds <= 60:
      raise errors.SchemaError('fps must be in (0, 60] and ramp_seconds in (0, 60]', field='keymap')
    unknown = ({k for keys, _ in self.bindings for k in keys} | {k for _, k in self.gamepad} |
               {k for a in self.axes for k in (a.negative, a.positive)}) - set(KEYS)
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
    out = {'bindings': [[sorted(keys), _plain(action)] for keys, action in self.bindings],
           'idle_action': _plain(self.idle_action), 'synchronous': self.synchronous,
           'fps': self.fps, 'gamepad': {str(b): k for b, k in self.gamepad}}
    if self.axes:
      out.update(axes=[{'dim': a.dim, 'keys': [a.negative, a.positive],
                        'gamepad_axis': a.gamepad_axis} for a in self.axes],
                 ramp_seconds=self.ramp_seconds, low=_plain(self.low), high=_plain(self.high))
    return out

  def describe(self) -> list[str]:
    """The bindings in words, for the player's page."""
    if self.axes:
      return [f'{a.negative}/{a.positive} (or gamepad axis {a.gamepad_axis}): action dimension '
              f'{a.dim}' for a in self.axes]
    return [f'{"+".join(sorted(keys))}: action {_plain(action)}' for keys, action in self.bindings]


class Controls:
  """A player's input -> actions, for one key map; keeps the ramped values of continuous axes."""

  def __init__(self, keymap: KeyMap):
    self.keymap = keymap
    self._values = np.zeros(len(keymap.axes))

  def action(self, keys: Iterable[str], sticks: Optional[Sequence[float]] = None,
             seconds: float = 0.0) -> tuple[Optional[Any], str]:
    """The action for the keys held (and gamepad sticks) over the last `seconds`, and the keys
    it stands for ('left+space'; 'stick' when a stick moved an axis)."""
    keys = frozenset(keys) & frozenset(KEYS)
    if not self.keymap.axes:
      return self.keymap.action(keys), '+'.join(sorted(keys))
    used = set()
    step = seconds / self.keymap.ramp_seconds
    for i, axis in enumerate(self.keymap.axes):
      stick = (sticks[axis.gamepad_axis] if sticks is not None and
               axis.gamepad_axis < len(sticks) else 0.0)
      direction = (axis.positive in keys) - (axis.negative in keys)
      if abs(stick) > STICK_DEADZONE:
        # The standard layout's y axes point down; up on the stick is up on the axis.
        self._values[i] = -stick if axis.gamepad_axis % 2 else stick
        used.add(STICK)
      elif direction:
        value = self._values[i] if self._values[i] * direction >= 0 else 0.0
        self._values[i] = float(np.clip(value + direction * step, -1.0, 1.0))
        used.add(axis.positive if direction > 0 else axis.negative)
      else:
        self._values[i] = 0.0
    return self._continuous(), '+'.join(sorted(used))

  def _continuous(self) -> np.ndarray:
    idle = np.asarray(self.keymap.idle_action, np.float64)
    low, high = np.asarray(self.keymap.low, np.float64), np.asarray(self.keymap.high, np.float64)
    action = idle.copy()
    for value, axis in zip(self._values, self.keymap.axes):
      bound = high if value > 0 else low
      action.flat[axis.dim] = idle.flat[axis.dim] + abs(value) * (bound.flat[axis.dim] -
                                                                  idle.flat[axis.dim])
    return action


def from_json(data: Mapping[str, Any], action_spec: Any = None) -> KeyMap:
  """A KeyMap from its JSON form: {"bindings": [[["left"], 0], ...], "idle_action": 1,
  "synchronous": false, "fps": 15, "gamepad": {"0": "space"}}, or for continuous actions
  {"axes": [{"dim": 0, "keys": ["left", "right"], "gamepad_axis": 0}], "ramp_seconds": 0.5}
  (bounds and idle action from `action_spec`)."""
  try:
    gamepad = tuple((int(b), str(k)) for b, k in data.get('gamepad', DEFAULT_GAMEPAD).items())
    fps = float(data.get('fps', DEFAULT_FPS))
    if 'axes' in data:
      axes = tuple(Axis(int(a['dim']), str(a['keys'][0]), str(a['keys'][1]),
                        int(a.get('gamepad_axis', a['dim']))) for a in data['axes'])
      base = _continuous(action_spec)
      if any(not 0 <= a.dim < np.size(base.idle_action) for a in axes):
        raise ValueError('an axis "dim" is outside the action')
      return dataclasses.replace(base, axes=axes, fps=fps, gamepad=gamepad, ramp_seconds=float(
          data.get('ramp_seconds', DEFAULT_RAMP_SECONDS)))
    bindings = tuple((frozenset(keys), action) for keys, action in data['bindings'])
    return KeyMap(bindings, data.get('idle_action'), bool(data.get('synchronous', False)), fps,
                  gamepad=gamepad)
  except errors.SchemaError:
    raise
  except (KeyError, TypeError, ValueError, IndexError, AttributeError) as e:
    raise errors.SchemaError(f'expected {{"bindings": [[keys, action], ...], ...}} or {{"axes": '
                             f'[{{"dim", "keys", "gamepad_axis"}}, ...]}} ({e})',
                             field='keymap') from e


def for_environment(spec: str, env: dm_env.Environment,
                    declared: Optional[Mapping[str, Any]] = None) -> KeyMap:
  """The key map of `env` made from `spec` ('atari:Breakout'); `declared` (JSON form) wins."""
  if declared:
    return from_json(declared, env.action_spec() if 'axes' in declared else None)
  family, _, name = spec.partition(':')
  spec_ = env.action_spec() if env is not None else None
  if isinstance(spec_, dm_env.specs.BoundedArray) and spec_.dtype.kind == 'f' and spec_.shape:
    return _continuous(spec_)  # dm_control, MuJoCo, LunarLander(continuous=True), Pendulum...
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


def _continuous(spec: Any) -> KeyMap:
  """LEFT/RIGHT ramp the first action dimension, DOWN/UP the second (gamepad: the left stick),
  the right stick the third and fourth; the idle action is zero (clipped into the bounds)."""
  if not (isinstance(spec, dm_env.specs.BoundedArray) and spec.dtype.kind == 'f' and spec.shape):
    raise errors.SchemaError(f'continuous axes need a bounded float action, not {spec}',
                             field='keymap')
  low = np.broadcast_to(spec.minimum, spec.shape).astype(np.float64)
  high = np.broadcast_to(spec.maximum, spec.shape).astype(np.float64)
  idle = np.clip(np.zeros(spec.shape), low, high)
  keys = (('left', 'right'), ('down', 'up'), ('4', '6'), ('2', '8'))
  axes = tuple(Axis(dim, negative, positive, dim)
               for dim, (negative, positive) in enumerate(keys[:idle.size]))
  return KeyMap((), idle.tolist(), axes=axes, low=low.tolist(), high=high.tolist())


def _plain(action: Any) -> Any:
  return np.asarray(action).tolist() if action is not None else None


def as_action(action: Any, spec: Any) -> np.ndarray:
  """A key map's action as the environment's action array."""
  return np.asarray(action, dtype=spec.dtype).reshape(spec.shape)


__all__ = ['KEYS', 'KeyMap', 'Axis', 'Controls', 'for_environment', 'from_json', 'as_action']
