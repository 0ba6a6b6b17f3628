"""The creator in-process: study CRUD and permissions, play over the WebSocket, episode states,
replay, tags and notes, downloads with every option checked step by step against what was played,
and restart reconciliation."""

from __future__ import annotations

import asyncio
import io
import json
import os
import time
import zipfile

import numpy as np
import pytest
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.creator import export as export_lib
from rlds_suite.creator import keymaps
from rlds_suite.creator import recorder as recorder_lib
from rlds_suite.creator import storage as storage_lib
from rlds_suite.tfds import datasets
from tests import creator_helpers as h

pytest.importorskip('gymnasium')

LEFT, RIGHT = ['left'], ['right']


def run(coro):
  return asyncio.run(coro)


def load_steps(directory: str) -> dict[str, dict]:
  """episode_id -> numpy steps of a dataset directory."""
  builder = tfds.builder_from_directory(directory)
  return {e['episode_id'].decode(): e for e in datasets.numpy_episodes(
      builder.as_dataset(split='train'))}


async def _play_one(client, study, token, keys, accept=True):
  """Plays CartPole with `keys` (one per step) until it ends, gives the verdict, waits until saved."""
  player = await h.Player.connect(client, study['id'], token)
  await player.start(study['environments'][0]['id'])
  steps = await player.play_synchronous(keys)
  ended = await player.until('ended')
  await player.send(type='verdict', accept=accept)
  await player.until('saved')
  await player.ws.close()
  state = storage_lib.COMPLETED if accept else storage_lib.REJECTED
  row = await h.wait_state(client, ended['episode_id'], state)
  return row, steps, player


def test_study_crud_and_permissions(tmp_path):
  async def body():
    async with h.running(str(tmp_path)) as client:
      assert (await client.get('/api/studies')).status == 403
      assert (await client.get('/api/studies', headers=h.designer('wrong-token'))).status == 403
      study = await h.make_study(client)
      assert study['environments'][0]['spec'] == 'gymnasium:CartPole-v1'
      player, token = await h.enroll(client, study)
      as_player = h.designer(token)
      # A player cannot list, create, edit, delete or download.
      assert (await client.get('/api/studies', headers=as_player)).status == 403
      assert (await client.post('/api/studies', headers=as_player, json={'name': 'x'})).status == 403
      assert (await client.put(f'/api/studies/{study["id"]}', headers=as_player,
                               json={'name': 'y'})).status == 403
      assert (await client.delete(f'/api/studies/{study["id"]}', headers=as_player)).status == 403
      assert (await client.post('/api/download', headers=as_player,
                                json={'study_id': study['id']})).status == 403
      # The study link is needed to enrol; the public view hides the join code.
      assert (await client.post(f'/api/studies/{study["id"]}/enroll',
                                json={'join': 'guess', 'name': 'eve'})).status == 403
      public = await (await client.get(f'/api/studies/{study["id"]}/public',
                                       headers=as_player)).json()
      assert 'join_code' not in public and public['instructions'] == 'Play well.'
      assert (await client.get(f'/api/studies/{study["id"]}/public')).status == 403
      # Edit, list, names that could act as paths.
      edited = await (await client.put(f'/api/studies/{study["id"]}', headers=h.designer(),
                                       json={'name': 'renamed', 'active': False})).json()
      assert edited['name'] == 'renamed' and not edited['active']
      listed = await (await client.get('/api/studies', headers=h.designer())).json()
      assert [s['name'] for s in listed] == ['renamed']
      for bad in ('../etc', 'a/b', '..', 'x\\y'):
        response = await client.post('/api/studies', headers=h.designer(), json={
            'name': bad, 'environments': [h.CARTPOLE]})
        assert response.status == 400, bad
        response = await client.post('/api/studies', headers=h.designer(), json={
            'name': 'ok', 'environments': [{**h.CARTPOLE, 'name': bad}]})
        assert response.status == 400, bad
      assert (await client.post(f'/api/studies/{study["id"]}/enroll', json={
          'join': study['join_code'], 'name': '../admin'})).status == 400
      assert (await client.get('/static/../creator.db')).status in (403, 404)
      assert (await client.get('/static/%2e%2e/server.py')).status in (403, 404)
      # A stopped study cannot be played.
      p = await h.Player.connect(client, study['id'], token)
      await p.send(type='start', environment_id=study['environments'][0]['id'])
      assert 'not running' in (await p.until('error'))['error']
      await p.ws.close()
      # Delete.
      assert (await client.delete(f'/api/studies/{study["id"]}', headers=h.designer())).status == 200
      assert (await client.get(f'/api/studies/{study["id"]}', headers=h.designer())).status == 404
  run(body())


