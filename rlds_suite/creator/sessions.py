"""One play session per player connection: the environment steps on the server, in the session's
own worker thread (a slow environment stalls only its player), and frames go to the browser as
JPEG.

Protocol (JSON text from the page, each checked by `schemas.MESSAGES`; binary frames back):
  {"type": "hello", "token": T}             first message (the server's, see server._play)
  {"type": "start", "environment_id": N}   make the environment (or resume its session), start an
                                            episode; episodes wait, paused, for the first key
  {"type": "keys", "keys": [...], "axes": [...]}  keys held now, gamepad sticks (asynchronous)
  {"type": "step", "keys": [...]}          one step (synchronous environments: one per key press)
  {"type": "pause"} / {"type": "resume"}   ESC; paused past the timeout -> ABANDONED
  {"type": "speed", "fps": F}              frame rate of asynchronous environments (1-60)
  {"type": "cancel"}                       the player stops the episode: CANCELLED
  {"type": "verdict", "accept": bool}      after the episode ended: COMPLETED or REJECTED
  {"type": "new"}                          ENTER: a new episode of the same environment
  {"type": "ping"}                         answered {"type": "pong"}
Server messages: {"type": "ready", "keymap", "instructions", "resumed", ...}, {"type": "ended",
...} (the episode is on disk; the verdict is asked), {"type": "saved", "episode_id", "state"},
{"type": "error", "error"} as JSON; each step as one binary message: a 4-byte big-endian header
length, the JSON header (t, reward, return, action, keys, last, waiting, mime) and the frame's
image bytes (none for state-only environments, whose header carries the observation as text).

Durability: the steps of the episode in flight are appended to its spool file (`spool`) every
`spool_seconds`; an episode that ends goes to the recorder at once and the verdict is asked only
once its steps are durable (the verdict is then a state in the database). A lost connection parks
the session (paused) for `pause_timeout`: the same player reconnecting gets it back; otherwise
its episode is ABANDONED and recorded with its steps.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import json
import logging
import os
import struct
import threading
import time
import uuid
from typing import Any, Awaitable, Callable, Optional

import dm_env
from envlogger import step_data
import numpy as np

from rlds_suite import envs
from rlds_suite.core import errors
from rlds_suite.creator import frames as frames_lib
from rlds_suite.creator import keymaps
from rlds_suite.creator import recorder as recorder_lib
from rlds_suite.creator import schemas
from rlds_suite.creator import spool
from rlds_suite.creator import storage as storage_lib

_log = logging.getLogger(__name__)
ENDINGS = {'terminated': 'the game ended', 'truncated': 'time ran out',
           'cancelled': 'you stopped it'}
# Making, first rendering and closing environments share process-wide state (pygame's display
# module, lazily imported submodules): one session at a time does it.
_ENVIRONMENT_LOCK = threading.Lock()
_prepared = False


@dataclasses.dataclass
class Context:
  """What every session shares with the server."""
  db: storage_lib.Storage
  recorder: recorder_lib.Recorder
  data_dir: str
  pause_timeout: float = 300.0
  timings: Optional[list] = None  # (server seconds, environment seconds) per step, when given.
  spool_seconds: float = 1.0
  parked: dict = dataclasses.field(default_factory=dict)  # (study id, player id) -> PlaySession

  @property
  def spool_dir(self) -> str:
    return os.path.join(self.data_dir, 'spool')


class EnvironmentFailure(errors.RLDSSuiteError, RuntimeError):
  """The study's environment could not be made, reset or stepped."""


def prepare_rendering() -> None:
  """Imports and initialises what environments render with (pygame, for gymnasium's classic
  control), once, before sessions do it from several threads at once."""
  global _prepared
  with _ENVIRONMENT_LOCK:
    if _prepared:
      return
    if importlib.util.find_spec('pygame') is not None:
      with contextlib.redirect_stdout(None):
        import pygame  # pylint: disable=g-import-not-at-top
      for module in ('pygame.surfarray', 'pygame.gfxdraw'):
        importlib.import_module(module)
      pygame.display.init()
    _prepared = True


def dataset_directory(study: dict[str, Any], env_row: dict[str, Any]) -> str:
  """Where a study environment's episodes go, relative to the data directory. A changed spec,
  options or frame recording gives a new dataset (its features would differ)."""
  config = json.dumps([env_row['spec'], env_row['options'], study['record_frames']], sort_keys=True)
  digest = hashlib.sha1(config.encode()).hexdigest()[:8]
  return os.path.join('studies', str(study['id']), f'env{env_row["id"]}-{digest}')


