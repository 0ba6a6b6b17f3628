"""Download: selected episodes of a study as RLDS datasets, one per study environment.

Each recorded episode goes back through the episode model (`core.episodes.to_episode`), so the
boundary rules stay in one place:
  * `end_tags`: the episode is cut at its first step carrying one of these step tags; that step
    becomes the last one and the episode is truncated (is_last, not is_terminal, discounts 1). A
    tag on the recorded last step changes nothing; a tag on the first step leaves no action, and
    the episode is left out (counted in `ExportResult.dropped`).
  * `step_tag_fields`: every step tag label of the selection becomes a boolean step field
    `tag:<label>`, True at the tagged steps.
  * `strip_metadata`: drops the creator's step metadata (keys, wall_time, frame).
Each episode carries, as episode metadata declared as TFDS features (`EPISODE_FEATURES`), its id,
player id and name, study id, environment spec and options (JSON), state, ending, tags, notes and
when it was started and last changed (seconds since the epoch, UTC). The dataset's metadata (TFDS
`metadata.json`) names the study, the environment spec and options, the filters and the export
options.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import shutil
import tempfile
import zipfile
from typing import Any, Callable, Mapping, Optional, Sequence

import numpy as np

from rlds_suite.core import errors
from rlds_suite.core import fields
from rlds_suite.core import nested
from rlds_suite.core.episodes import Ending, Episode, Trajectory, to_episode
from rlds_suite.creator import recorder
from rlds_suite.creator import storage as storage_lib

TAG_PREFIX = 'tag:'


def episode_features() -> dict[str, Any]:
  """The episode metadata of a download, beside `episode_id` and `player_id`."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  from rlds_suite.tfds import features as features_lib  # pylint: disable=g-import-not-at-top
  return {
      'player_name': features_lib.text('The name the player enrolled with.'),
      'study_id': features_lib.scalar(np.int64, 'The creator study.'),
      'environment_spec': features_lib.text('The envs.make spec, e.g. atari:Breakout.'),
      'environment_options': features_lib.text('The envs.make options, as JSON.'),
      'state': features_lib.text('COMPLETED, REJECTED, CANCELLED, ABANDONED or ENDED.'),
      'ending': features_lib.text('terminated, truncated or cancelled.'),
      'tags': tfds.features.Sequence(tfds.features.Text(), doc='Episode tags.'),
      'notes': features_lib.text('Notes written in the replay page.'),
      'created_time': features_lib.scalar(np.float64, 'When the episode started (s since epoch).'),
      'updated_time': features_lib.scalar(np.float64, 'When it last changed (s since epoch).'),
  }


def _episode_metadata(row: Mapping[str, Any], env: Mapping[str, Any]) -> dict[str, Any]:
  return {recorder.EPISODE_ID: row['id'], recorder.PLAYER_ID: np.int64(row['player_id']),
          'player_name': row.get('player_name', ''), 'study_id': np.int64(row['study_id']),
          'environment_spec': env['spec'],
          'environment_options': json.dumps(env['options'], sort_keys=True),
          'state': row['state'], 'ending': row['ending'] or '', 'tags': list(row['tags']),
          'notes': row['notes'], 'created_time': _seconds(row['created']),
          'updated_time': _seconds(row['updated'])}


def _seconds(iso_utc: str) -> np.float64:
  when = datetime.datetime.fromisoformat(iso_utc).replace(tzinfo=datetime.timezone.utc)
  return np.float64(when.timestamp())


@dataclasses.dataclass(frozen=True)
class ExportOptions:
  strip_metadata: bool = False
  end_tags: tuple[str, ...] = ()
  step_tag_fields: bool = True

  def as_json(self) -> dict[str, Any]:
    return {'strip_metadata': self.strip_metadata, 'end_tags': list(self.end_tags),
            'step_tag_fields': self.step_tag_fields}


