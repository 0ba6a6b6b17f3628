"""Helpers of the creator tests: an in-process server, a study, and a scripted WebSocket player."""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
from typing import Any, AsyncIterator, Optional, Sequence

from aiohttp import test_utils

from rlds_suite.creator import server

TOKEN = 'designer-token-for-tests-0123456789'
CARTPOLE = {'name': 'cartpole', 'spec': 'gymnasium:CartPole-v1',
            'options': {'seed': 3, 'max_episode_steps': 12}, 'instructions': 'Keep it up.'}


# The database the tests use: None is the server's default SQLite file; test_creator_postgres.py
# points it at a PostgreSQL server.
DB_URL: Optional[str] = None


def db_url(data_dir: str) -> str:
  from rlds_suite.creator import storage  # pylint: disable=g-import-not-at-top
  return DB_URL or storage.Storage.default_url(data_dir)


def designer(token: str = TOKEN) -> dict[str, str]:
  return {'Authorization': f'Bearer {token}'}


@contextlib.asynccontextmanager
async def running(data_dir: str, **kwargs: Any) -> AsyncIterator[test_utils.TestClient]:
  app = server.create_app(data_dir, designer_token=TOKEN, db_url=DB_URL, **kwargs)
  async with test_utils.TestClient(test_utils.TestServer(app)) as client:
    yield client


async def make_study(client: test_utils.TestClient, environments: Sequence[dict] = (CARTPOLE,),
                     record_frames: bool = True, active: bool = True) -> dict[str, Any]:
  response = await client.post('/api/studies', headers=designer(), json={
      'name': 'study one', 'description': 'd', 'instructions': 'Play well.',
      'environments': list(environments), 'record_frames': record_frames, 'active': active})
  assert response.status == 201, await response.text()
  return await response.json()


async def enroll(client: test_utils.TestClient, study: dict[str, Any],
                 name: str = 'ada') -> tuple[dict[str, Any], str]:
  response = await client.post(f'/api/studies/{study["id"]}/enroll',
                               json={'join': study['join_code'], 'name': name})
  assert response.status == 201, await response.text()
  body = await response.json()
  return body['player'], body['token']


def parse_step(data: bytes) -> tuple[dict[str, Any], bytes]:
  (length,) = struct.unpack('>I', data[:4])
  return json.loads(data[4:4 + length]), data[4 + length:]


class Player:
  """A scripted player on one WebSocket: `ws` from client.ws_connect."""

  def __init__(self, ws: Any):
    self.ws = ws
    self.headers: list[dict[str, Any]] = []
    self.images: list[bytes] = []
    self.events: list[dict[str, Any]] = []

  @classmethod
  async def connect(cls, client: Any, study_id: int, token: str, url: Optional[str] = None) -> 'Player':
    ws = await client.ws_connect(url or f'/ws/play/{study_id}')
    await ws.send_json({'type': 'hello', 'token': token})
    return cls(ws)

  async def receive(self, timeout: float = 30) -> dict[str, Any]:
    """The next message: a step header (with 'image') or a JSON event."""
    message = await self.ws.receive(timeout=timeout)
    if message.type.name == 'BINARY':
      header, image = parse_step(message.data)
      self.headers.append(header)
      self.images.append(image)
      return {'type': 'step', **header, 'image': image}
    if message.type.name == 'TEXT':
      event = json.loads(message.data)
      self.events.append(event)
      return event
    raise ConnectionError(f'connection ended: {message}')

  async def until(self, kind: str, timeout: float = 30) -> dict[str, Any]:
    while True:
      message = await self.receive(timeout)
      if message['type'] == 'error' and kind != 'error':
        raise AssertionError(message)
      if message['type'] == kind:
        return message

  async def start(self, environment_id: int) -> dict[str, Any]:
    await self.ws.send_json({'type': 'start', 'environment_id': environment_id})
    ready = await self.until('ready')
    await self.until('step')
    return ready

  async def step(self, keys: Sequence[str]) -> dict[str, Any]:
    await self.ws.send_json({'type': 'step', 'keys': list(keys)})
    return await self.until('step')

  async def play_synchronous(self, keys_per_step: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """Presses each key set in turn until the episode ends; returns the step headers."""
    steps = []
    for keys in keys_per_step:
      steps.append(await self.step(keys))
      if steps[-1]['last']:
        break
    return steps

  async def send(self, **message: Any) -> None:
    await self.ws.send_json(message)


async def wait_state(client: Any, episode_id: str, state: str, timeout: float = 60) -> dict:
  deadline = asyncio.get_running_loop().time() + timeout
  while True:
    row = await (await client.get(f'/api/episodes/{episode_id}', headers=designer())).json()
    if row['state'] == state:
      return row
    if asyncio.get_running_loop().time() > deadline:
      raise AssertionError(f'episode {episode_id} stayed {row["state"]}, expected {state}')
    await asyncio.sleep(0.05)


class ServerThread:
  """The creator on a loopback port, in its own thread and event loop (for real clients)."""

  def __init__(self, data_dir: str, **kwargs: Any):
    import socket  # pylint: disable=g-import-not-at-top
    import threading  # pylint: disable=g-import-not-at-top
    from aiohttp import web  # pylint: disable=g-import-not-at-top
    with socket.socket() as s:
      s.bind(('127.0.0.1', 0))
      self.port = s.getsockname()[1]
    self.url = f'http://127.0.0.1:{self.port}'
    self._loop = asyncio.new_event_loop()
    app = server.create_app(data_dir, designer_token=TOKEN, db_url=DB_URL, **kwargs)
    self._runner = web.AppRunner(app)
    started = threading.Event()

    def run() -> None:
      asyncio.set_event_loop(self._loop)
      self._loop.run_until_complete(self._runner.setup())
      self._loop.run_until_complete(web.TCPSite(self._runner, '127.0.0.1', self.port).start())
      started.set()
      self._loop.run_forever()

    self._thread = threading.Thread(target=run, daemon=True)
    self._thread.start()
    started.wait(60)

  def close(self) -> None:
    asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(120)
    self._loop.call_soon_threadsafe(self._loop.stop)
    self._thread.join(30)

  def __enter__(self) -> 'ServerThread':
    return self

  def __exit__(self, *exc: Any) -> None:
    self.close()


def start_process(data_dir: str) -> tuple[Any, str]:
  """A real `rlds-suite creator` process on a free loopback port (for signals and fresh-process
  behaviour): the Popen and its URL. `until_up` waits for it to answer."""
  import socket  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
  process = subprocess.Popen(
      [sys.executable, '-m', 'rlds_suite', 'creator', '--port', str(port), '--data_dir', data_dir,
       '--token', TOKEN], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
  return process, f'http://127.0.0.1:{port}'


async def until_up(session: Any, url: str) -> None:
  import aiohttp  # pylint: disable=g-import-not-at-top
  for _ in range(600):
    try:
      await session.get(f'{url}/')
      return
    except aiohttp.ClientConnectionError:
      await asyncio.sleep(0.2)
  raise AssertionError(f'the creator at {url} did not answer')