def test_players_only_reach_their_own_study_and_episodes(tmp_path):
  async def body():
    async with h.running(str(tmp_path)) as client:
      one, two = await h.make_study(client), await h.make_study(client)
      _, token_one = await h.enroll(client, one, 'ada')
      _, token_other = await h.enroll(client, one, 'bob')
      _, token_two = await h.enroll(client, two, 'cy')
      row, _, _ = await _play_one(client, one, token_one, [LEFT] * 20)
      # Another study's player cannot connect to this study's play loop nor see its study.
      intruder = await h.Player.connect(client, one['id'], token_two)
      assert 'not enrolled' in (await intruder.until('error'))['error']
      assert (await client.get(f'/api/studies/{one["id"]}/public',
                               headers=h.designer(token_two))).status == 403
      # Players see only their own episodes.
      for token, expected in ((token_one, [row['id']]), (token_other, []), (token_two, [])):
        listed = await (await client.get('/api/episodes', headers=h.designer(token))).json()
        assert [r['id'] for r in listed] == expected
        status = (await client.get(f'/api/episodes/{row["id"]}/steps',
                                   headers=h.designer(token))).status
        assert status == (200 if expected else 403)
  run(body())


def test_play_replay_tags_and_download(tmp_path):
  async def body():
    async with h.running(str(tmp_path)) as client:
      study = await h.make_study(client)
      player, token = await h.enroll(client, study)
      keys = [LEFT, RIGHT, RIGHT, LEFT, ['left', 'space'], RIGHT] * 5
      row, steps, p = await _play_one(client, study, token, keys)
      n_actions = len(steps)
      assert row['num_steps'] == n_actions + 1 and row['stored']
      assert [s['action'] for s in steps] == [0 if 'left' in k else 1 for k in keys[:n_actions]]
      assert all(img[:2] == b'\xff\xd8' for img in p.images)  # JPEG frames.
      # Replay data: the same actions, keys and rewards, with frames.
      replay = await (await client.get(f'/api/episodes/{row["id"]}/steps',
                                       headers=h.designer(token))).json()
      assert replay['num_steps'] == n_actions + 1 and replay['has_frames']
      assert replay['action'][:n_actions] == [s['action'] for s in steps]
      assert replay['keys'][:n_actions] == [s['keys'] for s in steps]
      assert replay['keys'][0] == 'left' and replay['keys'][4] == 'left+space'
      assert replay['reward'][:n_actions] == [s['reward'] for s in steps]
      frame = await client.get(f'/api/episodes/{row["id"]}/frames/3', headers=h.designer())
      assert frame.status == 200 and (await frame.read())[:2] == b'\xff\xd8'
      # Tags and notes (the player annotates their own episode; the designer too).
      await client.post(f'/api/episodes/{row["id"]}/annotate', headers=h.designer(token), json={
          'add_tags': ['good', 'tmp'], 'notes': 'steady hands', 'add_step_tags': [[2, 'goal'],
                                                                                  [5, 'goal']]})
      annotated = await (await client.post(f'/api/episodes/{row["id"]}/annotate',
                                           headers=h.designer(), json={
          'remove_tags': ['tmp'], 'add_step_tags': [[3, 'wobble']],
          'remove_step_tags': [[5, 'goal']]})).json()
      assert annotated['tags'] == ['good'] and annotated['notes'] == 'steady hands'
      assert annotated['step_tags'] == {'2': ['goal'], '3': ['wobble']}
      bad = await client.post(f'/api/episodes/{row["id"]}/annotate', headers=h.designer(),
                              json={'add_tags': ['../x']})
      assert bad.status == 400
      # Download as a zip: metadata kept, step tags as fields, no cut.
      response = await client.post('/api/download', headers=h.designer(),
                                   json={'study_id': study['id']})
      assert response.status == 200
      out = tmp_path / 'unzipped'
      zipfile.ZipFile(io.BytesIO(await response.read())).extractall(out)
      (directory,) = {os.path.dirname(str(p)) for p in out.rglob('dataset_info.json')}
      builder = tfds.builder_from_directory(directory)
      assert builder.info.metadata['environment']['spec'] == 'gymnasium:CartPole-v1'
      assert builder.info.metadata['export_options']['strip_metadata'] is False
      # Episode metadata, declared as features: what the study knows of each episode.
      (plain,) = list(tfds.as_numpy(builder.as_dataset(split='train')))
      assert [t.decode() for t in plain['tags']] == ['good']
      assert plain['notes'].decode() == 'steady hands' and plain['player_name'].decode() == 'ada'
      assert plain['study_id'] == study['id'] and plain['state'].decode() == 'COMPLETED'
      assert plain['environment_spec'].decode() == 'gymnasium:CartPole-v1'
      assert json.loads(plain['environment_options']) == h.CARTPOLE['options']
      assert plain['ending'].decode() == row['ending'] and plain['player_id'] == player['id']
      assert abs(plain['created_time'] - time.time()) < 600
      assert plain['updated_time'] >= plain['created_time']
      for name in export_lib.episode_features():
        assert name in builder.info.features
      episode = load_steps(directory)[row['id']]['steps']
      np.testing.assert_array_equal(episode['action'][:n_actions], [s['action'] for s in steps])
      assert [k.decode() for k in episode['keys'][:n_actions]] == [s['keys'] for s in steps]
      np.testing.assert_array_equal(np.flatnonzero(episode['tag:goal']), [2])
      np.testing.assert_array_equal(np.flatnonzero(episode['tag:wobble']), [3])
      assert episode['frame'].shape == (n_actions + 1, 400, 600, 3)
      assert bool(episode['is_last'][-1]) and episode['is_terminal'][-1] == (row['ending'] == 'terminated')
      assert datasets.validate(directory).ok
      # Directory export, metadata stripped, cut at the first 'wobble' step (truncated there).
      response = await client.post('/api/download', headers=h.designer(), json={
          'study_id': study['id'], 'format': 'directory', 'strip_metadata': True,
          'end_tags': ['wobble'], 'tags': ['good']})
      (directory,) = (await response.json())['directories']
      episode = load_steps(directory)[row['id']]['steps']
      assert set(episode) >= {'tag:goal', 'tag:wobble'}
      assert not set(episode) & set(recorder_lib.METADATA_FIELDS)
      assert len(episode['is_first']) == 4
      np.testing.assert_array_equal(episode['action'][:3], [s['action'] for s in steps[:3]])
      assert episode['is_last'][3] and not episode['is_terminal'].any()
      np.testing.assert_array_equal(episode['discount'], np.ones(4))
      assert datasets.validate(directory).ok
      meta = tfds.builder_from_directory(directory).info.metadata
      assert meta['export_options']['end_tags'] == ['wobble'] and meta['selection']['tags'] == ['good']
      # Without tag fields; a tag filter that matches nothing is refused in one line.
      response = await client.post('/api/download', headers=h.designer(), json={
          'study_id': study['id'], 'format': 'directory', 'step_tag_fields': False})
      (directory,) = (await response.json())['directories']
      assert not any(k.startswith('tag:') for k in load_steps(directory)[row['id']]['steps'])
      response = await client.post('/api/download', headers=h.designer(), json={
          'study_id': study['id'], 'tags': ['nothing']})
      assert response.status == 400 and 'no stored episode' in (await response.json())['error']
  run(body())


