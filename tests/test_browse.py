"""`rlds-suite browse`'s server through aiohttp's in-process test client: the episode list (sort,
filter, pages), statistics as `rlds-suite stats` computes them, episodes opened by id with their
frames, plots, flags and metadata, and a server that serves nothing else and writes nothing."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys

from aiohttp import test_utils
import numpy as np
from PIL import Image
import pytest

from rlds_suite import cli
from rlds_suite.browse import server
from rlds_suite.inspection import statistics
from rlds_suite.tfds import datasets
from tests import browse_data

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope='module')
def directory(tmp_path_factory):
  return browse_data.write(str(tmp_path_factory.mktemp('browse')), {'train': 9, 'test': 4})


def run(directory, check, split=None, cache_size=3):
  app = server.create_app(datasets.load_builder(directory), split, cache_size=cache_size,
                          index_in_background=False)

  async def main():
    async with test_utils.TestClient(test_utils.TestServer(app)) as client:
      return await check(client, app)

  return asyncio.run(main())


def identity(view):
  """(split code, episode) that the dataset wrote into the episode's observations."""
  state = next(s for s in view['series'] if s['name'] == 'observation/state')['values']
  return int(state[0][0]), int(state[0][1])


def test_list_sorts_filters_and_pages(directory):
  async def check(client, app):
    del app
    everything = await (await client.get('/api/episodes?limit=500')).json()
    assert everything['total'] == everything['matching'] == 13 and everything['complete']
    assert [e['id'] for e in everything['episodes']] == list(range(13))
    assert [e['split'] for e in everything['episodes']] == ['test'] * 4 + ['train'] * 9
    for row in everything['episodes']:  # Length, return and ending of the episode as written.
      e = row['metadata']['seed'] - 100
      assert row['length'] == 3 + e % 5 + 1
      assert row['return'] == pytest.approx((0.5 + e) * (3 + e % 5))
      assert row['ending'] == ('terminated' if e % 2 else 'truncated')
      assert row['metadata']['player'] == f'p{e % 3}'
    by_return = await (await client.get('/api/episodes?sort=return&order=desc&limit=500')).json()
    returns = [e['return'] for e in by_return['episodes']]
    assert returns == sorted(returns, reverse=True)
    terminated = await (await client.get('/api/episodes?ending=terminated&min_length=5')).json()
    assert terminated['matching'] == sum(1 for e in everything['episodes']
                                         if e['ending'] == 'terminated' and e['length'] >= 5)
    assert all(e['ending'] == 'terminated' and e['length'] >= 5 for e in terminated['episodes'])
    by_seed = await (await client.get('/api/episodes?sort=metadata.seed&order=desc&limit=500')).json()
    assert [e['metadata']['seed'] for e in by_seed['episodes']] == sorted(
        (e['metadata']['seed'] for e in everything['episodes']), reverse=True)
    by_player = await (await client.get('/api/episodes?sort=metadata.player&limit=500')).json()
    assert [e['metadata']['player'] for e in by_player['episodes']] == sorted(
        e['metadata']['player'] for e in everything['episodes'])
    info = await (await client.get('/api/dataset')).json()
    assert info['metadata_keys'] == ['player', 'seed'] and info['episodes'] == 13
    players = await (await client.get('/api/episodes?q=P1')).json()
    assert {e['metadata']['player'] for e in players['episodes']} == {'p1'}
    pages = [await (await client.get(f'/api/episodes?sort=length&offset={o}&limit=5')).json()
             for o in (0, 5, 10)]
    ids = [e['id'] for p in pages for e in p['episodes']]
    assert sorted(ids) == list(range(13)) and [len(p['episodes']) for p in pages] == [5, 5, 3]

  run(directory, check)


def test_statistics_are_what_stats_computes(directory):
  expected = statistics.compute(datasets.read_episodes(directory))

  async def check(client, app):
    del app
    got = await (await client.get('/api/statistics')).json()
    assert (got['episodes'], got['steps'], got['terminated'], got['truncated']) == (
        expected.episodes, expected.steps, expected.terminated, expected.truncated)
    assert sorted(got['lengths']) == sorted(expected.lengths)
    assert sorted(got['returns']) == pytest.approx(sorted(expected.returns))
    assert set(got['moments']) == set(expected.moments) == {'observation/state', 'action'}
    assert got['moments']['observation/state']['mean'] == pytest.approx(
        expected.moments['observation/state'].mean.tolist())
    assert got['table'].splitlines()[0] == statistics.summary_table(expected).splitlines()[0]

  run(directory, check)


