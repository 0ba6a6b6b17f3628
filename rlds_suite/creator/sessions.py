"""One play session per WebSocket connection: the environment steps on the server, in the
session's own worker thread (a slow environment stalls only its player), and frames go to the
browser as JPEG.

Protocol (JSON text from the page, binary frames back):
  {"type": "start", "environment_id": N}   make the environment, start an episode
  {"type": "keys", "keys": [...]}          keys held now (asynchronous environments)
  {"type": "step", "keys": [...]}          one step (synchronous environments: one per key press)
  {"type": "pause"} / {"type": "resume"}   ESC; paused past the timeout -> ABANDONED
  {"type": "speed", "fps": F}              frame rate of asynchronous environments
  {"type": "cancel"}                       the player stops the episode: CANCELLED
  {"type": "verdict", "accept": bool}      after the episode ended: COMPLETED or REJECTED
  {"type": "new"}                          ENTER: a new episode of the same environment
Server messages: {"type": "ready", "keymap", "instructions", ...} and {"type": "ended", ...} as
JSON; each step as one binary message: a 4-byte big-endian header length, the JSON header
(t, reward, return, action, keys, last, mime) and the frame's image bytes (none for state-only
environments, whose header carries the observation as text).

An episode's steps stay in memory until it ends; then it goes to the recorder (SAVING), which marks
it with its outcome once its steps are durable. A lost connection abandons the episode in flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import functools
import hashlib
import json
import os
import struct
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
from rlds_suite.creator import storage as storage_lib

MIN_FPS, MAX_FPS = 1.0, 60.0


@dataclasses.dataclass
class Context:
  """What every session shares with the server."""
  db: storage_lib.Storage
  recorder: recorder_lib.Recorder
  data_dir: str
  pause_timeout: float = 300.0
  timings: Optional[list] = None  # (server seconds, environment seconds) per step, when given.


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


class _Episode:
  """The episode in flight: per timestep the action that led to it, the keys of the action taken
  at it, when it was shown and (when recorded) the frame shown."""

  def __init__(self, episode_id: str):
    self.id = episode_id
    self.timesteps: list[dm_env.TimeStep] = []
    self.actions: list[Any] = []
    self.keys: list[str] = []
    self.times: list[float] = []
    self.frames: list[Optional[np.ndarray]] = []
    self.total = 0.0

  @property
  def num_actions(self) -> int:
    return len(self.timesteps) - 1

  def ended(self) -> bool:
    return bool(self.timesteps) and self.timesteps[-1].last()

  def played(self, player_id: int, record_frames: bool) -> recorder_lib.PlayedEpisode:
    steps = []
    for t, timestep in enumerate(self.timesteps):
      custom = {recorder_lib.KEYS: self.keys[t] if t < len(self.keys) else '',
                recorder_lib.WALL_TIME: np.float64(self.times[t])}
      if record_frames:
        custom[recorder_lib.FRAME] = self.frames[t]
      steps.append(step_data.StepData(timestep, self.actions[t], custom))
    return recorder_lib.PlayedEpisode(self.id, player_id, steps)


class PlaySession:
  """Drives one player's connection (see the module docstring)."""

  def __init__(self, context: Context, study: dict[str, Any], player: dict[str, Any],
               send_bytes: Callable[[bytes], Awaitable[None]],
               send_json: Callable[[Any], Awaitable[None]]):
    self._ctx, self._study, self._player = context, study, player
    self._send_bytes, self._send_json = send_bytes, send_json
    self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix='creator-env')
    self._env: Optional[dm_env.Environment] = None
    self._env_row: Optional[dict[str, Any]] = None
    self._keymap: Optional[keymaps.KeyMap] = None
    self._display: Optional[str] = None
    self._dataset: Optional[recorder_lib.DatasetConfig] = None
    self._episode: Optional[_Episode] = None
    self._held: set[str] = set()
    self._tapped: set[str] = set()
    self._fps = keymaps.DEFAULT_FPS
    self._paused_at: Optional[float] = None
    self._ticker: Optional[asyncio.Task] = None
    self._lock = asyncio.Lock()  # One step at a time.
    self._record_frames = bool(study['record_frames'])

  async def handle(self, message: dict[str, Any]) -> None:
    kind = message.get('type')
    if kind == 'start':
      await self._start(int(message['environment_id']))
    elif kind == 'keys':
      keys = set(message.get('keys') or ())
      self._tapped |= keys - self._held
      self._held = keys
    elif kind == 'step':
      await self._step_keys(set(message.get('keys') or ()))
    elif kind == 'pause':
      if self._paused_at is None:
        self._paused_at = time.monotonic()
    elif kind == 'resume':
      await self._check_pause_timeout()
      self._paused_at = None
    elif kind == 'speed':
      self._fps = float(np.clip(float(message['fps']), MIN_FPS, MAX_FPS))
    elif kind == 'cancel':
      await self._finish(storage_lib.CANCELLED)
    elif kind == 'verdict':
      if self._episode is not None and self._episode.ended():
        await self._finish(storage_lib.COMPLETED if message.get('accept') else storage_lib.REJECTED)
    elif kind == 'new':
      await self._new_episode()
    else:
      raise errors.SchemaError(f'unknown message type {kind!r}', field='type')

  async def close(self) -> None:
    """The connection is gone: the episode in flight is ABANDONED (its steps still recorded)."""
    if self._ticker is not None:
      self._ticker.cancel()
    await self._finish(storage_lib.ABANDONED, notify=False)
    if self._env is not None:
      await self._run(self._env.close)
    self._worker.shutdown(wait=False)

  # Internals.

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
      raise errors.SchemaError('this session already plays an environment', field='type')
    env_row = await self._db(self._ctx.db.environment, self._study['id'], environment_id)
    self._env = env = await self._run(make_environment, env_row)
    self._env_row = env_row
    self._keymap = keymaps.for_environment(env_row['spec'], env, env_row['keymap'])
    self._fps = self._keymap.fps
    self._display = frames_lib.display_path(env)
    image_fields = tuple(f for f in envs.image_fields(env) if f != envs.FRAME)
    if self._record_frames and self._display is not None:
      image_fields += (recorder_lib.FRAME,)
    directory = dataset_directory(self._study, env_row)
    self._dataset = recorder_lib.DatasetConfig(
        directory=os.path.join(self._ctx.data_dir, directory),
        name=f'creator_study{self._study["id"]}_env{env_row["id"]}',
        observation_spec=env.observation_spec(), action_spec=env.action_spec(),
        reward_spec=env.reward_spec(), image_fields=image_fields,
        metadata={'study': {'id': self._study['id'], 'name': self._study['name']},
                  'environment': {'id': env_row['id'], 'spec': env_row['spec'],
                                  'options': env_row['options']}})
    await self._send_json({'type': 'ready', 'environment': env_row['name'],
                           'spec': env_row['spec'],
                           'instructions': env_row['instructions'],
                           'keymap': self._keymap.as_json(), 'fps': self._fps,
                           'has_frames': self._display is not None})
    await self._new_episode()
    if not self._keymap.synchronous:
      self._ticker = asyncio.create_task(self._tick())

  async def _new_episode(self) -> None:
    if self._env is None:
      raise errors.SchemaError('no environment started', field='type')
    if self._episode is not None:
      return  # ENTER during an episode, or before its verdict: ignored.
    episode = _Episode(uuid.uuid4().hex)
    await self._db(self._ctx.db.start_episode, episode.id, self._study['id'], self._env_row['id'],
                   self._player['id'], os.path.relpath(self._dataset.directory, self._ctx.data_dir))
    async with self._lock:
      timestep, frame, image = await self._run(self._reset)
      self._episode = episode
      self._held, self._tapped = set(), set()
      self._paused_at = None
      await self._record_and_send(timestep, None, frame, image, time.perf_counter(), 0.0)

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

  async def _step_keys(self, keys: set[str]) -> None:
    received = time.perf_counter()
    action = self._keymap.action(keys) if self._keymap is not None else None
    if action is None or self._paused_at is not None:
      return
    async with self._lock:
      episode = self._episode
      if episode is None or episode.ended():
        return
      action = keymaps.as_action(action, self._dataset.action_spec)
      episode.keys.append('+'.join(sorted(keys & set(keymaps.KEYS))))
      timestep, frame, image, env_seconds = await self._run(self._step, action)
      await self._record_and_send(timestep, action, frame, image, received, env_seconds)
      if timestep.last():
        await self._db(self._ctx.db.end_episode, episode.id, state=storage_lib.ENDED,
                       num_steps=episode.num_actions + 1, episode_return=episode.total,
                       ending=_ending(timestep))
        await self._send_json({'type': 'ended', 'episode_id': episode.id,
                               'ending': _ending(timestep), 'return': episode.total,
                               'steps': episode.num_actions + 1})

  async def _record_and_send(self, timestep: dm_env.TimeStep, action: Optional[np.ndarray],
                             frame: Optional[np.ndarray], image: bytes, received: float,
                             env_seconds: float) -> None:
    episode = self._episode
    episode.timesteps.append(timestep)
    episode.actions.append(action)
    episode.times.append(time.time())
    episode.frames.append(frame if self._record_frames else None)
    reward = float(np.sum(timestep.reward)) if timestep.reward is not None else 0.0
    episode.total += reward
    header = {'t': episode.num_actions, 'reward': reward, 'return': episode.total,
              'action': None if action is None else action.tolist(),
              'keys': episode.keys[-1] if action is not None else '', 'last': timestep.last(),
              'paused': self._paused_at is not None}
    if frame is None:
      header['observation'] = frames_lib.describe(timestep.observation)
    else:
      header['mime'] = frames_lib.JPEG
    encoded = json.dumps(header).encode()
    await self._send_bytes(struct.pack('>I', len(encoded)) + encoded + image)
    if self._ctx.timings is not None and action is not None:
      self._ctx.timings.append((time.perf_counter() - received - env_seconds, env_seconds))

  async def _tick(self) -> None:
    """Steps an asynchronous environment at the chosen frame rate with the keys held (or tapped
    since the last tick)."""
    deadline = time.monotonic()
    while True:
      deadline += 1.0 / self._fps
      await asyncio.sleep(max(0.0, deadline - time.monotonic()))
      if self._paused_at is not None:
        await self._check_pause_timeout()
        deadline = time.monotonic()
        continue
      if self._episode is None or self._episode.ended():
        deadline = time.monotonic()
        continue
      keys, self._tapped = self._held | self._tapped, set()
      try:
        await self._step_keys(keys)
      except (errors.RLDSSuiteError, ValueError, TypeError, RuntimeError) as e:
        # The environment failed: say so and stop stepping; the episode is abandoned on close.
        await self._send_json({'type': 'error', 'error': f'{type(e).__name__}: {e}'})
        return

  async def _check_pause_timeout(self) -> None:
    if (self._paused_at is not None and self._episode is not None and
        time.monotonic() - self._paused_at > self._ctx.pause_timeout):
      await self._finish(storage_lib.ABANDONED)
      await self._send_json({'type': 'abandoned', 'reason': 'paused past the timeout'})

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
      return
    await self._db(self._ctx.db.end_episode, episode.id, state=storage_lib.SAVING, outcome=outcome,
                   num_steps=episode.num_actions + 1, episode_return=episode.total, ending=ending)
    self._ctx.recorder.submit(self._dataset, episode.played(self._player['id'],
                                                            self._record_frames))
    if notify:
      await self._send_json({'type': 'saving', 'episode_id': episode.id, 'outcome': outcome})


def _ending(timestep: dm_env.TimeStep) -> str:
  return 'terminated' if timestep.last() and timestep.discount == 0 else 'truncated'
