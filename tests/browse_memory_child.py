"""Child process of test_browse's memory test: serves a dataset with the browse app, lists every
page and opens every episode (and one frame of each), and prints anonymous RSS in MiB as JSON:
{baseline (after the index and the first episode), peak, growth, episodes_opened, frames}.

    python -m tests.browse_memory_child DATASET_DIR
"""

import asyncio
import json
import os
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')


def rss_mib() -> float:
  """Anonymous resident memory (heap, arenas, buffers: where read data would be held), MiB.
  Not VmRSS: that also counts shared-library pages, which fault in as code paths are first used
  (TensorFlow's alone are hundreds of MiB) and made the growth depend on what ran before."""
  with open('/proc/self/status') as f:
    return int(next(l for l in f if l.startswith('RssAnon:')).split()[1]) / 1024


async def main(directory: str) -> dict:
  # pylint: disable=g-import-not-at-top
  from rlds_suite.browse import memory
  memory.limit_malloc_arenas()  # As `rlds-suite browse` does, before TensorFlow starts.
  from aiohttp import test_utils
  from rlds_suite.browse import server
  from rlds_suite.tfds import datasets
  # pylint: enable=g-import-not-at-top
  app = server.create_app(datasets.load_builder(directory), index_in_background=False)
  async with test_utils.TestClient(test_utils.TestServer(app)) as client:
    await (await client.get('/api/episodes/0')).json()
    baseline = peak = rss_mib()
    opened = frames = offset = 0
    trace = []
    while True:
      page = await (await client.get(f'/api/episodes?offset={offset}&limit=10')).json()
      for row in page['episodes']:
        view = await (await client.get(f'/api/episodes/{row["id"]}')).json()
        opened += 1
        frame = await client.get(f'/api/episodes/{row["id"]}/frames/0/{view["length"] - 1}')
        frames += len(await frame.read()) > 0
        peak = max(peak, rss_mib())
        trace.append(round(rss_mib()))
      offset += 10
      if offset >= page['matching']:
        break
  return {'baseline': baseline, 'peak': peak, 'growth': peak - baseline,
          'episodes_opened': opened, 'frames': frames, 'trace': trace}


if __name__ == '__main__':
  print(json.dumps(asyncio.run(main(sys.argv[1]))))