def test_episode_states(tmp_path):
  async def body():
    async with h.running(str(tmp_path), pause_timeout=0.2) as client:
      study = await h.make_study(client, record_frames=False)
      env_id = study['environments'][0]['id']
      _, token = await h.enroll(client, study)
      rejected, _, _ = await _play_one(client, study, token, [LEFT] * 20, accept=False)
      # Cancelled mid-episode.
      p = await h.Player.connect(client, study['id'], token)
      await p.start(env_id)
      await p.play_synchronous([RIGHT, RIGHT])
      await p.send(type='cancel')
      cancelled = (await p.until('saved'))['episode_id']
      # ENTER: a new episode; then the connection is lost mid-episode.
      await p.send(type='new')
      await p.until('step')
      await p.step(LEFT)
      await p.ws.close()
      await h.wait_state(client, cancelled, storage_lib.CANCELLED)
      await asyncio.sleep(0.5)  # Past pause_timeout: the parked session is closed, not resumed.
      # Paused past the timeout.
      q = await h.Player.connect(client, study['id'], token)
      await q.start(env_id)
      await q.step(LEFT)
      await q.send(type='pause')
      await asyncio.sleep(0.4)
      await q.send(type='step', keys=LEFT)  # Ignored while paused.
      await q.send(type='resume')
      assert (await q.until('abandoned'))['reason'] == 'paused past the timeout'
      assert len(q.headers) == 2  # The reset and the one step before the pause.
      await q.ws.close()
      for _ in range(600):  # Closed connections are abandoned, then saved, in the background.
        rows = await (await client.get(f'/api/episodes?study={study["id"]}',
                                       headers=h.designer())).json()
        if all(r['state'] in storage_lib.FINAL_STATES for r in rows):
          break
        await asyncio.sleep(0.1)
      states = sorted(r['state'] for r in rows)
      assert states == ['ABANDONED', 'ABANDONED', 'CANCELLED', 'REJECTED'], [
          (r['state'], r['num_steps'], r['stored']) for r in rows]
      assert all(r['stored'] for r in rows)
      # The episodes share a shard file (the writer's policy), not a file each.
      (dataset,) = {r['dataset'] for r in rows}
      assert len([f for f in os.listdir(os.path.join(tmp_path, dataset)) if 'tfrecord' in f]) == 1
      # Only COMPLETED by default: nothing here; asked for, the others come.
      response = await client.post('/api/download', headers=h.designer(),
                                   json={'study_id': study['id']})
      assert response.status == 400
      response = await client.post('/api/download', headers=h.designer(), json={
          'study_id': study['id'], 'format': 'directory', 'states': ['CANCELLED', 'REJECTED']})
      (directory,) = (await response.json())['directories']
      found = load_steps(directory)
      assert set(found) == {cancelled, rejected['id']}
      cut = found[cancelled]['steps']
      assert len(cut['is_first']) == 3 and not cut['is_terminal'].any()  # Truncated where it stopped.
      assert 'frame' not in cut
  run(body())


