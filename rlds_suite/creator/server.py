"""The creator's web server (aiohttp): HTTP/JSON for studies, episodes, replay and downloads, one
WebSocket per play session, and the static page.

Access: the designer token (from the command line, or generated and printed at start) is sent as
`Authorization: Bearer TOKEN`; it alone may create, edit, start/stop, delete and download studies
and see every episode. A player enrols through the study link (`/play/ID?join=CODE`, the code is
per study), gets a token of their own (only its hash is stored) and may only play that study and
replay and annotate their own episodes.
"""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import logging
import os
import secrets
import shutil
import tempfile
import time
from typing import Any, Awaitable, Callable, Optional

from aiohttp import web
import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.creator import catalog
from rlds_suite.creator import export as export_lib
from rlds_suite.creator import frames as frames_lib
from rlds_suite.creator import keymaps
from rlds_suite.creator import recorder as recorder_lib
from rlds_suite.creator import schemas
from rlds_suite.creator import sessions
from rlds_suite.creator import spool
from rlds_suite.creator import storage as storage_lib

# Where the page's files really are: under Bazel (runfiles) each file is a link into the source
# tree, which a static route that follows no links would refuse.
STATIC_DIR = os.path.dirname(os.path.realpath(
    os.path.join(os.path.dirname(__file__), 'static', 'index.html')))
_log = logging.getLogger(__name__)
_CONTEXT = web.AppKey('context', sessions.Context)
_TOKEN = web.AppKey('designer_token', str)
_REPLAYS = web.AppKey('replays', dict)
_CLOSING = web.AppKey('closing', set)
_REPLAY_CACHE = 8  # Decoded episodes kept for replay.


def create_app(data_dir: str, *, designer_token: str, db_url: Optional[str] = None,
               pause_timeout: float = 300.0, timings: Optional[list] = None,
               spool_seconds: float = 1.0) -> web.Application:
  """The application; storage and recorder open now, rendering is initialised, and the database
  is reconciled with the datasets (episodes whose steps are on disk are stored, those with
  spooled steps recorded as ABANDONED, unfinished others ABANDONED)."""
  if len(designer_token) < 16:
    raise errors.SchemaError('the designer token needs at least 16 characters', field='token')
  data_dir = os.path.abspath(data_dir)
  os.makedirs(data_dir, exist_ok=True)
  sessions.prepare_rendering()
  db = storage_lib.Storage(db_url or storage_lib.Storage.default_url(data_dir))

  def failed(ids, error):
    _log.error('episodes %s were not recorded: %s', ids, error)
    for episode_id in ids:
      db.set_state(episode_id, storage_lib.ABANDONED)

  recorder = recorder_lib.Recorder(db.mark_stored, failed)
  context = sessions.Context(db, recorder, data_dir, pause_timeout, timings, spool_seconds)
  reconcile(context)
  app = web.Application(middlewares=[_errors_as_json], client_max_size=1 << 20)
  app[_CONTEXT] = context
  app[_TOKEN] = designer_token
  app[_REPLAYS] = {}
  app[_CLOSING] = set()
  app.on_cleanup.append(_close)
  page = _page
  app.add_routes([
      web.get('/', page), web.get('/play/{study_id:\\d+}', page),
      web.get('/replay/{episode_id:[0-9a-f]{32}}', page),
      web.get('/api/studies', _list_studies), web.post('/api/studies', _create_study),
      web.get('/api/studies/{study_id:\\d+}', _get_study),
      web.put('/api/studies/{study_id:\\d+}', _update_study),
      web.delete('/api/studies/{study_id:\\d+}', _delete_study),
      web.get('/api/studies/{study_id:\\d+}/public', _public_study),
      web.post('/api/studies/{study_id:\\d+}/enroll', _enroll),
      web.get('/api/whoami', _whoami),
      web.get('/api/environments', _environments),
      web.post('/api/environments/check', _check_environment),
      web.get('/api/episodes', _list_episodes),
      web.get('/api/episodes/{episode_id:[0-9a-f]{32}}', _get_episode),
      web.get('/api/episodes/{episode_id:[0-9a-f]{32}}/steps', _episode_steps),
      web.get('/api/episodes/{episode_id:[0-9a-f]{32}}/frames/{t:\\d+}', _episode_frame),
      web.post('/api/episodes/{episode_id:[0-9a-f]{32}}/annotate', _annotate),
      web.post('/api/download', _download),
      web.get('/ws/play/{study_id:\\d+}', _play),
  ])
  app.router.add_static('/static/', STATIC_DIR, follow_symlinks=False)
  return app


