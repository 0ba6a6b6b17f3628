"""`rlds-suite browse` numbers episodes as `show --episode`, `stats` and `export` read them, also
where TFDS interleaves the shards (a dataset written shuffled), and opens each id as that episode."""

import json
import os

import pytest

from rlds_suite.browse import episodes as episodes_lib
from rlds_suite.browse import index as index_lib
from rlds_suite.tfds import datasets
from tests import browse_data


def identity(episode) -> tuple[int, int]:
  """(split code, episode) the dataset wrote into the episode's first observation."""
  state = episode['steps']['observation']['state'][0]
  return int(state[0]), int(state[1])


@pytest.fixture(scope='module')
def interleaved(tmp_path_factory) -> str:
  """Two splits of 20 episodes in one shard each, marked as written shuffled: TFDS then reads
  test+train 16 at a time from each shard in turn (test 0-15, train 0-15, test 16-19, ...)."""
  directory = browse_data.write(str(tmp_path_factory.mktemp('interleaved')),
                                {'train': 20, 'test': 20}, size=4, length=1)
  info_path = os.path.join(directory, 'dataset_info.json')
  with open(info_path) as f:
    info = json.load(f)
  info['disableShuffling'] = False
  with open(info_path, 'w') as f:
    json.dump(info, f)
  return directory


def test_browse_ids_are_show_ids(interleaved):
  builder = datasets.load_builder(interleaved)
  read = [identity(e) for e in datasets.read_episodes(builder)]  # What show, stats, export see.
  assert read[16] == (browse_data.SPLIT_CODES['train'], 0)  # Interleaved: not file order.
  index = index_lib.DatasetIndex(builder)
  index.build()
  assert index.error is None and len(index.episodes) == 40
  splits = {code: name for name, code in browse_data.SPLIT_CODES.items()}
  for row, (code, e) in zip(index.episodes, read):
    assert (row.split, row.metadata['seed'] - 100) == (splits[code], e)
  cache = episodes_lib.EpisodeCache(index)
  for episode_id in (0, 15, 16, 31, 32, 39):
    assert identity(cache.get(episode_id)) == read[episode_id]
    [shown] = datasets.read_episodes(builder, skip=episode_id, take=1)  # show --episode ID
    assert identity(shown) == read[episode_id]
  with pytest.raises(KeyError):
    cache.get(40)


def test_one_split_is_numbered_within_it(interleaved):
  builder = datasets.load_builder(interleaved)
  index = index_lib.DatasetIndex(builder, 'train')
  index.build()
  assert [row.metadata['seed'] - 100 for row in index.episodes] == list(range(20))
  assert identity(episodes_lib.EpisodeCache(index).get(7)) == (browse_data.SPLIT_CODES['train'], 7)
