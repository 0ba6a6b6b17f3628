"""TFDS features of recorded steps: declared from dm_env specs, or inferred from metadata values.

Observations, actions and rewards come with dm_env specs, so their features are declared from the
specs; an array is stored as an image only when its path is declared in `image_fields` (declare,
don't guess). Step and episode metadata (EnvLogger's `step_fn`/`episode_fn`) have no spec: their
features are inferred from the values of the first recorded episode, where a dimension whose size
varies within that episode becomes variable-length and strings become `Text`.

Tuples (gymnasium Tuple spaces) are stored as dicts keyed '0', '1', ... since TFDS has no tuple
feature; `tuples_as_dicts` applies the same mapping to values.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

import dm_env
from dm_env import specs as dm_specs
import numpy as np
import tensorflow_datasets as tfds

from rlds_suite.core import errors
from rlds_suite.tfds import features


def tuples_as_dicts(value: Any, structure: Any = None) -> Any:
  """Tuples/lists -> dicts keyed by position, following `structure` (a spec) when given.

  Without a structure, only tuples/lists holding structures become dicts; tuples of numbers stay
  arrays (metadata values such as `(x, y)`).
  """
  if structure is not None:
    if isinstance(structure, Mapping):
      return {str(k): tuples_as_dicts(value[k], s) for k, s in structure.items()}
    if isinstance(structure, (tuple, list)):
      return {str(i): tuples_as_dicts(value[i], s) for i, s in enumerate(structure)}
    return value
  if isinstance(value, Mapping):
    return {str(k): tuples_as_dicts(v) for k, v in value.items()}
  if isinstance(value, (tuple, list)) and any(
      isinstance(v, (Mapping, tuple, list, dm_specs.Array)) for v in value):
    return {str(i): tuples_as_dicts(v) for i, v in enumerate(value)}
  return value


def from_spec(spec: Any, path: str, image_fields: Iterable[str] = ()) -> Any:
  """A (nested) TFDS feature for a (nested) dm_env spec found at `path` ('observation/pixels')."""
  image_fields = set(image_fields)
  spec = tuples_as_dicts(spec)
  if isinstance(spec, Mapping):
    return {key: from_spec(value, f'{path}/{key}', image_fields) for key, value in spec.items()}
  if not isinstance(spec, dm_specs.Array):
    raise errors.SchemaError(f'expected a dm_env spec, got {type(spec).__name__}', field=path)
  shape, dtype = tuple(spec.shape), np.dtype(spec.dtype)
  if path in image_fields:
    if dtype != np.uint8 or len(shape) != 3 or shape[-1] not in (1, 3, 4):
      raise errors.SchemaError(
          f'declared as an image but spec is {dtype.name}{list(shape)}; images are uint8 '
          f'[height, width, 1|3|4]', field=path)
    return features.image(shape)
  return features.scalar(dtype) if shape == () else features.tensor(shape, dtype)


def from_values(values: Sequence[Any], path: str, image_fields: Iterable[str] = ()) -> Any:
  """A (nested) TFDS feature for the rows `values` of one field (e.g. a metadata key per step)."""
  image_fields = set(image_fields)
  values = [tuples_as_dicts(v) for v in values]
  first = values[0]
  if isinstance(first, Mapping):
    for value in values:
      if not isinstance(value, Mapping) or set(value) != set(first):
        raise errors.SchemaError(f'keys differ between rows: {sorted(first)} vs '
                                 f'{sorted(value) if isinstance(value, Mapping) else value!r}',
                                 field=path)
    return {key: from_values([v[key] for v in values], f'{path}/{key}', image_fields)
            for key in first}
  if isinstance(first, (str, bytes)):
    return features.text()
  arrays = [np.asarray(v) for v in values]
  dtypes = {a.dtype for a in arrays}
  ranks = {a.ndim for a in arrays}
  if len(ranks) != 1 or len({d.kind for d in dtypes}) != 1:
    raise errors.SchemaError(f'rows differ in rank or kind: {sorted(ranks)}, {sorted(map(str, dtypes))}; '
                             f'declare this field\'s feature explicitly', field=path)
  dtype = np.result_type(*dtypes)
  if dtype.kind in 'US':
    raise errors.SchemaError('arrays of strings are not supported; use one string per row',
                             field=path)
  shape = tuple(dims.pop() if len(dims) == 1 else None
                for dims in (set(sizes) for sizes in zip(*(a.shape for a in arrays))))
  if path in image_fields:
    return features.image(shape)
  if None in shape:
    return variable_length(shape, dtype)
  return features.scalar(dtype) if shape == () else features.tensor(shape, dtype)


def variable_length(shape: Sequence[Optional[int]], dtype: Any) -> tfds.features.Sequence:
  """Rows with variable dimensions as nested `Sequence`s: a `Tensor` with a None dimension cannot be
  serialized inside the steps `Dataset` (EnvLogger's TFDS backend crash, envlogger#14)."""
  shape = tuple(shape)
  last_variable = max(i for i, d in enumerate(shape) if d is None)
  fixed = shape[last_variable + 1:]
  feature = features.scalar(dtype) if not fixed else features.tensor(fixed, dtype)
  for size in reversed(shape[:last_variable + 1]):
    feature = tfds.features.Sequence(feature, length=size)
  return feature


def environment_step_features(observation_spec: Any, action_spec: Any, reward_spec: Any = None,
                              image_fields: Iterable[str] = ()) -> dict[str, Any]:
  """Observation, action and reward features of an environment's specs."""
  reward_spec = reward_spec if reward_spec is not None else dm_specs.Array((), np.float64)
  return {
      'observation': from_spec(observation_spec, 'observation', image_fields),
      'action': from_spec(action_spec, 'action', image_fields),
      'reward': from_spec(reward_spec, 'reward', image_fields),
  }


def environment_specs(env: dm_env.Environment) -> dict[str, Any]:
  return {'observation_spec': env.observation_spec(), 'action_spec': env.action_spec(),
          'reward_spec': env.reward_spec()}


def decoded_envlogger_specs(metadata: Optional[Mapping[str, Any]]) -> Optional[dict[str, Any]]:
  """The specs EnvLogger hands to a backend factory in metadata['environment_specs'], if any."""
  encoded = (metadata or {}).get('environment_specs')
  if encoded is None:
    return None
  from envlogger.converters import spec_codec  # pylint: disable=g-import-not-at-top
  decoded = spec_codec.decode_environment_specs(encoded)
  return {key: decoded.get(key) for key in ('observation_spec', 'action_spec', 'reward_spec')}