def reconcile(context: sessions.Context) -> dict[str, int]:
  """Marks what the datasets hold as stored, records the spooled steps of episodes that were in
  flight (ABANDONED with them), and marks unfinished episodes without steps ABANDONED."""
  db, data_dir = context.db, context.data_dir
  stored: set[str] = set()
  for dataset in {r['dataset'] for r in db.episodes(None)}:
    stored |= recorder_lib.stored_episode_ids(os.path.join(data_dir, dataset), salvage=True)
  recovered = {}
  for row in db.unfinished():
    path = spool.path(context.spool_dir, row['id'])
    if row['id'] not in stored and os.path.exists(path):
      try:
        recovered[row['id']] = _record_spooled(context, row, path)
      except Exception as e:  # pylint: disable=broad-except
        _log.error('the spooled steps of episode %s could not be recorded: %s', row['id'], e)
  counts = db.reconcile(stored, {k: v for k, v in recovered.items() if v})
  if os.path.isdir(context.spool_dir):
    for name in os.listdir(context.spool_dir):  # Recorded, or of episodes that are over.
      os.remove(os.path.join(context.spool_dir, name))
  return counts


def _record_spooled(context: sessions.Context, row: dict[str, Any], path: str) -> int:
  """Records an episode from its spool file (truncated where the spool ends); its step count
  (0 when the spool holds no action)."""
  steps = spool.read(path, recorder_lib.KEYS)
  if len(steps) < 2:
    return 0
  study = context.db.study(row['study_id'])
  env_row = context.db.environment(row['study_id'], row['environment_id'])
  env = sessions.open_environment(env_row)
  try:
    config = sessions.dataset_config(context, study, env_row, env)
  finally:
    sessions.close_environment(env)
  if os.path.join(context.data_dir, row['dataset']) != config.directory:
    raise errors.SchemaError('the environment changed since the episode was played',
                             path=row['dataset'])
  context.recorder.submit(config, recorder_lib.PlayedEpisode(row['id'], row['player_id'],
                                                             steps)).result()
  return len(steps)


def new_token() -> str:
  return secrets.token_urlsafe(24)


async def _close(app: web.Application) -> None:
  for session in list(app[_CONTEXT].parked.values()):
    await session.close()
  if app[_CLOSING]:
    await asyncio.wait(list(app[_CLOSING]), timeout=60)
  await asyncio.get_running_loop().run_in_executor(None, app[_CONTEXT].recorder.close)
  app[_CONTEXT].db.close()


# Access.

def _bearer(request: web.Request) -> str:
  header = request.headers.get('Authorization', '')
  return header[7:].strip() if header.startswith('Bearer ') else ''


def _is_designer(request: web.Request, token: Optional[str] = None) -> bool:
  token = _bearer(request) if token is None else token
  return bool(token) and secrets.compare_digest(token, request.app[_TOKEN])


def _designer(request: web.Request) -> None:
  if not _is_designer(request):
    raise web.HTTPForbidden(text=json.dumps({'error': 'the designer token is required'}),
                            content_type='application/json')


