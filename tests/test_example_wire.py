"""The hand-written tf.train.Example encoding is byte-for-byte what protobuf writes."""

from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np

from rlds_suite.core.episodes import Episode, EpisodeBatch
from rlds_suite.tfds import example_wire
from rlds_suite.recording import serialization
from rlds_suite.tfds import features
from tensorflow_datasets.proto import tf_example_pb2

INT64 = st.integers(-2**63, 2**63 - 1)


@settings(max_examples=60, deadline=None)
@given(ints=st.lists(st.one_of(st.integers(0, 300), INT64), max_size=20),
       floats=st.lists(st.floats(width=32), max_size=5),
       strings=st.lists(st.binary(max_size=300), max_size=4), key=st.text(min_size=1, max_size=200))
def test_entries_match_protobuf(ints, floats, strings, key):
  expected = tf_example_pb2.Example()
  feature_map = expected.features.feature
  feature_map[key].int64_list.value.extend(ints)
  feature_map[key + 'f'].float_list.value.extend(floats)
  feature_map[key + 'b'].bytes_list.value.extend(strings)
  packed_ints, offsets = example_wire.varints(np.array(ints, dtype=np.int64))
  assert offsets[-1] == len(packed_ints)
  ours = example_wire.example(b''.join([
      example_wire.entry(example_wire.key_field(key), example_wire.INT64_LIST,
                         example_wire.packed(packed_ints.tobytes())),
      example_wire.entry(example_wire.key_field(key + 'f'), example_wire.FLOAT_LIST,
                         example_wire.packed(np.array(floats, '<f4').tobytes())),
      example_wire.entry(example_wire.key_field(key + 'b'), example_wire.BYTES_LIST,
                         example_wire.bytes_list(strings)),
  ]))
  assert tf_example_pb2.Example.FromString(ours) == expected
  assert len(ours) == len(expected.SerializeToString())


def test_batch_serialization_equals_one_by_one():
  feature_dict = features.rlds_features(
      observation=features.tensor((3,), np.float32), action=features.scalar(np.int64),
      step_metadata={'note': features.text()}, episode_metadata={'seed': features.scalar(np.int64)})
  rng = np.random.default_rng(0)
  lengths = [1, 4, 2]
  episodes = []
  for index, n in enumerate(lengths):
    flags = np.zeros(n, bool)
    episodes.append(Episode(steps={
        'observation': rng.normal(size=(n, 3)).astype(np.float32),
        'action': rng.integers(-2**40, 2**40, n), 'reward': rng.normal(size=n).astype(np.float32),
        'discount': np.ones(n, np.float32), 'is_first': np.arange(n) == 0,
        'is_last': np.arange(n) == n - 1, 'is_terminal': flags,
        'note': np.array([f'{index}-{t}' for t in range(n)], dtype=object)},
        metadata={'seed': index}))
  serializer = serialization.EpisodeSerializer(feature_dict)
  steps = {key: np.concatenate([e.steps[key] for e in episodes]) for key in episodes[0].steps}
  batch = EpisodeBatch(steps=steps, starts=np.concatenate([[0], np.cumsum(lengths)]),
                       metadata=[e.metadata for e in episodes])
  assert serializer.serialize_batch(batch) == [serializer.serialize(e) for e in episodes]
  for episode, serialized in zip(episodes, serializer.serialize_batch(batch)):
    parsed = tf_example_pb2.Example.FromString(serialized).features.feature
    assert list(parsed['steps/action'].int64_list.value) == episode.steps['action'].tolist()
    assert [v.decode() for v in parsed['steps/note'].bytes_list.value] == list(episode.steps['note'])