def test_episode_view_frames_and_random_access(directory):
  async def check(client, app):
    listed = (await (await client.get('/api/episodes?limit=500')).json())['episodes']
    seen = set()
    for row in reversed(listed):  # Any order: each id opens the episode the list describes.
      view = await (await client.get(f'/api/episodes/{row["id"]}')).json()
      code, e = identity(view)
      assert code == browse_data.SPLIT_CODES[row['split']] and e == row['metadata']['seed'] - 100
      seen.add((code, e))
      n = view['length']
      assert n == row['length'] and view['return'] == row['return']
      assert [im['name'] for im in view['images']] == ['observation/pixels']
      state = next(s for s in view['series'] if s['name'] == 'observation/state')['values']
      assert [int(s[2]) for s in state] == list(range(n))
      assert next(s for s in view['series'] if s['name'] == 'action')['values'][:3] == [[0], [1], [2]]
      assert view['flags']['is_first'] == [1] + [0] * (n - 1)
      assert view['flags']['is_last'] == [0] * (n - 1) + [1]
      assert view['flags']['is_terminal'][-1] == (row['ending'] == 'terminated')
      assert view['step_metadata']['note'] == [f'e{e}t{t}' for t in range(n - 1)] + [f'e{e}end']
      png = await client.get(f'/api/episodes/{row["id"]}/frames/0/{n - 1}?format=png')
      assert png.content_type == 'image/png'
      pixels = np.asarray(Image.open(io.BytesIO(await png.read())))
      np.testing.assert_array_equal(pixels, browse_data.pixels(row['split'], e, n - 1, 16))
      jpeg = await client.get(f'/api/episodes/{row["id"]}/frames/0/0')
      assert jpeg.content_type == 'image/jpeg'
      assert Image.open(io.BytesIO(await jpeg.read())).size == (16, 16)
      assert len(app[server.CACHE]._episodes) <= 3  # pylint: disable=protected-access
    assert len(seen) == 13

  run(directory, check)


def test_split_option_numbers_that_split_only(directory):
  async def check(client, app):
    del app
    page = await (await client.get('/api/episodes?limit=500')).json()
    assert page['total'] == 9 and {e['split'] for e in page['episodes']} == {'train'}
    view = await (await client.get('/api/episodes/0')).json()
    assert identity(view)[0] == browse_data.SPLIT_CODES['train']
    assert (await client.get('/api/episodes/9')).status == 404

  run(directory, check, split='train')


def test_serves_only_the_dataset_and_its_page(directory):
  async def check(client, app):
    del app
    page = await client.get('/')
    assert page.status == 200 and 'rlds-suite browse' in await page.text()
    assert (await client.get('/static/player.js')).status == 200
    for path in ('/static/../server.py', '/static/%2e%2e/server.py', '/static/..%2fserver.py',
                 '/api/episodes/-1', '/api/episodes/abc', '/api/episodes/13',
                 '/api/episodes/99999999999999999999999', '/api/episodes/0/frames/1/0',
                 '/api/episodes/0/frames/0/999', '/api/episodes/0/frames/..%2f/0', '/etc/passwd'):
      response = await client.get(path)
      assert response.status in (403, 404), (path, response.status)
      assert 'tfrecord' not in await response.text()
    for query in ('sort=__class__', 'sort=metadata.steps', 'sort=metadata.nope', 'limit=0', 'limit=100000', 'offset=-1', 'min_length=x',
                  'ending=maybe'):
      response = await client.get(f'/api/episodes?{query}')
      assert response.status == 400, query
    for method in ('POST', 'PUT', 'DELETE'):
      assert (await client.request(method, '/api/episodes/0')).status == 405
    headers = (await client.get('/api/episodes')).headers
    assert headers['X-Content-Type-Options'] == 'nosniff'

  before = sorted(os.listdir(directory))
  run(directory, check)
  assert sorted(os.listdir(directory)) == before


def test_index_in_background_serves_pages_while_it_reads(directory):
  app = server.create_app(datasets.load_builder(directory))

  async def main():
    async with test_utils.TestClient(test_utils.TestServer(app)) as client:
      await asyncio.get_running_loop().run_in_executor(None, app[server.INDEX].done.wait, 60)
      return await (await client.get('/api/episodes')).json()

  page = asyncio.run(main())
  assert page['complete'] and page['indexed'] == 13 and page['error'] is None


def test_cli_refuses_what_it_cannot_browse_in_one_line(directory, tmp_path, capsys):
  assert cli.main(['browse', str(tmp_path / 'nothing_here')]) == 2
  assert cli.main(['browse', directory, '--split', 'validation']) == 2
  lines = capsys.readouterr().err.strip().splitlines()
  assert len(lines) == 2 and all(line.startswith('error: ') for line in lines)
  assert "has no split 'validation'" in lines[1]
  help_text = cli.make_parser().format_help()
  assert 'browse' in help_text


def test_memory_stays_flat_over_a_dataset_much_larger_than_the_cache(tmp_path):
  """A child process lists every page and opens every episode of a ~100 MB dataset (a 1.1 MB
  episode cache of 3): its RSS grows by far less than the dataset (see browse_memory_child)."""
  directory = browse_data.write(str(tmp_path), {'train': 36}, size=96, length=120, image=False)
  size = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory))
  out = subprocess.run([sys.executable, '-m', 'tests.browse_memory_child', directory], cwd=REPO,
                       capture_output=True, text=True, check=True,
                       env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'})
  result = json.loads(out.stdout.strip().splitlines()[-1])
  assert result['episodes_opened'] == 36 and result['frames'] == 36
  assert size > 90 * 2**20
  # Holding what was read would add ~all of the dataset (one episode is 1/36 of it, the cache 3/36):
  # the peak stays well under that, and the last third of the episodes costs no more than the first.
  assert result['growth'] * 2**20 < 0.25 * size, (result, size)
  third = len(result['trace']) // 3
  assert (max(result['trace'][-third:]) - max(result['trace'][:third])) * 2**20 < 0.1 * size, result
