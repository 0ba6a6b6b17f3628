"""write_episodes round trip: what is written reads back unchanged, in order."""

import numpy as np
import pytest

from rlds_suite.tfds import datasets
from rlds_suite.core import errors
from rlds_suite.tfds import features
from rlds_suite.core import fields
from rlds_suite.tfds import writing

from tests import streams_data


def test_round_trip(tmp_path):
  eps = streams_data.id_episodes(0, 3)
  directory = streams_data.write(tmp_path, 'roundtrip', eps)
  read = list(datasets.numpy_episodes(datasets.episodes(directory)))
  assert len(read) == 3
  for written, got in zip(eps, read):
    for key in fields.CORE_STEP_FIELDS:
      np.testing.assert_array_equal(got[fields.STEPS][key], written.steps[key])
  assert datasets.validate(directory).ok


def test_features_mismatch_is_a_schema_error(tmp_path):
  eps = streams_data.id_episodes(0, 1, obs_size=3)
  wrong = features.rlds_features(observation=features.tensor((5,), np.float32),
                                 action=features.tensor((2,), np.float32))
  with pytest.raises(errors.SchemaError):
    writing.write_episodes(eps, features=wrong, data_dir=tmp_path, name='wrong')


def _rss_anon() -> int:
  with open('/proc/self/status') as f:
    return next(int(line.split()[1]) << 10 for line in f if line.startswith('RssAnon:'))


@pytest.mark.skipif(writing._malloc_trim() is None, reason='not glibc')  # pylint: disable=protected-access
def test_free_heap_pages_go_back_to_the_system():
  """What made a long non-Beam build's memory creep: freed episode buffers stay resident in the C
  heap (glibc frees only its top). `release_free_heap` hands them back."""
  chunks = [b'\1' * (64 << 10) for _ in range(2048)]  # 128 MiB in the heap, pages written.
  pin = b'\2' * (64 << 10)  # Above them: the heap's top cannot shrink past it.
  del chunks
  before = _rss_anon()
  assert writing.release_free_heap()
  assert before - _rss_anon() > 64 << 20
  del pin


def test_each_completed_shard_hands_free_heap_back(tmp_path, monkeypatch):
  calls = []
  trim = writing._malloc_trim()  # pylint: disable=protected-access
  monkeypatch.setattr(writing, '_malloc_trim',
                      lambda: lambda pad: calls.append(pad) or (trim(pad) if trim else 0))
  eps = streams_data.id_episodes(0, 40, obs_size=256, min_len=50, max_len=60)
  feature_dict = features.rlds_features(observation=features.tensor((256,), np.float32),
                                        action=features.tensor((2,), np.float32))
  work = writing.WorkDir(tmp_path / 'ds' / '1.0.0', {'test': 1})
  writing.write_split(eps, features=feature_dict, work=work, split='train', workers=0,
                      shard_bytes=100 << 10)
  shards = work.progress.shards('train')
  assert len(shards) > 3
  assert len(calls) == len(shards)
  work.remove()
