"""The browse server: read-only JSON, frames and the static page over one dataset.

Routes take integers only (episode ids, image field numbers, steps), so nothing but the dataset
and static/ can be reached; every route is a GET; the server binds 127.0.0.1 unless told.
"""

from __future__ import annotations

import asyncio
from concurrent import futures
import functools
import os
from typing import Any, Optional

from aiohttp import web
import tensorflow_datasets as tfds

from rlds_suite.browse import episodes as episodes_lib
from rlds_suite.browse import index as index_lib
from rlds_suite.creator import frames

# Where the page's files really are: under Bazel (runfiles) each file is a link into the source
# tree, which a static route that follows no links would refuse.
STATIC_DIR = os.path.dirname(os.path.realpath(
    os.path.join(os.path.dirname(__file__), 'static', 'index.html')))
MAX_PAGE = 500
INDEX = web.AppKey('index', index_lib.DatasetIndex)
CACHE = web.AppKey('cache', episodes_lib.EpisodeCache)
NAME = web.AppKey('name', str)
# Episodes are read and frames encoded in these threads (few: each thread's malloc arena keeps
# what it freed, and reads are one at a time behind the episode cache's lock anyway).
WORKERS = web.AppKey('workers', futures.ThreadPoolExecutor)


def create_app(builder: tfds.core.DatasetBuilder, split: Optional[str] = None, *,
               name: Optional[str] = None, cache_size: int = episodes_lib.CACHED_EPISODES,
               index_in_background: bool = True) -> web.Application:
  """The app over a prepared `builder`; its index is built in a thread from startup on (or
  before this returns, with `index_in_background=False`)."""
  index = index_lib.DatasetIndex(builder, split)
  if not index_in_background:
    index.build()
  app = web.Application(middlewares=[_read_only])
  app[INDEX] = index
  app[CACHE] = episodes_lib.EpisodeCache(index, cache_size)
  app[NAME] = name or builder.info.full_name
  app[WORKERS] = futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix='browse')
  app.on_cleanup.append(_stop_workers)
  if index_in_background:
    app.on_startup.append(_start_index)
  app.router.add_get('/', _page)
  app.router.add_get('/api/dataset', _dataset)
  app.router.add_get('/api/episodes', _episodes)
  app.router.add_get('/api/statistics', _statistics)
  app.router.add_get(r'/api/episodes/{id:\d{1,18}}', _episode)
  app.router.add_get(r'/api/episodes/{id:\d{1,18}}/frames/{field:\d{1,4}}/{step:\d{1,12}}', _frame)
  app.router.add_static('/static/', STATIC_DIR, follow_symlinks=False)
  return app


async def _start_index(app: web.Application) -> None:
  app[INDEX].start()


async def _stop_workers(app: web.Application) -> None:
  app[WORKERS].shutdown(wait=False)


@web.middleware
async def _read_only(request: web.Request, handler) -> web.StreamResponse:
  if request.method not in ('GET', 'HEAD'):
    raise web.HTTPMethodNotAllowed(request.method, ['GET'], text='this server is read-only')
  response = await handler(request)
  response.headers.setdefault('X-Content-Type-Options', 'nosniff')
  return response


async def _page(request: web.Request) -> web.StreamResponse:
  del request
  return web.FileResponse(os.path.join(STATIC_DIR, 'index.html'),
                          headers={'Cache-Control': 'no-store'})


async def _dataset(request: web.Request) -> web.Response:
  index = request.app[INDEX]
  info = index.builder.info
  return web.json_response({
      'name': request.app[NAME], 'full_name': info.full_name,
      'description': (info.description or '').strip()[:2000],
      'splits': [{'name': n, 'first': f, 'episodes': c} for n, f, c in index.ranges],
      'episodes': index.total, 'metadata_keys': index.metadata_keys,
      'features': str(info.features)[:20000]})


def _int(request: web.Request, key: str, default: Optional[int], low: int = 0,
         high: int = 2**62) -> Optional[int]:
  raw = request.query.get(key, '')
  if raw == '':
    return default
  try:
    value = int(raw)
  except ValueError:
    raise web.HTTPBadRequest(text=f'{key} must be an integer, got {raw[:40]!r}') from None
  if not low <= value <= high:
    raise web.HTTPBadRequest(text=f'{key} must be between {low} and {high}')
  return value


async def _episodes(request: web.Request) -> web.Response:
  query = request.query
  sort = query.get('sort', 'id')
  index = request.app[INDEX]
  if not index_lib.sortable(sort, index.metadata_keys):
    raise web.HTTPBadRequest(text=f'sort must be one of {", ".join(index_lib.SORT_KEYS)} or '
                             f'{index_lib.METADATA_SORT}KEY of an episode metadata field')
  ending = query.get('ending') or None
  if ending not in (None, index_lib.TERMINATED, index_lib.TRUNCATED):
    raise web.HTTPBadRequest(text='ending must be terminated or truncated')
  page = index.query(
      offset=_int(request, 'offset', 0), limit=_int(request, 'limit', 50, 1, MAX_PAGE),
      sort=sort, descending=query.get('order') == 'desc', ending=ending,
      text=query.get('q', '')[:200], min_length=_int(request, 'min_length', None),
      max_length=_int(request, 'max_length', None))
  return web.json_response(page)


async def _statistics(request: web.Request) -> web.Response:
  return web.json_response(request.app[INDEX].statistics_json())


async def _load(request: web.Request) -> tuple[int, dict[str, Any]]:
  """The episode the route names, read in a thread; 404 when there is none."""
  episode_id = int(request.match_info['id'])
  try:
    episode = await asyncio.get_running_loop().run_in_executor(
        request.app[WORKERS], request.app[CACHE].get, episode_id)
  except KeyError:
    raise web.HTTPNotFound(text=f'no episode {episode_id}') from None
  return episode_id, episode


async def _episode(request: web.Request) -> web.Response:
  episode_id, episode = await _load(request)
  split, _ = request.app[INDEX].locate(episode_id)
  summary = index_lib.summarize(episode_id, split, episode)
  body = await asyncio.get_running_loop().run_in_executor(
      request.app[WORKERS], episodes_lib.view, summary, episode)
  return web.json_response(body)


async def _frame(request: web.Request) -> web.Response:
  _, episode = await _load(request)
  mime = frames.PNG if request.query.get('format') == 'png' else frames.JPEG
  try:
    data = await asyncio.get_running_loop().run_in_executor(request.app[WORKERS], functools.partial(
        episodes_lib.frame, episode, int(request.match_info['field']),
        int(request.match_info['step']), mime))
  except IndexError:
    raise web.HTTPNotFound(text='no such image field or step') from None
  return web.Response(body=data, content_type=mime,
                      headers={'Cache-Control': 'private, max-age=3600'})


def serve(source: str, *, data_dir: Optional[str] = None, split: Optional[str] = None,
          host: str = '127.0.0.1', port: int = 8081) -> None:
  """Serves the dataset `source` (a directory or registered name) until interrupted."""
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  builder = datasets.load_builder(source, data_dir)
  app = create_app(builder, split, name=str(source))
  total = app[INDEX].total
  print(f'browsing {source} ({total} episode{"" if total == 1 else "s"}) at http://{host}:{port}/',
        flush=True)
  web.run_app(app, host=host, port=port, print=None)