def make_environment(env_row: dict[str, Any]) -> dm_env.Environment:
  """The study environment; state-only ones are made again rendering frames, to show something."""
  options = dict(env_row['options'])
  env = envs.make(env_row['spec'], **options)
  if frames_lib.display_path(env) is None and 'render_frames' not in options:
    env.close()
    env = envs.make(env_row['spec'], render_frames=True, **options)
  return env


def open_environment(env_row: dict[str, Any]) -> dm_env.Environment:
  """The environment, reset once and its first frame rendered (under the process-wide lock), or
  EnvironmentFailure saying why not."""
  prepare_rendering()
  with _ENVIRONMENT_LOCK:
    env = None
    try:
      env = make_environment(env_row)
      frames_lib.frame_of(env, env.reset(), frames_lib.display_path(env))
      return env
    except Exception as e:  # pylint: disable=broad-except
      if env is not None:
        with contextlib.suppress(Exception):
          env.close()
      raise EnvironmentFailure(f'{env_row["spec"]} could not be started: {_words(e)}',
                               field='environment') from e


def close_environment(env: dm_env.Environment) -> None:
  with _ENVIRONMENT_LOCK, contextlib.suppress(Exception):
    env.close()


def records_frame(study: dict[str, Any], display: Optional[str]) -> bool:
  """Whether episodes keep the frame shown as step metadata: only a rendered one (an image
  observation shown as it is would be stored twice)."""
  return bool(study['record_frames']) and display == envs.FRAME


def dataset_config(context: Context, study: dict[str, Any], env_row: dict[str, Any],
                   env: dm_env.Environment) -> recorder_lib.DatasetConfig:
  """The recorder's dataset of a study environment."""
  image_fields = tuple(f for f in envs.image_fields(env) if f != envs.FRAME)
  if records_frame(study, frames_lib.display_path(env)):
    image_fields += (recorder_lib.FRAME,)
  return recorder_lib.DatasetConfig(
      directory=os.path.join(context.data_dir, dataset_directory(study, env_row)),
      name=f'creator_study{study["id"]}_env{env_row["id"]}',
      observation_spec=env.observation_spec(), action_spec=env.action_spec(),
      reward_spec=env.reward_spec(), image_fields=image_fields,
      metadata={'study': {'id': study['id'], 'name': study['name']},
                'environment': {'id': env_row['id'], 'spec': env_row['spec'],
                                'options': env_row['options']}})


class _Episode:
  """The episode in flight: per timestep the action that led to it, the keys of the action taken
  at it, when it was shown and (when recorded) the frame shown."""

  def __init__(self, episode_id: str, record_frame: bool):
    self.id = episode_id
    self.record_frame = record_frame
    self.timesteps: list[dm_env.TimeStep] = []
    self.actions: list[Any] = []
    self.keys: list[str] = []
    self.times: list[float] = []
    self.frames: list[Optional[np.ndarray]] = []
    self.total = 0.0
    self.spooled = 0  # Timesteps appended to the spool file.

  @property
  def num_actions(self) -> int:
    return len(self.timesteps) - 1

  def ended(self) -> bool:
    return bool(self.timesteps) and self.timesteps[-1].last()

  def step(self, t: int) -> step_data.StepData:
    custom = {recorder_lib.KEYS: self.keys[t] if t < len(self.keys) else '',
              recorder_lib.WALL_TIME: np.float64(self.times[t])}
    if self.record_frame:
      custom[recorder_lib.FRAME] = self.frames[t]
    return step_data.StepData(self.timesteps[t], self.actions[t], custom)

  def played(self, player_id: int) -> recorder_lib.PlayedEpisode:
    return recorder_lib.PlayedEpisode(self.id, player_id,
                                      [self.step(t) for t in range(len(self.timesteps))])

  def spool_to(self, path: str) -> None:
    """Appends the timesteps not spooled yet (in the session's worker thread)."""
    start, stop = self.spooled, len(self.timesteps)
    if stop > start:
      previous = self.keys[start - 1] if 0 < start <= len(self.keys) else None
      spool.append(path, [self.step(t) for t in range(start, stop)], previous)
      self.spooled = stop