def test_restart_reconciles_database_and_datasets(tmp_path):
  async def body():
    async with h.running(str(tmp_path)) as client:
      study = await h.make_study(client)
      _, token = await h.enroll(client, study)
      row, _, _ = await _play_one(client, study, token, [LEFT] * 20)
    return study, row
  study, row = run(body())
  db = storage_lib.Storage(h.db_url(str(tmp_path)))
  # As if the server died between the durable write and the database update, and mid-play.
  db.set_state(row['id'], storage_lib.SAVING, outcome=storage_lib.COMPLETED)
  db.start_episode('f' * 32, study['id'], study['environments'][0]['id'], row['player_id'],
                   row['dataset'])
  db.end_episode('f' * 32, state=storage_lib.SAVING, outcome=storage_lib.COMPLETED, num_steps=5,
                 episode_return=4.0, ending='truncated')
  db.close()

  async def restarted():
    async with h.running(str(tmp_path)) as client:
      again = await (await client.get(f'/api/episodes/{row["id"]}', headers=h.designer())).json()
      lost = await (await client.get(f'/api/episodes/{"f" * 32}', headers=h.designer())).json()
      return again, lost
  again, lost = run(restarted())
  assert again['state'] == storage_lib.COMPLETED and again['stored']
  assert lost['state'] == storage_lib.ABANDONED and not lost['stored']