@dataclasses.dataclass(frozen=True)
class Selection:
  """Which episodes: a study, optionally one environment, states (COMPLETED by default), episodes
  carrying all of `tags`, and players."""
  study_id: int
  environment_id: Optional[int] = None
  states: tuple[str, ...] = (storage_lib.COMPLETED,)
  tags: tuple[str, ...] = ()
  player_ids: tuple[int, ...] = ()

  def as_json(self) -> dict[str, Any]:
    return dataclasses.asdict(self) | {'states': list(self.states), 'tags': list(self.tags),
                                       'player_ids': list(self.player_ids)}


@dataclasses.dataclass
class ExportResult:
  directories: list[str]  # One TFDS version directory per environment with episodes.
  episode_ids: list[str]
  dropped: list[str]  # Cut before their first action.


def export(db: storage_lib.Storage, data_dir: str, out_dir: str, selection: Selection,
           options: ExportOptions = ExportOptions(),
           publish: Callable[[str], None] = lambda directory: None) -> ExportResult:
  """Writes the selected stored episodes under `out_dir` (which must not exist yet). `publish`
  is called with each source dataset directory before it is read (the server's recorder
  completes its open shard there)."""
  from rlds_suite.tfds import writing  # pylint: disable=g-import-not-at-top
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  for tag in selection.tags + options.end_tags:
    storage_lib.check_name(tag, 'tag')
  if os.path.exists(out_dir):
    raise errors.SchemaError('the export directory exists already', path=out_dir)
  study = db.study(selection.study_id)
  rows = [r for r in db.episodes(selection.study_id, environment_id=selection.environment_id,
                                 states=selection.states, tags=selection.tags,
                                 player_ids=selection.player_ids or None) if r['stored']]
  result = ExportResult([], [], [])
  by_dataset: dict[str, list[dict[str, Any]]] = {}
  for row in rows:
    by_dataset.setdefault(row['dataset'], []).append(row)
  for dataset, dataset_rows in sorted(by_dataset.items()):
    source = os.path.join(data_dir, dataset)
    publish(source)
    recorded = recorder.read_episodes(source, [r['id'] for r in dataset_rows])
    missing = [r['id'] for r in dataset_rows if r['id'] not in recorded]
    if missing:
      raise errors.SchemaError(f'episodes {missing} are marked stored but not in the dataset',
                               path=source)
    labels = sorted({label for r in dataset_rows for ls in r['step_tags'].values() for label in ls})
    tag_labels = labels if options.step_tag_fields else []
    env = next(e for e in study['environments'] if e['id'] == dataset_rows[0]['environment_id'])
    episodes = []
    for row in dataset_rows:
      episode = _episode(recorded[row['id']], row, options, tag_labels,
                         _episode_metadata(row, env))
      if episode is None:
        result.dropped.append(row['id'])
      else:
        episodes.append(episode)
        result.episode_ids.append(row['id'])
    if not episodes:
      continue
    source_features = tfds.builder_from_directory(source).info.features
    name = f'creator_study{study["id"]}_env{env["id"]}'
    directory = writing.write_episodes(
        episodes, features=_features(source_features, options, tag_labels),
        data_dir=out_dir, name=name,
        description=f'Study {study["name"]!r}, environment {env["spec"]}: played with rlds_suite '
                    f'creator.')
    tfds.core.MetadataDict({
        'study': {'id': study['id'], 'name': study['name'], 'description': study['description']},
        'environment': {'id': env['id'], 'name': env['name'], 'spec': env['spec'],
                        'options': env['options']},
        'selection': selection.as_json(), 'export_options': options.as_json(),
        'episode_ids': [r['id'] for r in dataset_rows if r['id'] not in result.dropped],
    }).save_metadata(directory)
    result.directories.append(directory)
  if not result.directories:
    raise errors.EmptyInputError('no stored episode matches the selection', path=out_dir)
  return result


