"""Bad input to the creator gets a clear answer: every HTTP endpoint and the WebSocket, given the
malformed bodies and messages the issue found and a bounded number of random ones (seeded), answer
with a 4xx and a JSON error in words (never a 500, never a Python class name), and the WebSocket
answers each bad message with an error message and stays open."""

from __future__ import annotations

import asyncio
import json
import random
import re

import pytest

from tests import creator_helpers as h

pytest.importorskip('gymnasium')
HUGE = 2 ** 70
ROUNDS = 120  # Random requests per run (bounded: the whole file takes seconds).
CLASS_NAME = re.compile(r'\b[A-Z][a-zA-Z]+(Error|Exception)\b')


def run(coro):
  return asyncio.run(coro)


def _random_json(rng: random.Random, depth: int = 0):
  choices = [None, True, False, 0, -1, HUGE, 1.5, float('nan'), float('inf'), '', 'abc', '../x',
             'x' * 300, [], {}]
  if depth < 3:
    choices += [[_random_json(rng, depth + 1) for _ in range(rng.randrange(4))],
                {rng.choice(['name', 'spec', 'environments', 'type', 'fps', 'keys', 'study_id',
                             'add_tags', 'states', 'options', 'token', 'id', 'accept', 'join']):
                 _random_json(rng, depth + 1) for _ in range(rng.randrange(4))}]
  return rng.choice(choices)


async def _check(response, allowed=(400, 403, 404)) -> dict:
  assert response.status in allowed, (response.status, await response.text())
  body = await response.json()
  assert isinstance(body['error'], str) and body['error']
  assert not CLASS_NAME.search(body['error']), body['error']
  return body


def test_http_bad_input_is_answered_in_words(tmp_path):
  async def body():
    async with h.running(str(tmp_path)) as client:
      study = await h.make_study(client)
      _, token = await h.enroll(client, study)
      row, _ = await _one_episode(client, study, token)
      d = h.designer()
      # The cases the issue found.
      for environments in ('abc', [1, 2], ['x'], [None], {'spec': 'gymnasium:CartPole-v1'}):
        await _check(await client.post('/api/studies', headers=d, json={
            'name': 'n', 'environments': environments}))
      body = await _check(await client.get(f'/api/studies/{HUGE}', headers=d), (404,))
      assert body['error'] == f'no study {HUGE}'
      assert (await _check(await client.get('/api/studies/999', headers=d), (404,)))['error'] == \
          'no study 999'
      await _check(await client.put(f'/api/studies/{HUGE}', headers=d, json={'name': 'x'}), (404,))
      await _check(await client.get(f'/api/episodes?study={HUGE}', headers=d))
      await _check(await client.post(f'/api/episodes/{row["id"]}/annotate', headers=d,
                                     json={'add_tags': 'abc'}))
      listed = await (await client.get(f'/api/episodes/{row["id"]}', headers=d)).json()
      assert listed['tags'] == []
      await _check(await client.post('/api/download', headers=d, json={'study_id': HUGE}))
      await _check(await client.post('/api/download', headers=d, data='{"study_id": NaN}'))
      body = await _check(await client.post('/api/studies', headers=d, json={
          'name': 'typo', 'environments': [{'spec': 'gymnasium:CartPol-v1'}]}))
      assert 'CartPol-v1' in body['error']
      body = await _check(await client.put(f'/api/studies/{study["id"]}', headers=h.designer(token),
                                           json={'name': 'x'}), (403,))
      # Random bodies on every endpoint that takes one, with and without the designer token.
      rng = random.Random(18)
      posts = ['/api/studies', f'/api/studies/{study["id"]}/enroll', '/api/download',
               f'/api/episodes/{row["id"]}/annotate', '/api/environments/check']
      for _ in range(ROUNDS):
        path = rng.choice(posts + [f'/api/studies/{study["id"]}'])
        payload = _random_json(rng)
        data = (json.dumps(payload) if rng.random() < 0.8 else
                rng.choice(['{', 'null', '[1,', '\xff', '{"a": NaN}', '']))
        headers = rng.choice([d, h.designer(token), {}])
        method = client.put if path == f'/api/studies/{study["id"]}' else client.post
        response = await method(path, headers=headers, data=data)
        if response.status not in (200, 201):
          await _check(response)
      for query in ('study=abc', f'player={HUGE}', 'state=NOPE', 'environment=-1', 'study=1e3'):
        await _check(await client.get(f'/api/episodes?{query}', headers=d))
  run(body())


async def _one_episode(client, study, token):
  player = await h.Player.connect(client, study['id'], token)
  await player.start(study['environments'][0]['id'])
  await player.play_synchronous([['left']] * 20)
  ended = await player.until('ended')
  await player.send(type='verdict', accept=True)
  await player.until('saved')
  await player.ws.close()
  return await (await client.get(f'/api/episodes/{ended["episode_id"]}',
                                 headers=h.designer())).json(), player


def test_websocket_bad_messages_are_answered_and_the_socket_stays(tmp_path):
  async def body():
    async with h.running(str(tmp_path)) as client:
      study = await h.make_study(client)
      _, token = await h.enroll(client, study)
      ws = await client.ws_connect(f'/ws/play/{study["id"]}')
      player = h.Player(ws)
      # Before hello: bad messages are answered, hello still works.
      for raw in ('[1, 2]', 'null', '"hi"', '{', '{"type": "start", "environment_id": 1}'):
        await ws.send_str(raw)
        assert (await player.until('error'))['type'] == 'error'
      await player.send(type='hello', token=token)
      await player.start(study['environments'][0]['id'])
      cases = ['[1]', 'null', '"text"', '3', '{', '{"type": "speed", "fps": NaN}',
               '{"type": "speed", "fps": Infinity}', '{"type": "speed", "fps": 1e308}',
               '{"type": "speed", "fps": "60"}', '{"type": "keys", "keys": "left"}',
               '{"type": "keys", "keys": ["ctrl"]}', '{"type": "start", "environment_id": 1e99}',
               f'{{"type": "start", "environment_id": {HUGE}}}', '{"type": "verdict"}',
               '{"type": "verdict", "accept": true}', '{"type": "nope"}', '{"type": "hello"}',
               '{"type": "step", "keys": [], "axes": [2]}']
      rng = random.Random(7)
      cases += [json.dumps(_random_json(rng)) for _ in range(ROUNDS)]
      for raw in cases:
        await ws.send_str(raw)
        await ws.send_json({'type': 'ping'})
        answers = []
        while not answers or answers[-1]['type'] != 'pong':
          answers.append(await player.receive())
        for answer in answers[:-1]:
          assert answer['type'] in ('error', 'step', 'ended', 'saved', 'ready'), (raw, answer)
          if answer['type'] == 'error':
            assert not CLASS_NAME.search(answer['error']), answer
        if 'fps' in raw or raw in ('[1]', 'null', '"text"', '{'):
          assert [a['type'] for a in answers] == ['error', 'pong'], (raw, answers)
          if 'NaN' in raw or 'Infinity' in raw:
            assert 'is not a number JSON allows' in answers[0]['error']
          elif 'fps' in raw:
            assert 'fps: expected a number from 1 to 60' in answers[0]['error']
      assert not ws.closed
      await ws.close()
  run(body())