def test_keymaps():
  from rlds_suite import envs
  atari = keymaps.for_environment('atari:Breakout', envs.make('atari:Breakout', seed=0))
  assert atari.action([]) == 0 and atari.action(['space']) == 1
  assert atari.action(['right']) == 2 and atari.action(['left', 'up']) == 3
  assert not atari.synchronous
  cartpole = keymaps.for_environment('gymnasium:CartPole-v1', None)
  assert cartpole.synchronous and cartpole.action([]) is None and cartpole.action(['right']) == 1
  combos = keymaps.KeyMap(((frozenset({'left'}), 1), (frozenset({'left', 'up'}), 2)), 4)
  assert combos.action(['left', 'up', 'space']) == 2 and combos.action(['down']) == 4
  procgen = keymaps.for_environment('procgen:coinrun', None)  # procgen's own combos.
  assert procgen.action([]) == 4 and procgen.action(['left', 'up']) == 2
  assert procgen.action(['right']) == 7 and procgen.action(['space']) == 9
  from dm_env import specs  # pylint: disable=g-import-not-at-top

  class Continuous:
    def action_spec(self):
      return specs.BoundedArray((1,), np.float64, -1.0, 1.0)
  swingup = keymaps.for_environment('dm_control:cartpole-swingup', Continuous())
  assert not swingup.synchronous and swingup.idle_action == [0.0]
  controls = keymaps.Controls(swingup)
  # A held key ramps its axis to the bound over ramp_seconds (0.5 s); releasing it returns it.
  assert controls.action([], seconds=0.25)[0].tolist() == [0.0]
  assert controls.action(['left'], seconds=0.25) [0].tolist() == [-0.5]
  assert controls.action(['left'], seconds=0.25)[0].tolist() == [-1.0]
  assert controls.action(['left'], seconds=0.25)[0].tolist() == [-1.0]
  action, pressed = controls.action(['right'], seconds=0.25)
  assert action.tolist() == [0.5] and pressed == 'right'
  assert controls.action([], seconds=0.25)[0].tolist() == [0.0]
  # A gamepad stick sets the axis at once.
  action, pressed = controls.action([], sticks=[0.4, 0.0], seconds=0.25)
  assert action.tolist() == [0.4] and pressed == keymaps.STICK

  class Asymmetric:
    def action_spec(self):
      return specs.BoundedArray((2,), np.float32, [0.0, -2.0], [1.0, 2.0])
  controls = keymaps.Controls(keymaps.for_environment('gymnasium:Custom-v0', Asymmetric()))
  assert controls.action(['left', 'down'], seconds=0.25)[0].tolist() == [0.0, -1.0]
  # The stick's y axis points down: pushed up, the second dimension goes up.
  assert controls.action([], sticks=[1.0, -1.0])[0].tolist() == [1.0, 2.0]
  assert keymaps.as_action(controls.action([])[0], Asymmetric().action_spec()).dtype == np.float32
  declared = keymaps.for_environment('gymnasium:CartPole-v1', None, {
      'bindings': [[['space'], 1], [['down'], 0]], 'synchronous': True})
  assert declared.action(['space']) == 1
  with pytest.raises(errors.SchemaError, match='unknown keys'):
    keymaps.from_json({'bindings': [[['ctrl'], 1]], 'idle_action': 0})


