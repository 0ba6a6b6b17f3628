"""Recording rollouts into RLDS datasets: the EnvLogger backend, its shards and their recovery after
a crash, signals, `record`.

Imported lazily by `rlds_suite` (it pulls in envlogger).
"""

from rlds_suite.recording.backend import RLDSWriter
from rlds_suite.recording.record import RecordingInterrupted, random_policy, record

__all__ = ['RLDSWriter', 'RecordingInterrupted', 'random_policy', 'record']