def _who(request: web.Request, token: Optional[str] = None) -> Optional[dict[str, Any]]:
  """{'role': 'designer'} or {'role': 'player', **player}; None for anyone else."""
  token = _bearer(request) if token is None else token
  if _is_designer(request, token):
    return {'role': 'designer'}
  player = request.app[_CONTEXT].db.player_by_token(token) if token else None
  return None if player is None else {'role': 'player', **player}


def _may_see_episode(request: web.Request, row: dict[str, Any]) -> None:
  who = _who(request)
  if who is None or (who['role'] == 'player' and who['id'] != row['player_id']):
    raise web.HTTPForbidden(text=json.dumps({'error': 'not your episode'}),
                            content_type='application/json')


@web.middleware
async def _errors_as_json(request: web.Request, handler: Callable[..., Awaitable[Any]]) -> Any:
  try:
    return await handler(request)
  except web.HTTPException:
    raise
  except Exception as e:  # pylint: disable=broad-except
    status, message = answer(e)
    if status >= 500:
      _log.exception('%s %s failed', request.method, request.path)
    return web.json_response({'error': message}, status=status)


def answer(error: BaseException) -> tuple[int, str]:
  """The HTTP status and the sentence for an error (never a Python class name)."""
  text = str(error).strip().strip("'\"")
  if isinstance(error, PermissionError):
    return 403, text
  if isinstance(error, errors.UnknownEnvironmentError):
    return 400, text
  if isinstance(error, LookupError):
    return 404, text
  if isinstance(error, (errors.RLDSSuiteError, ValueError, TypeError)):
    return 400, text
  return 500, 'the server failed to do this; the log says why'


async def _json(request: web.Request, schema: dict[str, Any], what: str) -> dict[str, Any]:
  """The request body, checked against `schema`."""
  try:
    data = json.loads(await request.text(), parse_constant=_no_constant)
  except (json.JSONDecodeError, UnicodeDecodeError) as e:
    raise errors.SchemaError(f'the request body is not JSON ({e})', field='body') from e
  return schemas.check_fields(data, schema, what)


def _no_constant(name: str) -> Any:
  raise errors.SchemaError(f'{name} is not a number JSON allows')


def _route_id(request: web.Request, key: str, what: str) -> int:
  return schemas.route_id(request.match_info[key], what)


def _db(request: web.Request) -> storage_lib.Storage:
  return request.app[_CONTEXT].db