def test_asynchronous_atari_steps_with_held_keys(tmp_path):
  """Breakout steps on its own at the chosen speed; each step's action is the key map's action of
  the keys held then (NOOP when none), and the recorded keys say which."""
  pytest.importorskip('ale_py')
  atari = {'name': 'breakout', 'spec': 'atari:Breakout',
           'options': {'seed': 0, 'max_episode_steps': 40}}

  async def body():
    async with h.running(str(tmp_path)) as client:
      study = await h.make_study(client, [atari], record_frames=True)
      _, token = await h.enroll(client, study)
      p = await h.Player.connect(client, study['id'], token)
      ready = await p.start(study['environments'][0]['id'])
      assert not ready['keymap']['synchronous'] and ready['has_frames']
      assert p.headers[0]['waiting']
      await asyncio.sleep(0.4)  # The episode waits for the first key (15 fps would step ~6 times).
      assert len(p.headers) == 1
      await p.send(type='speed', fps=60)
      for keys in (['right'], [], ['space'], ['left', 'up']):
        await p.send(type='keys', keys=keys)
        for _ in range(4):
          await p.until('step')
      while not p.headers[-1]['last']:
        await p.until('step')
      ended = await p.until('ended')
      await p.send(type='verdict', accept=True)
      await p.until('saved')
      await p.ws.close()
      row = await h.wait_state(client, ended['episode_id'], storage_lib.COMPLETED)
      return p.headers[1:], row
  headers, row = run(body())
  meaning = {'': 0, 'space': 1, 'right': 2, 'left': 3, 'left+up': 3}
  assert {hd['keys'] for hd in headers} >= {'right', '', 'space', 'left+up'}
  assert all(hd['action'] == meaning[hd['keys']] for hd in headers)
  assert len(headers) == 40 and row['ending'] == 'truncated'
  steps = load_steps(os.path.join(tmp_path, row['dataset']))[row['id']]['steps']
  np.testing.assert_array_equal(steps['action'][:40], [hd['action'] for hd in headers])
  assert [k.decode() for k in steps['keys'][:40]] == [hd['keys'] for hd in headers]
  assert steps['observation'].shape == (41, 210, 160, 3)
  assert 'frame' not in steps  # The observation is the frame shown: stored once.


