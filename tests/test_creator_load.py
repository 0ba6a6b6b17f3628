"""20 simulated players (WebSocket clients) on loopback, each playing CartPole episodes for a bounded
time: every completed episode is in the download exactly once with the actions its player sent,
nothing else is, and the server answers HTTP requests throughout. Stops by itself."""

from __future__ import annotations

import asyncio
import collections
import random

import aiohttp
import numpy as np
import pytest
import tensorflow_datasets as tfds

from rlds_suite.creator import storage as storage_lib
from rlds_suite.tfds import datasets
from tests import creator_helpers as h

pytest.importorskip('gymnasium')
PLAYERS = 20
PLAY_SECONDS = 8.0
ENV = {'name': 'cartpole', 'spec': 'gymnasium:CartPole-v1', 'options': {'max_episode_steps': 6}}


async def _player(session: aiohttp.ClientSession, url: str, study: dict, token: str, seed: int,
                  stop_at: float) -> dict[str, list[int]]:
  """Plays until `stop_at`, keeping every other episode and rejecting the rest; returns the actions
  of the episodes it kept."""
  rng = random.Random(seed)
  kept: dict[str, list[int]] = {}
  loop = asyncio.get_running_loop()
  async with session.ws_connect(f'{url}/ws/play/{study["id"]}') as ws:
    player = h.Player(ws)
    await player.send(type='hello', token=token)
    await player.start(study['environments'][0]['id'])
    episode = 0
    while loop.time() < stop_at:
      actions = []
      while True:
        action = rng.randrange(2)
        actions.append(action)
        step = await player.step(['left' if action == 0 else 'right'])
        assert step['action'] == action
        if step['last']:
          break
      ended = await player.until('ended')
      accept = episode % 2 == 0
      await player.send(type='verdict', accept=accept)
      saving = await player.until('saved')
      assert saving['episode_id'] == ended['episode_id']
      if accept:
        kept[ended['episode_id']] = actions
      episode += 1
      await player.send(type='new')
      await player.until('step')
  return kept


def test_twenty_players(tmp_path):
  with h.ServerThread(str(tmp_path / 'data')) as server:
    async def body():
      async with aiohttp.ClientSession() as session:
        response = await session.post(f'{server.url}/api/studies', headers=h.designer(), json={
            'name': 'load', 'environments': [ENV], 'record_frames': False, 'active': True})
        study = await response.json()
        tokens = []
        for i in range(PLAYERS):
          response = await session.post(f'{server.url}/api/studies/{study["id"]}/enroll',
                                        json={'join': study['join_code'], 'name': f'p{i}'})
          tokens.append((await response.json())['token'])
        stop_at = asyncio.get_running_loop().time() + PLAY_SECONDS
        players = asyncio.gather(*(_player(session, server.url, study, token, i, stop_at)
                                   for i, token in enumerate(tokens)))
        answered = 0
        while not players.done():  # The server answers while every player plays.
          response = await asyncio.wait_for(
              session.get(f'{server.url}/api/studies', headers=h.designer()), 30)
          assert response.status == 200
          answered += 1
          await asyncio.sleep(0.25)
        kept = {k: v for results in await players for k, v in results.items()}
        assert answered >= 2 and len(kept) >= PLAYERS
        # Every kept episode becomes COMPLETED once durable; then download them all.
        for episode_id in kept:
          deadline = asyncio.get_running_loop().time() + 120
          while True:
            row = await (await session.get(f'{server.url}/api/episodes/{episode_id}',
                                           headers=h.designer())).json()
            if row['state'] == storage_lib.COMPLETED:
              break
            assert asyncio.get_running_loop().time() < deadline, row
            await asyncio.sleep(0.1)
        response = await session.post(f'{server.url}/api/download', headers=h.designer(),
                                      json={'study_id': study['id'], 'format': 'directory'})
        assert response.status == 200, await response.text()
        rows = await (await session.get(f'{server.url}/api/episodes?study={study["id"]}',
                                        headers=h.designer())).json()
        return kept, (await response.json())['directories'], rows
    kept, directories, rows = asyncio.run(body())

  assert collections.Counter(r['state'] for r in rows)[storage_lib.REJECTED] >= PLAYERS
  (directory,) = directories
  downloaded = collections.Counter()
  for episode in datasets.numpy_episodes(
      tfds.builder_from_directory(directory).as_dataset(split='train')):
    episode_id = episode['episode_id'].decode()
    downloaded[episode_id] += 1
    actions = kept[episode_id]
    np.testing.assert_array_equal(episode['steps']['action'][:len(actions)], actions)
  assert downloaded == collections.Counter(kept.keys())  # All there, none twice, nothing else.


def test_twenty_players_join_at_once_on_a_fresh_server(tmp_path):
  """A fresh `rlds-suite creator` process (nothing rendered yet in it), 20 players starting
  CartPole (rendered with pygame) at the same instant: every one gets the game and plays, and no
  episode is left PLAYING."""
  import signal  # pylint: disable=g-import-not-at-top
  import subprocess  # pylint: disable=g-import-not-at-top
  process, url = h.start_process(str(tmp_path))

  async def one(session, study, token, seed):
    async with session.ws_connect(f'{url}/ws/play/{study["id"]}') as ws:
      player = h.Player(ws)
      await player.send(type='hello', token=token)
      await player.start(study['environments'][0]['id'])
      for key in random.Random(seed).choices(['left', 'right'], k=3):
        step = await player.step([key])
        assert step['image'][:2] == b'\xff\xd8' and step['keys'] == key
      await player.send(type='cancel')
      return (await player.until('saved'))['episode_id']

  async def body():
    async with aiohttp.ClientSession() as session:
      await h.until_up(session, url)
      study = await (await session.post(f'{url}/api/studies', headers=h.designer(), json={
          'name': 'rush', 'environments': [ENV], 'record_frames': True, 'active': True})).json()
      tokens = []
      for i in range(PLAYERS):
        response = await session.post(f'{url}/api/studies/{study["id"]}/enroll',
                                      json={'join': study['join_code'], 'name': f'p{i}'})
        tokens.append((await response.json())['token'])
      ids = await asyncio.gather(*(one(session, study, t, i) for i, t in enumerate(tokens)))
      rows = await (await session.get(f'{url}/api/episodes?study={study["id"]}',
                                      headers=h.designer())).json()
      return ids, rows
  try:
    ids, rows = asyncio.run(body())
  finally:
    process.send_signal(signal.SIGINT)
    try:
      process.wait(60)
    except subprocess.TimeoutExpired:
      process.kill()
  assert len(set(ids)) == PLAYERS
  assert collections.Counter(r['state'] for r in rows) == {storage_lib.CANCELLED: PLAYERS}