async def _off(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
  """A database call, off the event loop that runs every player's session."""
  return await asyncio.get_running_loop().run_in_executor(
      None, functools.partial(fn, *args, **kwargs))


# Pages.

async def _page(request: web.Request) -> web.FileResponse:
  return web.FileResponse(os.path.join(STATIC_DIR, 'index.html'),
                          headers={'Cache-Control': 'no-store'})


# Studies.

async def _list_studies(request: web.Request) -> web.Response:
  _designer(request)
  return web.json_response(await _off(_db(request).studies))


async def _checked_study(request: web.Request, current: Optional[dict[str, Any]]) -> dict[str, Any]:
  """The study body, each new or changed environment built once (an unknown spec, a wrong option
  or a missing key map is refused now, not when people play)."""
  data = await _json(request, schemas.STUDY, 'study')
  if current is None:
    missing = [k for k in ('name', 'environments') if k not in data]
    if missing:
      raise errors.SchemaError(f'a new study needs {" and ".join(missing)}', field='study')
  known = {e['id']: e for e in (current or {}).get('environments', [])}
  for index, env in enumerate(data.get('environments', [])):
    before = known.get(env.get('id'))
    if before is None or (before['spec'], before['options'], before['keymap']) != (
        env['spec'], env.get('options') or {}, env.get('keymap')):
      try:
        await _off(_try_environment, env['spec'], env.get('options') or {}, env.get('keymap'))
      except (errors.RLDSSuiteError, ValueError, TypeError) as e:
        problem = e.problem if isinstance(e, errors.RLDSSuiteError) else answer(e)[1]
        raise errors.SchemaError(f'environment {index + 1}: {problem}') from e
  return data


def _try_environment(spec: str, options: dict[str, Any],
                     keymap: Optional[dict[str, Any]]) -> dict[str, Any]:
  """Builds the environment once: its controls and a preview frame (JPEG, base64), or an error."""
  if ':' not in spec:
    raise errors.SchemaError(f'{spec!r} is not a "family:name" environment spec', field='spec')
  env = sessions.open_environment({'spec': spec, 'options': options})
  try:
    controls = keymaps.for_environment(spec, env, keymap)
    display = frames_lib.display_path(env)
    timestep = env.reset()
    frame = frames_lib.frame_of(env, timestep, display)
    return {'spec': spec, 'options': options, 'keymap': controls.as_json(),
            'controls': controls.describe(),
            'preview': None if frame is None else 'data:image/jpeg;base64,' +
                       base64.b64encode(frames_lib.encode(frame)).decode(),
            'observation': frames_lib.describe(timestep.observation)[:500]}
  finally:
    sessions.close_environment(env)


async def _environments(request: web.Request) -> web.Response:
  """What envs.make offers here (families, names, options), for the new-study form."""
  _designer(request)
  return web.json_response(await _off(catalog.catalogue))


async def _check_environment(request: web.Request) -> web.Response:
  _designer(request)
  data = await _json(request, {**schemas.CHECK_ENVIRONMENT, 'keymap': schemas.optional(
      schemas.json_object)}, 'environment')
  return web.json_response(await _off(_try_environment, data['spec'], data['options'],
                                      data.get('keymap')))


async def _create_study(request: web.Request) -> web.Response:
  _designer(request)
  data = await _checked_study(request, None)
  return web.json_response(await _off(_db(request).create_study, data), status=201)


async def _get_study(request: web.Request) -> web.Response:
  _designer(request)
  return web.json_response(await _off(_db(request).study,
                                      _route_id(request, 'study_id', 'study')))


async def _update_study(request: web.Request) -> web.Response:
  _designer(request)
  study_id = _route_id(request, 'study_id', 'study')
  current = await _off(_db(request).study, study_id)
  data = await _checked_study(request, current)
  return web.json_response(await _off(_db(request).update_study, study_id, data))


async def _delete_study(request: web.Request) -> web.Response:
  _designer(request)
  study_id = _route_id(request, 'study_id', 'study')
  await _off(_db(request).delete_study, study_id)
  context = request.app[_CONTEXT]
  shutil.rmtree(os.path.join(context.data_dir, 'studies', str(study_id)), ignore_errors=True)
  return web.json_response({'deleted': study_id})


def _public(study: dict[str, Any]) -> dict[str, Any]:
  """What a player sees of a study."""
  return {'id': study['id'], 'name': study['name'], 'description': study['description'],
          'instructions': study['instructions'], 'active': study['active'],
          'environments': [{'id': e['id'], 'name': e['name'], 'spec': e['spec'],
                            'instructions': e['instructions']} for e in study['environments']]}


async def _public_study(request: web.Request) -> web.Response:
  study = await _off(_db(request).study, _route_id(request, 'study_id', 'study'))
  who = _who(request)
  allowed = (who is not None and (who['role'] == 'designer' or who['study_id'] == study['id'])) \
      or secrets.compare_digest(request.query.get('join', ''), study['join_code'])
  if not allowed:
    raise PermissionError('open the study link, or enrol first')
  return web.json_response(_public(study))


async def _enroll(request: web.Request) -> web.Response:
  study_id = _route_id(request, 'study_id', 'study')
  data = await _json(request, schemas.ENROLL, 'enrolment')
  player, token = await _off(_db(request).enroll, study_id, data.get('join', ''), data['name'])
  return web.json_response({'player': player, 'token': token}, status=201)


async def _whoami(request: web.Request) -> web.Response:
  who = _who(request)
  if who is None:
    raise PermissionError('unknown token')
  return web.json_response({k: v for k, v in who.items() if k != 'token_hash'})


# Episodes.

async def _list_episodes(request: web.Request) -> web.Response:
  who = _who(request)
  if who is None:
    raise PermissionError('a designer or player token is required')
  query = request.query
  study_id = schemas.query_id(query.get('study'), 'study')
  player_ids = [schemas.query_id(p, 'player') for p in query.getall('player', [])]
  states = query.getall('state', [])
  unknown = sorted(set(states) - set(storage_lib.STATES))
  if unknown:
    raise errors.SchemaError(f'unknown states {unknown[:5]}; known: {", ".join(storage_lib.STATES)}',
                             field='state')
  if who['role'] == 'player':
    study_id, player_ids = who['study_id'], [who['id']]
  rows = await _off(_db(request).episodes,
      study_id, environment_id=schemas.query_id(query.get('environment'), 'environment'),
      states=states or None, tags=query.getall('tag', []), player_ids=player_ids or None)
  return web.json_response(rows)


async def _get_episode(request: web.Request) -> web.Response:
  row = await _off(_db(request).episode, request.match_info['episode_id'])
  _may_see_episode(request, row)
  return web.json_response(row)


async def _recorded(request: web.Request, row: dict[str, Any]) -> dict[str, Any]:
  """The stored episode as numpy (cached: replay asks for its frames one by one)."""
  cache = request.app[_REPLAYS]
  if row['id'] not in cache:
    if not row['stored']:
      raise LookupError(f'episode {row["id"]} has no stored steps (state {row["state"]})')
    context = request.app[_CONTEXT]
    directory = os.path.join(context.data_dir, row['dataset'])
    found = await _off(recorder_lib.read_episodes, directory, [row['id']])
    if row['id'] not in found:  # In the shard being written: complete it first.
      await _off(context.recorder.publish, directory)
      found = await _off(recorder_lib.read_episodes, directory, [row['id']])
    if row['id'] not in found:
      raise LookupError(f'episode {row["id"]} is not in {row["dataset"]}')
    while len(cache) >= _REPLAY_CACHE:
      cache.pop(next(iter(cache)))
    cache[row['id']] = found[row['id']]
  return cache[row['id']]


async def _episode_steps(request: web.Request) -> web.Response:
  """Per step: action, reward, the keys, flags, wall time; whether frames can be fetched."""
  row = await _off(_db(request).episode, request.match_info['episode_id'])
  _may_see_episode(request, row)
  steps = (await _recorded(request, row))[fields.STEPS]
  n = len(steps[fields.IS_FIRST])
  image = _replay_image(steps)
  out = {'episode': row, 'num_steps': n, 'has_frames': image is not None,
         'action': np.asarray(steps[fields.ACTION]).tolist(),
         'reward': np.asarray(steps[fields.REWARD], np.float64).tolist(),
         'is_terminal': np.asarray(steps[fields.IS_TERMINAL]).tolist(),
         'is_last': np.asarray(steps[fields.IS_LAST]).tolist()}
  if recorder_lib.KEYS in steps:
    out['keys'] = [k.decode() for k in steps[recorder_lib.KEYS]]
  if recorder_lib.WALL_TIME in steps:
    out['wall_time'] = np.asarray(steps[recorder_lib.WALL_TIME]).tolist()
  if image is None:
    out['observation'] = [frames_lib.describe(_row(steps[fields.OBSERVATION], t)) for t in range(n)]
  return web.json_response(out)


def _row(value: Any, index: int) -> Any:
  if isinstance(value, dict):
    return {k: _row(v, index) for k, v in value.items()}
  return value[index]


def _replay_image(steps: dict[str, Any]) -> Optional[Any]:
  """The recorded frame, else an image observation; None if neither."""
  if recorder_lib.FRAME in steps:
    return steps[recorder_lib.FRAME]
  observation = steps[fields.OBSERVATION]
  candidates = observation.values() if isinstance(observation, dict) else [observation]
  return next((np.asarray(c) for c in candidates
               if np.asarray(c).dtype == np.uint8 and np.asarray(c).ndim in (3, 4)), None)


async def _episode_frame(request: web.Request) -> web.Response:
  row = await _off(_db(request).episode, request.match_info['episode_id'])
  _may_see_episode(request, row)
  image = _replay_image((await _recorded(request, row))[fields.STEPS])
  t = int(request.match_info['t'])
  if image is None or t >= len(image):
    raise LookupError(f'no frame {t}')
  return web.Response(body=frames_lib.encode(image[t]), content_type=frames_lib.JPEG,
                      headers={'Cache-Control': 'private, max-age=3600'})


async def _annotate(request: web.Request) -> web.Response:
  row = await _off(_db(request).episode, request.match_info['episode_id'])
  _may_see_episode(request, row)
  data = await _json(request, schemas.ANNOTATE, 'annotation')
  return web.json_response(await _off(_db(request).annotate,
      row['id'], add_tags=data['add_tags'], remove_tags=data['remove_tags'],
      notes=data.get('notes'), add_step_tags=data['add_step_tags'],
      remove_step_tags=data['remove_step_tags']))


async def _download(request: web.Request) -> web.StreamResponse:
  """Body: {"study_id", "environment_id"?, "states"?, "tags"?, "player_ids"?, "strip_metadata"?,
  "end_tags"?, "step_tag_fields"?, "format": "zip" (default) | "directory"}. A zip comes back as
  the response; a directory is written under DATA_DIR/exports and its path returned."""
  _designer(request)
  data = await _json(request, schemas.DOWNLOAD, 'download')
  if 'study_id' not in data:
    raise errors.SchemaError('say which study: "study_id"', field='download')
  selection = export_lib.Selection(
      study_id=data['study_id'], environment_id=data.get('environment_id'),
      states=tuple(data.get('states') or (storage_lib.COMPLETED,)),
      tags=tuple(data.get('tags') or ()), player_ids=tuple(data.get('player_ids') or ()))
  unknown = set(selection.states) - set(storage_lib.STATES)
  if unknown:
    raise errors.SchemaError(f'unknown states {sorted(unknown)}', field='states')
  options = export_lib.ExportOptions(strip_metadata=data['strip_metadata'],
                                     end_tags=tuple(data.get('end_tags') or ()),
                                     step_tag_fields=data['step_tag_fields'])
  context = request.app[_CONTEXT]
  loop = asyncio.get_running_loop()
  stamp = time.strftime('%Y%m%d-%H%M%S')
  if data['format'] == 'directory':
    out_dir = os.path.join(context.data_dir, 'exports',
                           f'study{selection.study_id}-{stamp}-{secrets.token_hex(3)}')
    os.makedirs(os.path.dirname(out_dir), exist_ok=True)
    result = await loop.run_in_executor(None, export_lib.export, context.db, context.data_dir,
                                        out_dir, selection, options, context.recorder.publish)
    return web.json_response({'directories': result.directories, 'episodes': result.episode_ids,
                              'dropped': result.dropped})
  with tempfile.TemporaryDirectory(dir=context.data_dir, prefix='.download-') as staging:
    zip_path = os.path.join(staging, 'download.zip')
    result = await loop.run_in_executor(None, export_lib.export_zip, context.db, context.data_dir,
                                        zip_path, selection, options, context.recorder.publish)
    with open(zip_path, 'rb') as f:
      body = f.read()
  return web.Response(body=body, content_type='application/zip', headers={
      'Content-Disposition': f'attachment; filename="study{selection.study_id}-{stamp}.zip"',
      'X-Episodes': ','.join(result.episode_ids), 'X-Dropped': ','.join(result.dropped)})


# Play.

async def _play(request: web.Request) -> web.WebSocketResponse:
  """The play loop: the first message is {"type": "hello", "token": PLAYER_OR_DESIGNER_TOKEN}.
  Every message is answered (an error in words for a malformed one); the socket stays open."""
  context = request.app[_CONTEXT]
  study = await _off(context.db.study, _route_id(request, 'study_id', 'study'))
  # No permessage-deflate: frames are JPEG already, deflating them again costs time for nothing.
  ws = web.WebSocketResponse(heartbeat=30, max_msg_size=1 << 16, compress=False)
  await ws.prepare(request)
  who = None
  while who is None:
    try:
      message = await ws.receive(timeout=30)
    except asyncio.TimeoutError:
      await ws.close(code=4001, message=b'expected {"type": "hello", "token": ...}')
      return ws
    if message.type == web.WSMsgType.BINARY:
      await ws.send_json({'type': 'error', 'error': 'messages are JSON text'})
      continue
    if message.type != web.WSMsgType.TEXT:
      return ws  # Closed.
    try:
      hello = schemas.message(_parse(message.data))
      if hello['type'] != 'hello':
        raise errors.SchemaError('say hello first: {"type": "hello", "token": ...}', field='type')
      who = await _off(_who, request, hello['token'])
      if who is None or (who['role'] == 'player' and who['study_id'] != study['id']):
        await ws.send_json({'type': 'error', 'error': 'not enrolled in this study'})
        await ws.close(code=4003)
        return ws
    except (errors.RLDSSuiteError, ValueError) as e:
      await ws.send_json({'type': 'error', 'error': answer(e)[1]})
  player = who if who['role'] == 'player' else await _off(_designer_player, context.db,
                                                          study['id'])
  session = context.parked.pop((study['id'], player['id']), None)
  if session is None:
    session = sessions.PlaySession(context, study, player)
  session.attach(ws.send_bytes, ws.send_json)
  try:
    async for message in ws:
      if message.type != web.WSMsgType.TEXT:
        continue
      try:
        await session.handle(_parse(message.data))
      except Exception as e:  # pylint: disable=broad-except
        status, text = answer(e)
        if status >= 500:
          _log.exception('a play message failed')
        if not ws.closed:
          await ws.send_json({'type': 'error', 'error': text})
  finally:
    # aiohttp cancels the handler when the connection drops: the session still has to be parked
    # or closed (its episode saved), so that runs as its own task, which shutdown waits for.
    closing = asyncio.ensure_future(session.disconnected())
    request.app[_CLOSING].add(closing)
    closing.add_done_callback(request.app[_CLOSING].discard)
    await asyncio.shield(closing)
  return ws


def _parse(text: str) -> Any:
  try:
    return json.loads(text, parse_constant=_no_constant)
  except json.JSONDecodeError as e:
    raise errors.SchemaError(f'the message is not JSON ({e})', field='message') from e


def _designer_player(db: storage_lib.Storage, study_id: int) -> dict[str, Any]:
  """The designer plays as the study's 'designer' player (created on first use)."""
  for row in db.players(study_id):
    if row['name'] == 'designer':
      return row
  return db.add_player(study_id, 'designer')


def serve(data_dir: str, *, host: str = '127.0.0.1', port: int = 8080,
          designer_token: Optional[str] = None, db_url: Optional[str] = None,
          pause_timeout: float = 300.0, print_fn: Callable[[str], None] = print) -> None:
  """Runs the creator until interrupted; prints where the designer logs in."""
  token = designer_token or new_token()
  app = create_app(data_dir, designer_token=token, db_url=db_url, pause_timeout=pause_timeout)
  shown = '127.0.0.1' if host in ('0.0.0.0', '::') else host
  print_fn(f'rlds_suite creator: data in {os.path.abspath(data_dir)}')
  print_fn(f'designer: http://{shown}:{port}/#designer={token}')
  web.run_app(app, host=host, port=port, print=None)