def test_killed_server_keeps_every_played_step(tmp_path):
  """A real `rlds-suite creator` process killed with SIGKILL: restarted, it still has the completed
  episode, the one that ended but had no verdict yet (the player, reconnecting, is asked for it),
  and the one in flight, ABANDONED with the steps spooled before the kill (downloadable)."""
  import signal  # pylint: disable=g-import-not-at-top
  import aiohttp  # pylint: disable=g-import-not-at-top
  process, url = h.start_process(str(tmp_path))
  try:
    async def play():
      async with aiohttp.ClientSession() as session:
        await h.until_up(session, url)
        study = await (await session.post(f'{url}/api/studies', headers=h.designer(), json={
            'name': 'crash', 'environments': [h.CARTPOLE], 'active': True})).json()
        env_id = study['environments'][0]['id']
        _, token = await h.enroll(session_client(session, url), study)
        async with session.ws_connect(f'{url}/ws/play/{study["id"]}') as ws, \
            session.ws_connect(f'{url}/ws/play/{study["id"]}') as ws2:
          p = h.Player(ws)
          await p.send(type='hello', token=h.TOKEN)
          await p.start(env_id)
          await p.play_synchronous([LEFT] * 20)
          done = (await p.until('ended'))['episode_id']
          await p.send(type='verdict', accept=True)
          await p.until('saved')
          await p.send(type='new')
          await p.until('step')
          await p.play_synchronous([RIGHT] * 20)
          unjudged = (await p.until('ended'))['episode_id']  # On disk now; no verdict yet.
          q = h.Player(ws2)
          await q.send(type='hello', token=token)
          await q.start(env_id)
          in_flight = [(await q.step(k))['action'] for k in (LEFT, RIGHT, LEFT)]
          await asyncio.sleep(2.0)  # The spool takes the steps within spool_seconds (1 s).
          process.send_signal(signal.SIGKILL)
          return study, done, unjudged, in_flight
    study, done, unjudged, in_flight_actions = run(play())
    process.wait(30)
  finally:
    process.kill()
    process.wait(30)

  async def restarted():
    async with h.running(str(tmp_path)) as client:
      rows = {r['id']: r for r in await (await client.get(
          '/api/episodes', headers=h.designer())).json()}
      abandoned = await (await client.post('/api/download', headers=h.designer(), json={
          'study_id': study['id'], 'format': 'directory', 'states': ['ABANDONED']})).json()
      # The designer reconnects: asked for the verdict on the episode that ended before the kill.
      p = await h.Player.connect(client, study['id'], h.TOKEN)
      await p.ws.send_json({'type': 'start', 'environment_id': study['environments'][0]['id']})
      await p.until('ready')
      ended = await p.until('ended')
      await p.send(type='verdict', accept=True)
      await p.until('saved')
      await p.ws.close()
      kept = await (await client.post('/api/download', headers=h.designer(), json={
          'study_id': study['id'], 'format': 'directory'})).json()
      return rows, abandoned, ended, kept
  rows, abandoned, ended, kept = run(restarted())
  assert rows[done]['state'] == storage_lib.COMPLETED and rows[done]['stored']
  assert rows[unjudged]['state'] == storage_lib.ENDED and rows[unjudged]['stored']
  (in_flight,) = [i for i in rows if i not in (done, unjudged)]
  assert rows[in_flight]['state'] == storage_lib.ABANDONED and rows[in_flight]['stored']
  assert rows[in_flight]['num_steps'] == len(in_flight_actions) + 1
  assert abandoned['episodes'] == [in_flight]
  steps = load_steps(abandoned['directories'][0])[in_flight]['steps']
  np.testing.assert_array_equal(steps['action'][:3], in_flight_actions)
  assert [k.decode() for k in steps['keys'][:3]] == ['left', 'right', 'left']
  assert bool(steps['is_last'][-1]) and not steps['is_terminal'].any()
  assert ended['episode_id'] == unjudged
  assert sorted(kept['episodes']) == sorted([done, unjudged])


def session_client(session, url):
  """An aiohttp ClientSession as the test client that creator_helpers expects (paths, not URLs)."""
  class Client:
    async def post(self, path, **kwargs):
      return await session.post(url + path, **kwargs)
  return Client()


def test_reconnecting_player_gets_the_same_episode(tmp_path):
  """A dropped connection parks the session: the same player connecting again continues the same
  episode (its steps before and after in one recorded episode), starting on their next key."""
  async def body():
    async with h.running(str(tmp_path)) as client:
      study = await h.make_study(client)
      env_id = study['environments'][0]['id']
      _, token = await h.enroll(client, study)
      p = await h.Player.connect(client, study['id'], token)
      await p.start(env_id)
      before = [(await p.step(k))['action'] for k in (LEFT, RIGHT)]
      await p.ws.close()
      await asyncio.sleep(0.2)
      q = await h.Player.connect(client, study['id'], token)
      await q.ws.send_json({'type': 'start', 'environment_id': env_id})
      ready = await q.until('ready')
      shown = await q.until('step')
      assert ready['resumed'] and shown['t'] == 2  # Where the episode was.
      after = await q.play_synchronous([LEFT] * 20)
      ended = await q.until('ended')
      await q.send(type='verdict', accept=True)
      await q.until('saved')
      await q.ws.close()
      rows = await (await client.get(f'/api/episodes?study={study["id"]}',
                                     headers=h.designer())).json()
      return before + [s['action'] for s in after], ended, rows
  actions, ended, rows = run(body())
  assert [r['id'] for r in rows] == [ended['episode_id']]
  assert rows[0]['state'] == storage_lib.COMPLETED and rows[0]['num_steps'] == len(actions) + 1
  steps = load_steps(os.path.join(tmp_path, rows[0]['dataset']))[rows[0]['id']]['steps']
  np.testing.assert_array_equal(steps['action'][:len(actions)], actions)