def export_zip(db: storage_lib.Storage, data_dir: str, zip_path: str, selection: Selection,
               options: ExportOptions = ExportOptions(),
               publish: Callable[[str], None] = lambda directory: None) -> ExportResult:
  """`export` into one zip archive (paths relative to the export directory)."""
  staging = tempfile.mkdtemp(prefix='.export-', dir=os.path.dirname(os.path.abspath(zip_path)))
  try:
    out_dir = os.path.join(staging, 'rlds')
    result = export(db, data_dir, out_dir, selection, options, publish)
    partial = zip_path + '.partial'
    with zipfile.ZipFile(partial, 'w', zipfile.ZIP_STORED) as archive:
      for root, _, files in os.walk(out_dir):
        for filename in sorted(files):
          path = os.path.join(root, filename)
          archive.write(path, os.path.relpath(path, out_dir))
    os.replace(partial, zip_path)
    result.directories = [os.path.relpath(d, out_dir) for d in result.directories]
    return result
  finally:
    shutil.rmtree(staging, ignore_errors=True)


def _episode(recorded: Mapping[str, Any], row: Mapping[str, Any], options: ExportOptions,
             tag_labels: Sequence[str], metadata: Mapping[str, Any]) -> Optional[Episode]:
  """A recorded numpy episode -> the exported Episode (cut, tag fields, metadata kept or not)."""
  steps = dict(recorded[fields.STEPS])
  last = len(steps[fields.IS_FIRST]) - 1
  cut = min((int(i) for i, labels in row['step_tags'].items()
             if set(labels) & set(options.end_tags)), default=last)
  if cut == 0:
    return None
  if cut < last:
    ending = Ending.TRUNCATED
  else:
    cut, ending = last, (Ending.TERMINATED if steps[fields.IS_TERMINAL][last] else Ending.TRUNCATED)
  extra = {k: v for k, v in steps.items() if k not in fields.CORE_STEP_FIELDS and
           not (options.strip_metadata and k in recorder.METADATA_FIELDS)}
  for label in tag_labels:
    column = np.zeros(last + 1, dtype=bool)
    for index, labels in row['step_tags'].items():
      column[int(index)] = label in labels
    extra[TAG_PREFIX + label] = column
  acted = slice(0, cut)
  trajectory = Trajectory(
      observations=nested.take_rows(steps[fields.OBSERVATION], acted),
      actions=nested.take_rows(steps[fields.ACTION], acted),
      rewards=np.asarray(steps[fields.REWARD])[acted],
      discounts=np.asarray(steps[fields.DISCOUNT])[acted],
      ending=ending,
      final_observation=nested.row(steps[fields.OBSERVATION], cut),
      step_metadata=nested.take_rows(extra, acted),
      final_step_metadata=nested.row(extra, cut) if extra else None,
      metadata=dict(metadata))
  return to_episode(trajectory)


def _features(source: Any, options: ExportOptions, tag_labels: Sequence[str]) -> Any:
  """The source dataset's features, without stripped metadata, with one bool per tag label."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  from rlds_suite.tfds import features as features_lib  # pylint: disable=g-import-not-at-top
  steps = source[fields.STEPS].feature
  step_metadata = {k: steps[k] for k in steps.keys() if k not in fields.CORE_STEP_FIELDS and
                   not (options.strip_metadata and k in recorder.METADATA_FIELDS)}
  for label in tag_labels:
    step_metadata[TAG_PREFIX + label] = features_lib.scalar(
        np.bool_, f'The step carries the tag {label!r}.')
  episode_metadata = {k: source[k] for k in source.keys() if k != fields.STEPS}
  episode_metadata.update(episode_features())
  features = features_lib.rlds_features(
      observation=steps[fields.OBSERVATION], action=steps[fields.ACTION],
      reward=steps[fields.REWARD], step_metadata=step_metadata, episode_metadata=episode_metadata)
  return tfds.features.FeatureConnector.from_json(features.to_json())