class PlaySession:
  """Drives one player's connection (see the module docstring); outlives it while parked."""

  def __init__(self, context: Context, study: dict[str, Any], player: dict[str, Any]):
    self._ctx, self._study, self._player = context, study, player
    self._send_bytes: Optional[Callable[[bytes], Awaitable[None]]] = None
    self._send_json: Optional[Callable[[Any], Awaitable[None]]] = None
    self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix='creator-env')
    self._env: Optional[dm_env.Environment] = None
    self._env_row: Optional[dict[str, Any]] = None
    self._keymap: Optional[keymaps.KeyMap] = None
    self._controls: Optional[keymaps.Controls] = None
    self._display: Optional[str] = None
    self._dataset: Optional[recorder_lib.DatasetConfig] = None
    self._episode: Optional[_Episode] = None
    self._awaiting: Optional[dict[str, Any]] = None  # The ended episode waiting for its verdict.
    self._last_message: Optional[bytes] = None  # The last step sent (to show it again).
    self._held: set[str] = set()
    self._tapped: set[str] = set()
    self._sticks: Optional[list[float]] = None
    self._fps = keymaps.DEFAULT_FPS
    self._waiting = False  # A new episode waits for the player's first key.
    self._paused_at: Optional[float] = None
    self._ticker: Optional[asyncio.Task] = None
    self._spool_timer: Optional[asyncio.TimerHandle] = None
    self._park_timer: Optional[asyncio.TimerHandle] = None
    self._lock = asyncio.Lock()  # One step at a time.
    self._closed = False

  @property
  def key(self) -> tuple[int, int]:
    return self._study['id'], self._player['id']

  def attach(self, send_bytes: Callable[[bytes], Awaitable[None]],
             send_json: Callable[[Any], Awaitable[None]]) -> None:
    """A connection drives this session (again)."""
    if self._park_timer is not None:
      self._park_timer.cancel()
      self._park_timer = None
    self._send_bytes, self._send_json = send_bytes, send_json

  async def disconnected(self) -> None:
    """The connection is gone: a session with an episode to come back to is parked (paused) for
    `pause_timeout`; otherwise, or after that, it closes."""
    self._send_bytes = self._send_json = None
    if self._closed or self._env is None or (self._episode is None and self._awaiting is None):
      await self.close()
      return
    if self._paused_at is None:
      self._paused_at = time.monotonic()
    previous = self._ctx.parked.get(self.key)
    self._ctx.parked[self.key] = self
    if previous is not None and previous is not self:
      await previous.close()
    self._park_timer = asyncio.get_running_loop().call_later(
        self._ctx.pause_timeout, lambda: asyncio.ensure_future(self._expire()))

  async def _expire(self) -> None:
    if self._ctx.parked.get(self.key) is self and self._send_json is None:
      del self._ctx.parked[self.key]
      await self.close()

  async def handle(self, raw: Any) -> None:
    message = schemas.message(raw)
    kind = message['type']
    if kind == 'start':
      await self._start(message['environment_id'])
    elif kind == 'keys':
      self._check_keys(message['keys'])
      keys = set(message['keys'])
      if keys or _moved(message.get('axes')):
        self._waiting = False
      self._tapped |= keys - self._held
      self._held, self._sticks = keys, message.get('axes')
    elif kind == 'step':
      self._check_keys(message['keys'])
      await self._step_keys(set(message['keys']), message.get('axes'), started=True)
    elif kind == 'pause':
      if self._paused_at is None:
        self._paused_at = time.monotonic()
    elif kind == 'resume':
      await self._check_pause_timeout()
      self._paused_at = None
      self._waiting = False
    elif kind == 'speed':
      self._fps = message['fps']
    elif kind == 'cancel':
      await self._finish(storage_lib.CANCELLED)
    elif kind == 'verdict':
      await self._verdict(message['accept'])
    elif kind == 'new':
      await self._new_episode()
    elif kind == 'ping':
      await self._send({'type': 'pong'})
    else:  # 'hello' a second time.
      raise errors.SchemaError('this connection has said hello already', field='type')

  async def close(self) -> None:
    """The end of the session: the episode in flight is ABANDONED (its steps recorded)."""
    if self._closed:
      return
    self._closed = True
    if self._ctx.parked.get(self.key) is self:
      del self._ctx.parked[self.key]
    for handle in (self._ticker, self._spool_timer, self._park_timer):
      if handle is not None:
        handle.cancel()
    await self._finish(storage_lib.ABANDONED, notify=False)
    if self._env is not None:
      env, self._env = self._env, None
      await self._run(close_environment, env)
    self._worker.shutdown(wait=False)

  # Internals.

  async def _send(self, message: dict[str, Any]) -> None:
    if self._send_json is not None:
      with contextlib.suppress(ConnectionError):
        await self._send_json(message)

  async def _send_step(self, data: bytes) -> None:
    self._last_message = data
    if self._send_bytes is not None:
      with contextlib.suppress(ConnectionError):
        await self._send_bytes(data)

  def _check_keys(self, keys: list[str]) -> None:
    unknown = sorted(set(keys) - set(keymaps.KEYS))
    if unknown:
      raise errors.SchemaError(f'unknown keys {unknown[:5]}; known: {", ".join(keymaps.KEYS)}',
                               field='keys')

  async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
    return await asyncio.get_running_loop().run_in_executor(self._worker, fn, *args)

  async def _db(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A database call, off the event loop (a commit may wait on the disk)."""
    return await asyncio.get_running_loop().run_in_executor(
        None, functools.partial(fn, *args, **kwargs))

  async def _start(self, environment_id: int) -> None:
    if not self._study['active']:
      raise PermissionError('this study is not running')
    if self._env is not None:
      if self._env_row['id'] == environment_id:
        await self._resume_connection()
        return
      await self._finish(storage_lib.ABANDONED)  # Another environment: this one's episode ends.
      if self._ticker is not None:
        self._ticker.cancel()
      env, self._env, self._awaiting = self._env, None, None
      await self._run(close_environment, env)
    env_row = await self._db(self._ctx.db.environment, self._study['id'], environment_id)
    env = await self._run(open_environment, env_row)
    self._env, self._env_row = env, env_row
    try:
      self._keymap = keymaps.for_environment(env_row['spec'], env, env_row['keymap'])
    except errors.SchemaError as e:
      await self._run(close_environment, env)
      self._env = None
      raise EnvironmentFailure(f'{env_row["spec"]} has no controls: {e.problem}',
                               field='keymap') from e
    self._controls = keymaps.Controls(self._keymap)
    self._fps = self._keymap.fps
    self._display = frames_lib.display_path(env)
    self._dataset = dataset_config(self._ctx, self._study, env_row, env)
    await self._send_ready(resumed=False)
    if not self._keymap.synchronous:
      self._ticker = asyncio.create_task(self._tick())
    # An episode of this player that ended before a restart still waits for its verdict.
    ended = await self._db(self._ctx.db.episodes, self._study['id'],
                           environment_id=environment_id, states=[storage_lib.ENDED],
                           player_ids=[self._player['id']])
    if ended:
      self._awaiting = ended[-1]
      await self._send_ended()
    else:
      await self._new_episode()

  async def _send_ready(self, resumed: bool) -> None:
    env_row = self._env_row
    await self._send({'type': 'ready', 'environment': env_row['name'], 'spec': env_row['spec'],
                      'environment_id': env_row['id'], 'instructions': env_row['instructions'],
                      'keymap': self._keymap.as_json(), 'controls': self._keymap.describe(),
                      'fps': self._fps, 'has_frames': self._display is not None,
                      'resumed': resumed})

  async def _resume_connection(self) -> None:
    """The same player's new connection: show where the episode is; it goes on at the first key."""
    self._paused_at, self._waiting = None, True
    await self._send_ready(resumed=True)
    if self._awaiting is not None:
      await self._send_ended()
    elif self._episode is not None and self._last_message is not None:
      await self._send_step(self._last_message)
    else:
      await self._new_episode()

  async def _new_episode(self) -> None:
    if self._env is None:
      raise errors.SchemaError('no environment started: send "start" first', field='type')
    if self._episode is not None or self._awaiting is not None:
      return  # ENTER during an episode, or before its verdict: ignored.
    episode = _Episode(uuid.uuid4().hex, records_frame(self._study, self._display))
    async with self._lock:
      try:
        timestep, frame, image = await self._run(self._reset)
      except Exception as e:  # pylint: disable=broad-except
        failure = e
      else:
        failure = None
    if failure is not None:
      await self._environment_failed(failure)
      return
    async with self._lock:
      await self._db(self._ctx.db.start_episode, episode.id, self._study['id'],
                     self._env_row['id'], self._player['id'],
                     os.path.relpath(self._dataset.directory, self._ctx.data_dir))
      self._episode = episode
      self._held, self._tapped, self._sticks = set(), set(), None
      self._controls = keymaps.Controls(self._keymap)
      self._paused_at, self._waiting = None, True
      await self._record_and_send(timestep, None, '', frame, image, time.perf_counter(), 0.0)

  # In the worker thread: the environment, its frame and the JPEG, off the event loop (a 400x600
  # frame takes milliseconds to encode, and every other player waits on the loop).

  def _reset(self) -> tuple[dm_env.TimeStep, Optional[np.ndarray], bytes]:
    timestep = self._env.reset()
    return (timestep, *self._frame(timestep))

  def _step(self, action: np.ndarray) -> tuple[dm_env.TimeStep, Optional[np.ndarray], bytes, float]:
    start = time.perf_counter()
    timestep = self._env.step(action)
    elapsed = time.perf_counter() - start
    return (timestep, *self._frame(timestep), elapsed)

  def _frame(self, timestep: dm_env.TimeStep) -> tuple[Optional[np.ndarray], bytes]:
    frame = frames_lib.frame_of(self._env, timestep, self._display)
    return frame, (b'' if frame is None else frames_lib.encode(frame))

  async def _step_keys(self, keys: set[str], sticks: Optional[list[float]] = None,
                       started: bool = False) -> None:
    received = time.perf_counter()
    if self._controls is None or self._paused_at is not None:
      return
    action, pressed = self._controls.action(keys, sticks, 1.0 / self._fps)
    if action is None:
      return
    async with self._lock:
      episode = self._episode
      if episode is None or episode.ended():
        return
      if started:
        self._waiting = False
      action = keymaps.as_action(action, self._dataset.action_spec)
      episode.keys.append(pressed)
      try:
        timestep, frame, image, env_seconds = await self._run(self._step, action)
      except Exception as e:  # pylint: disable=broad-except
        episode.keys.pop()
        failure = e
      else:
        failure = None
        await self._record_and_send(timestep, action, pressed, frame, image, received,
                                    env_seconds)
        if timestep.last():
          await self._ended(episode, timestep)
    if failure is not None:
      await self._environment_failed(failure)

  async def _ended(self, episode: _Episode, timestep: dm_env.TimeStep) -> None:
    """The episode ended: its steps go to disk, then the player is asked for the verdict."""
    self._episode = None
    await self._db(self._ctx.db.end_episode, episode.id, state=storage_lib.ENDED,
                   num_steps=episode.num_actions + 1, episode_return=episode.total,
                   ending=_ending(timestep))
    if await self._save(episode):
      self._awaiting = await self._db(self._ctx.db.episode, episode.id)
      await self._send_ended()

  async def _send_ended(self) -> None:
    row = self._awaiting
    await self._send({'type': 'ended', 'episode_id': row['id'], 'ending': row['ending'],
                      'ending_text': ENDINGS.get(row['ending'], row['ending']),
                      'return': row['episode_return'], 'steps': row['num_steps']})

  async def _save(self, episode: _Episode) -> bool:
    """Records the episode and waits until its steps are durable; False (and the player told)
    if they could not be written."""
    future = self._ctx.recorder.submit(self._dataset, episode.played(self._player['id']))
    try:
      await asyncio.wrap_future(future)
    except Exception as e:  # pylint: disable=broad-except
      await self._send({'type': 'error', 'error': f'the episode could not be saved: {_words(e)}'})
      return False
    finally:
      await self._run(_remove, spool.path(self._ctx.spool_dir, episode.id))
    return True

  async def _verdict(self, accept: bool) -> None:
    row = self._awaiting
    if row is None:
      raise errors.SchemaError('no ended episode is waiting for a verdict', field='verdict')
    state = storage_lib.COMPLETED if accept else storage_lib.REJECTED
    await self._db(self._ctx.db.give_verdict, row['id'], state)
    self._awaiting = None
    await self._send({'type': 'saved', 'episode_id': row['id'], 'state': state})

  async def _record_and_send(self, timestep: dm_env.TimeStep, action: Optional[np.ndarray],
                             pressed: str, frame: Optional[np.ndarray], image: bytes,
                             received: float, env_seconds: float) -> None:
    episode = self._episode
    episode.timesteps.append(timestep)
    episode.actions.append(action)
    episode.times.append(time.time())
    episode.frames.append(frame if episode.record_frame else None)
    reward = float(np.sum(timestep.reward)) if timestep.reward is not None else 0.0
    episode.total += reward
    header = {'t': episode.num_actions, 'reward': reward, 'return': episode.total,
              'action': None if action is None else action.tolist(), 'keys': pressed,
              'last': timestep.last(), 'paused': self._paused_at is not None,
              'waiting': self._waiting}
    if frame is None:
      header['observation'] = frames_lib.describe(timestep.observation)
    else:
      header['mime'] = frames_lib.JPEG
    encoded = json.dumps(header).encode()
    await self._send_step(struct.pack('>I', len(encoded)) + encoded + image)
    if self._ctx.timings is not None and action is not None:
      self._ctx.timings.append((time.perf_counter() - received - env_seconds, env_seconds))
    if self._spool_timer is None and not timestep.last():
      self._spool_timer = asyncio.get_running_loop().call_later(self._ctx.spool_seconds,
                                                                self._spool_due)

  def _spool_due(self) -> None:
    """Appends the episode's new steps to its spool file, in the worker thread (after the step
    in progress, never during one)."""
    self._spool_timer = None
    episode = self._episode
    if episode is None or self._closed:
      return
    path = spool.path(self._ctx.spool_dir, episode.id)
    future = asyncio.get_running_loop().run_in_executor(self._worker, episode.spool_to, path)
    future.add_done_callback(_log_failure)

  async def _tick(self) -> None:
    """Steps an asynchronous environment at the chosen frame rate with the keys held (or tapped
    since the last tick)."""
    deadline = time.monotonic()
    while self._env is not None:
      deadline += 1.0 / self._fps
      await asyncio.sleep(max(0.0, deadline - time.monotonic()))
      if self._paused_at is not None:
        await self._check_pause_timeout()
        deadline = time.monotonic()
        continue
      if self._episode is None or self._episode.ended() or self._waiting:
        deadline = time.monotonic()
        continue
      keys, self._tapped = self._held | self._tapped, set()
      await self._step_keys(keys, self._sticks)

  async def _check_pause_timeout(self) -> None:
    if (self._paused_at is not None and self._episode is not None and
        time.monotonic() - self._paused_at > self._ctx.pause_timeout):
      await self._finish(storage_lib.ABANDONED)
      await self._send({'type': 'abandoned', 'reason': 'paused past the timeout'})

  async def _environment_failed(self, error: Exception) -> None:
    """The environment raised: the episode so far is kept as ABANDONED, the environment closed,
    and the player told in words."""
    _log.warning('environment %s failed: %s', self._env_row['spec'], error, exc_info=error)
    await self._finish(storage_lib.ABANDONED, notify=False)
    if self._ticker is not None and self._ticker is not asyncio.current_task():
      self._ticker.cancel()
    env, self._env = self._env, None
    if env is not None:
      await self._run(close_environment, env)
    await self._send({'type': 'error', 'fatal': True,
                      'error': f'the environment {self._env_row["spec"]} failed: {_words(error)}. '
                               f'What was played is kept; reload the page to play again.'})

  async def _finish(self, outcome: str, notify: bool = True) -> None:
    """Ends the episode in flight with `outcome`: recorded if any action was taken."""
    async with self._lock:
      episode, self._episode = self._episode, None
    if episode is None:
      return
    ending = _ending(episode.timesteps[-1]) if episode.ended() else 'cancelled'
    if episode.num_actions < 1:
      await self._db(self._ctx.db.end_episode, episode.id, state=outcome,
                     num_steps=len(episode.timesteps), episode_return=0.0, ending=None)
      await self._run(_remove, spool.path(self._ctx.spool_dir, episode.id))
      return
    await self._db(self._ctx.db.end_episode, episode.id, state=storage_lib.SAVING, outcome=outcome,
                   num_steps=episode.num_actions + 1, episode_return=episode.total, ending=ending)
    if await self._save(episode) and notify:
      await self._send({'type': 'saved', 'episode_id': episode.id, 'state': outcome})


def _ending(timestep: dm_env.TimeStep) -> str:
  return 'terminated' if timestep.last() and timestep.discount == 0 else 'truncated'


def _moved(axes: Optional[list[float]]) -> bool:
  return bool(axes) and max(abs(a) for a in axes) > keymaps.STICK_DEADZONE


def _words(error: BaseException) -> str:
  """An exception as a sentence, without its class name (nor the field ours repeat)."""
  if isinstance(error, errors.RLDSSuiteError):
    return error.problem
  return str(error).strip() or 'failed without saying why'


def _remove(path: str) -> None:
  with contextlib.suppress(FileNotFoundError):
    os.remove(path)


def _log_failure(future: 'asyncio.Future') -> None:
  if not future.cancelled() and future.exception() is not None:
    _log.error('spooling steps failed: %s', future.exception())