def test_environment_failures_are_told_and_nothing_stays_playing(tmp_path, monkeypatch):
  """An environment that fails to start, or fails mid-episode, tells its player in words; the steps
  played before the failure are kept (ABANDONED) and no episode stays PLAYING."""
  from rlds_suite.creator import sessions  # pylint: disable=g-import-not-at-top
  make = sessions.make_environment
  failing = {'start': False}

  class Exploding:
    """CartPole whose third step raises."""

    def __init__(self, env):
      self._env, self._steps = env, 0

    def step(self, action):
      self._steps += 1
      if self._steps == 3:
        raise RuntimeError('the physics exploded')
      return self._env.step(action)

    def __getattr__(self, name):
      return getattr(self._env, name)

  def flaky(env_row):
    if failing['start']:
      raise RuntimeError('no display')
    return Exploding(make(env_row))
  monkeypatch.setattr(sessions, 'make_environment', flaky)

  async def body():
    async with h.running(str(tmp_path)) as client:
      study = await h.make_study(client, record_frames=False)
      env_id = study['environments'][0]['id']
      _, token = await h.enroll(client, study)
      failing['start'] = True  # It worked when the study was saved; not when played.
      p = await h.Player.connect(client, study['id'], token)
      await p.send(type='start', environment_id=env_id)
      error = (await p.until('error'))['error']
      assert 'could not be started: no display' in error and 'RuntimeError' not in error
      failing['start'] = False
      await p.start(env_id)
      await p.step(LEFT)
      await p.step(RIGHT)
      await p.send(type='step', keys=LEFT)
      error = await p.until('error')
      assert error['fatal'] and 'failed: the physics exploded' in error['error']
      await p.send(type='ping')
      await p.until('pong')  # The socket stays.
      await p.ws.close()
      for _ in range(300):
        rows = await (await client.get(f'/api/episodes?study={study["id"]}',
                                       headers=h.designer())).json()
        if rows and all(r['state'] in storage_lib.FINAL_STATES for r in rows):
          break
        await asyncio.sleep(0.1)
      return rows
  (row,) = run(body())
  assert row['state'] == storage_lib.ABANDONED and row['stored'] and row['num_steps'] == 3


def test_spool_keeps_whole_records_and_late_keys(tmp_path):
  """Spooled chunks read back as the StepData written, the keys of a step spooled before its
  action was known come from the next chunk, and a torn last record is dropped."""
  import dm_env  # pylint: disable=g-import-not-at-top
  from envlogger import step_data  # pylint: disable=g-import-not-at-top
  from rlds_suite.creator import spool  # pylint: disable=g-import-not-at-top

  def step(t, keys):
    kind = dm_env.StepType.FIRST if t == 0 else dm_env.StepType.MID
    timestep = dm_env.TimeStep(kind, None if t == 0 else float(t), None if t == 0 else 1.0,
                               {'pixels': np.full((2, 2, 3), t, np.uint8), 'pos': np.float32(t)})
    return step_data.StepData(timestep, None if t == 0 else np.int64(t % 2),
                              {'keys': keys, 'wall_time': np.float64(100 + t)})
  path = spool.path(str(tmp_path), 'e' * 32)
  spool.append(path, [step(0, 'left'), step(1, '')], None)
  spool.append(path, [step(2, 'right')], 'space')
  spool.append(path, [step(3, '')], None)
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) - 3)  # The process died writing the last record.
  read = spool.read(path, 'keys')
  assert len(read) == 3
  assert [s.custom_data['keys'] for s in read] == ['left', 'space', 'right']
  assert read[0].action is None and read[0].timestep.reward is None and read[0].timestep.first()
  assert int(read[2].action) == 0 and float(read[2].timestep.reward) == 2.0
  np.testing.assert_array_equal(read[1].timestep.observation['pixels'], np.full((2, 2, 3), 1))
  assert read[2].timestep.observation['pos'].dtype == np.float32
  assert float(read[1].custom_data['wall_time']) == 101.0
