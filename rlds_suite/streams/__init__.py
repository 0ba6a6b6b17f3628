"""Multi-task step streams: dataset_configs -> one shuffled, sharded, mixed stream of batches.

    from rlds_suite import streams

    streams.register_dataset('random', 'gym', 'CartPole-v1', '/data/cartpole_random')
    stream = streams.stream([{'type': 'random'}], unit=streams.Transitions(), batch_size=256,
                            seed=0, env_cfg={'benchmark_name': 'gym', 'task_name': 'CartPole-v1'},
                            shuffle=streams.Shuffle(memory_budget=1 << 30))
    for batch in streams.as_numpy(stream):  # dicts of numpy arrays with a leading axis of 256
      ...

Modules: `catalog` (entries -> datasets), `reading` (serialized episodes parsed many at a time,
spec projection), `units` (steps, transitions, n-step, windows, target pairs), `pipeline`
(shuffle, shard, mix into blocks), `budget` (buffer sizes in bytes under a memory budget),
`cache` (decoded steps as memory-mapped columns), `exits` (blocks cut into batches: numpy or
tf.data).
"""

from rlds_suite.streams.catalog import CATALOG, Catalog, ResolvedDataset, register_dataset
from rlds_suite.streams.exits import Stream, as_numpy
from rlds_suite.streams.pipeline import (DATASET_INDEX, EPOCH, Exhaustion, Mix, Shuffle,
                                         load_dict_dataset, stream)
from rlds_suite.streams.reading import Projection
from rlds_suite.streams.units import (NStepTransitions, StepUnit, TargetPairs, Transitions, Unit,
                                      Windows)

__all__ = [
    'CATALOG', 'Catalog', 'ResolvedDataset', 'register_dataset', 'DATASET_INDEX', 'EPOCH',
    'Exhaustion', 'Mix', 'Shuffle', 'Stream', 'as_numpy', 'load_dict_dataset', 'stream', 'Projection',
    'NStepTransitions', 'StepUnit', 'TargetPairs', 'Transitions', 'Unit', 'Windows'
]
