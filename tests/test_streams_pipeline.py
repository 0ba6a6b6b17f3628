"""Streams end to end on small written datasets: values, shuffling, seeds, shards, checkpoints, mixing."""


import numpy as np
import pytest
import tensorflow as tf

from rlds_suite.core import episodes
from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite import streams
from rlds_suite.streams import reference_units as reference

from tests import streams_data

ONE_EPOCH = streams.Mix(exhaustion=streams.Exhaustion.STOP)


@pytest.fixture(scope='module')
def data(tmp_path_factory):
  root = tmp_path_factory.mktemp('streams')
  eps = {'a': streams_data.id_episodes(0, 12, seed=1), 'b': streams_data.id_episodes(1, 5, seed=2),
         'wide': streams_data.id_episodes(2, 3, obs_size=5, seed=3)}
  dirs = {'a': streams_data.write(root, 'set_a', eps['a']),
          'b': streams_data.write(root, 'set_b', eps['b']),
          'wide': streams_data.write(root, 'set_wide', eps['wide'], obs_size=5)}
  return eps, dirs


def collect(dataset):
  batches = list(streams.as_numpy(dataset))
  return nested.concat_rows(batches), len(batches)


# Episodes shuffled by permuting each parse group (groups of many short episodes) or, where a
# group holds fewer episodes than Shuffle.episodes, in a buffer of whole episodes.
@pytest.mark.parametrize('episodes_shuffled', [3, 100_000])
def test_steps_arrive_once_with_their_values(data, episodes_shuffled):
  eps, dirs = data
  got, _ = collect(streams.stream([dirs['a']], batch_size=4, seed=0, mix=ONE_EPOCH,
                                  drop_remainder=False,
                                  shuffle=streams.Shuffle(episodes_shuffled, 8)))
  expected = {streams_data.ids(e.steps[fields.OBSERVATION])[t]: (e, t)
              for e in eps['a'] for t in range(e.num_steps)}
  got_ids = streams_data.ids(got[fields.OBSERVATION])
  assert sorted(got_ids) == sorted(expected)
  for row, key in enumerate(got_ids):
    episode, t = expected[key]
    for name in (fields.ACTION, fields.REWARD, fields.DISCOUNT, fields.IS_TERMINAL, fields.IS_LAST):
      np.testing.assert_array_equal(got[name][row], episode.steps[name][t], err_msg=name)
  assert np.all(got[streams.EPOCH] == 0) and np.all(got[streams.DATASET_INDEX] == 0)


def test_transitions_match_reference_and_never_cross_episodes(data):
  eps, dirs = data
  got, _ = collect(streams.stream([dirs['a']], unit=streams.Transitions(), batch_size=5, seed=3,
                                  mix=ONE_EPOCH, drop_remainder=False))
  expected = {}
  for e in eps['a']:
    tr = episodes.to_transitions(e.steps)
    for i, key in enumerate(streams_data.ids(tr[fields.OBSERVATION])):
      expected[key] = {k: v[i] for k, v in tr.items()}
  got_ids = streams_data.ids(got[fields.OBSERVATION])
  assert sorted(got_ids) == sorted(expected)
  for row, key in enumerate(got_ids):
    for name, value in expected[key].items():
      np.testing.assert_array_equal(got[name][row], value, err_msg=name)
  nxt = np.asarray(streams_data.ids(got[fields.NEXT_OBSERVATION]))
  assert np.all(nxt[:, 1] == np.asarray(got_ids)[:, 1])  # Same episode.
  assert np.all(nxt[:, 2] == np.asarray(got_ids)[:, 2] + 1)


def test_windows_and_pairs_through_the_stream(data):
  eps, dirs = data
  got, _ = collect(streams.stream([dirs['b']], unit=streams.Windows(3, pad=True), batch_size=2,
                                  seed=0, mix=ONE_EPOCH, drop_remainder=False))
  assert len(got[reference.MASK]) == sum(e.num_steps for e in eps['b'])
  assert got[reference.MASK].sum() == sum(
      reference.to_windows(e.steps, 3)[reference.MASK].sum() for e in eps['b'])
  pairs, _ = collect(streams.stream([dirs['b']], unit=streams.TargetPairs(2), batch_size=2, seed=0,
                                    mix=ONE_EPOCH, drop_remainder=False))
  context = np.asarray(streams_data.ids(pairs[reference.CONTEXT][fields.OBSERVATION]))
  target = np.asarray(streams_data.ids(pairs[reference.TARGET][fields.OBSERVATION]))
  assert np.all(context[:, 1] == target[:, 1]) and np.all(target[:, 2] - context[:, 2] == 2)


def test_seed_makes_the_stream_reproducible(data):
  _, dirs = data
  make = lambda seed: collect(streams.stream([dirs['a']], batch_size=4, seed=seed, mix=ONE_EPOCH,
                                             shuffle=streams.Shuffle(4, 16)))[0]
  first, again, other = make(7), make(7), make(8)
  np.testing.assert_array_equal(first[fields.OBSERVATION], again[fields.OBSERVATION])
  assert not np.array_equal(first[fields.OBSERVATION], other[fields.OBSERVATION])


def test_shuffle_none_keeps_file_order(data):
  eps, dirs = data
  got, _ = collect(streams.stream([dirs['a']], batch_size=3, shuffle=None, mix=ONE_EPOCH,
                                  drop_remainder=False))
  expected = np.concatenate([e.steps[fields.OBSERVATION] for e in eps['a']])
  np.testing.assert_array_equal(got[fields.OBSERVATION], expected)


@pytest.mark.parametrize('unit', [streams.StepUnit(), streams.Transitions()])
def test_shards_are_disjoint_with_equal_batch_counts(data, unit):
  eps, dirs = data
  results = [collect(streams.stream([dirs['a'], dirs['b']], unit=unit, batch_size=3, seed=5,
                                    num_shards=3, shard_index=i, mix=ONE_EPOCH))
             for i in range(3)]
  assert len({count for _, count in results}) == 1
  id_sets = [set(streams_data.ids(got[fields.OBSERVATION])) for got, _ in results]
  for i in range(3):
    for j in range(i + 1, 3):
      assert not id_sets[i] & id_sets[j]
    episodes_seen = {key[:2] for key in id_sets[i]}
    assert len(episodes_seen) <= 12 // 3 + 5 // 3 + 1


def test_iterator_state_saved_and_restored_with_checkpoint(data, tmp_path):
  _, dirs = data
  dataset = streams.stream([dirs['a'], dirs['b']], batch_size=4, seed=1,
                           shuffle=streams.Shuffle(3, 8), mix=streams.Mix(granularity=2))
  iterator = iter(dataset)
  checkpoint = tf.train.Checkpoint(iterator=iterator)
  for _ in range(5):
    next(iterator)
  path = checkpoint.save(str(tmp_path / 'ckpt'))
  after = [next(iterator)[fields.OBSERVATION].numpy() for _ in range(30)]
  checkpoint.restore(path)
  again = [next(iterator)[fields.OBSERVATION].numpy() for _ in range(30)]
  np.testing.assert_array_equal(np.stack(after), np.stack(again))


def test_uniform_mix_repeats_small_dataset_and_counts_its_epochs(data):
  eps, dirs = data
  got, _ = collect(streams.stream([dirs['a'], dirs['b']], batch_size=8, seed=2,
                                  mix=streams.Mix(granularity=1)).take(200))
  share = np.mean(got[streams.DATASET_INDEX] == 1)
  assert 0.4 < share < 0.6
  steps_b = sum(e.num_steps for e in eps['b'])
  from_b = got[streams.DATASET_INDEX] == 1
  assert got[streams.EPOCH][from_b].max() >= from_b.sum() // steps_b - 1 >= 1
  assert got[streams.EPOCH][~from_b].max() < got[streams.EPOCH][from_b].max()


def test_groups_spanning_passes_tag_each_unit_with_its_own_epoch(data):
  eps, dirs = data
  # Shuffle.episodes above a parse group: episodes shuffled in a buffer and parsed in groups that
  # hold many passes of this 5-episode dataset, so a group's units come from several epochs.
  stream = streams.stream([dirs['b']], batch_size=4, seed=3, shuffle=streams.Shuffle(100_000, 8))
  assert stream.sizes.datasets[0].group_episodes < stream.sizes.datasets[0].episodes
  steps = sum(e.num_steps for e in eps['b'])
  got, _ = collect(stream.take(3 * steps // 4))
  seen = {}
  for key, epoch in zip(streams_data.ids(got[fields.OBSERVATION]), got[streams.EPOCH]):
    seen.setdefault(key, []).append(int(epoch))
  assert all(len(set(epochs)) == len(epochs) for epochs in seen.values())  # Once per epoch.
  assert set(got[streams.EPOCH].tolist()) >= {0, 1, 2}


def test_weights(data):
  _, dirs = data
  got, _ = collect(streams.stream([dirs['a'], dirs['b']], batch_size=8, seed=2,
                                  mix=streams.Mix(weights=[3, 1], granularity=1)).take(200))
  assert 0.68 < np.mean(got[streams.DATASET_INDEX] == 0) < 0.82


def test_exhaustion_stop_and_drop(data):
  eps, dirs = data
  steps = [sum(e.num_steps for e in eps[k]) for k in ('a', 'b')]
  dropped, _ = collect(streams.stream(
      [dirs['a'], dirs['b']], batch_size=4, seed=0, drop_remainder=False,
      mix=streams.Mix(exhaustion=streams.Exhaustion.DROP, granularity=2)))
  assert np.bincount(dropped[streams.DATASET_INDEX]).tolist() == steps
  assert len(set(streams_data.ids(dropped[fields.OBSERVATION]))) == sum(steps)
  stopped, _ = collect(streams.stream(
      [dirs['a'], dirs['b']], batch_size=4, seed=0, drop_remainder=False,
      mix=streams.Mix(exhaustion=streams.Exhaustion.STOP, granularity=2)))
  counts = np.bincount(stopped[streams.DATASET_INDEX], minlength=2)
  assert counts[1] == steps[1] and counts[0] < steps[0]


def test_spec_mismatch_refused_unless_projected(data):
  _, dirs = data
  with pytest.raises(errors.SpecMismatchError, match='observation'):
    streams.stream([dirs['a'], dirs['wide']])
  got, _ = collect(streams.stream([dirs['a'], dirs['wide']], batch_size=4, seed=0,
                                  projection=streams.Projection.PAD,
                                  mix=streams.Mix(exhaustion=streams.Exhaustion.DROP)))
  mask = got[reference.PADDING_MASK][fields.OBSERVATION]
  narrow = got[streams.DATASET_INDEX] == 0
  assert got[fields.OBSERVATION].shape[1:] == (5,)
  assert np.all(mask[narrow] == [1, 1, 1, 0, 0]) and np.all(mask[~narrow])
  assert np.all(got[fields.OBSERVATION][narrow][:, 3:] == 0)
  with pytest.raises(errors.SpecMismatchError, match='no common spec'):
    streams.stream([dirs['a'], dirs['wide']], projection=streams.Projection.COMMON_KEYS)


def test_load_dict_dataset_is_the_il_representations_dict(data):
  eps, dirs = data
  got = streams.load_dict_dataset([dirs['a'], dirs['b']])
  expected = episodes.to_il_representations_dict(eps['a'] + eps['b'])
  assert set(got) == {'obs', 'next_obs', 'acts', 'dones', 'rews'}
  for key, value in expected.items():
    np.testing.assert_array_equal(got[key], value, err_msg=key)
  with pytest.raises(errors.SpecMismatchError):
    streams.load_dict_dataset([dirs['a'], dirs['wide']])


def test_mix_schedule_fills_blocks_in_chunks_by_weight():
  schedule = streams.pipeline.mix_schedule(1000, [3, 1], granularity=16, seed=0)
  assert schedule.shape == (streams.pipeline.SCHEDULE_BLOCKS, 2)
  assert np.all(schedule.sum(axis=1) == 1000)
  assert np.all((schedule % 16 == 0) | (schedule % 16 == 1000 % 16))
  assert 0.74 < schedule[:, 0].sum() / schedule.sum() < 0.76
  np.testing.assert_array_equal(schedule, streams.pipeline.mix_schedule(1000, [3, 1], 16, seed=0))


def test_every_batch_mixes_datasets_by_weight(data):
  _, dirs = data
  got, count = collect(streams.stream([dirs['a'], dirs['b']], batch_size=64, seed=4,
                                      shuffle=streams.Shuffle(4, 256),
                                      mix=streams.Mix(weights=[1, 3], granularity=4)).take(40))
  per_batch = got[streams.DATASET_INDEX].reshape(count, 64).mean(axis=1)
  assert 0.65 < per_batch.mean() < 0.85 and per_batch.min() > 0.3


def test_drop_goes_on_through_blocks_an_exhausted_dataset_would_have_filled(data):
  eps, dirs = data
  got, _ = collect(streams.stream(
      [dirs['a'], dirs['b']], batch_size=4, seed=1, drop_remainder=False,
      shuffle=streams.Shuffle(3, 8),
      mix=streams.Mix(exhaustion=streams.Exhaustion.DROP, granularity=4)))
  steps = [sum(e.num_steps for e in eps[k]) for k in ('a', 'b')]
  assert np.bincount(got[streams.DATASET_INDEX]).tolist() == steps


def test_episodes_of_a_parse_group_are_permuted_and_tagged_with_their_epoch(data):
  eps, dirs = data
  stream = streams.stream([dirs['a']], batch_size=1, seed=6, shuffle=streams.Shuffle(1, 1))
  assert stream.sizes.datasets[0].group_episodes >= len(eps['a'])  # One group per epoch.
  got, _ = collect(stream.take(3 * sum(e.num_steps for e in eps['a'])))
  keys = streams_data.ids(got[fields.OBSERVATION])
  orders = [[], [], []]
  for (_, episode, _), epoch in zip(keys, got[streams.EPOCH]):
    if not orders[epoch] or orders[epoch][-1] != episode:
      orders[epoch].append(episode)
  # Blocks of one unit: the stream is the episode order, each epoch every episode once.
  assert all(sorted(order) == list(range(len(eps['a']))) for order in orders)
  assert orders[0] != list(range(len(eps['a']))) and orders[0] != orders[1]
