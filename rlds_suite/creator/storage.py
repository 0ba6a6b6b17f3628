"""The creator's database: studies, their environments, players and episodes (SQLAlchemy 2).

SQLite under the data directory by default; any SQLAlchemy URL works (PostgreSQL:
`postgresql+psycopg://user@host/db`). Episode steps are not here: they are RLDS datasets written by
`rlds_suite.creator.recorder`; a row says which dataset holds its episode and whether it is durable.

Episode states: PLAYING, ENDED (its steps on disk, waiting for the player's verdict), SAVING
(stopped mid-episode and handed to the recorder; `outcome` holds the state it gets once its steps
are durable), then one of COMPLETED, REJECTED, CANCELLED, ABANDONED. The verdict only changes the
state of an ENDED episode, which is stored already.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import re
import secrets
from typing import Any, Iterable, Optional, Sequence

import sqlalchemy as sa
from sqlalchemy import orm

from rlds_suite.core import errors
from rlds_suite.creator import schemas

PLAYING, ENDED, SAVING = 'PLAYING', 'ENDED', 'SAVING'
COMPLETED, REJECTED, CANCELLED, ABANDONED = 'COMPLETED', 'REJECTED', 'CANCELLED', 'ABANDONED'
FINAL_STATES = (COMPLETED, REJECTED, CANCELLED, ABANDONED)
STATES = (PLAYING, ENDED, SAVING) + FINAL_STATES
# Names and labels typed by people: no path separators, no '..', no control characters.
_NAME = re.compile(r'^[^\x00-\x1f/\\]{1,100}$')


def check_name(value: Any, field: str) -> str:
  """`value` as a name or label, refusing anything that could act as a path ('../x', 'a/b')."""
  if (not isinstance(value, str) or not _NAME.match(value) or '..' in value or
      value != value.strip()):
    raise errors.SchemaError(f'{value!r} is not a valid name (1-100 characters, no "/", "\\" or '
                             f'"..", no surrounding spaces)', field=field)
  return value


def token_hash(token: str) -> str:
  return hashlib.sha256(token.encode()).hexdigest()


def _now() -> datetime.datetime:
  return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


class Base(orm.DeclarativeBase):
  pass


class Study(Base):
  __tablename__ = 'studies'
  id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
  name: orm.Mapped[str] = orm.mapped_column(sa.String(100))
  description: orm.Mapped[str] = orm.mapped_column(sa.Text, default='')
  instructions: orm.Mapped[str] = orm.mapped_column(sa.Text, default='')
  record_frames: orm.Mapped[bool] = orm.mapped_column(default=True)
  active: orm.Mapped[bool] = orm.mapped_column(default=False)
  join_code: orm.Mapped[str] = orm.mapped_column(sa.String(64))
  created: orm.Mapped[datetime.datetime] = orm.mapped_column(default=_now)
  environments: orm.Mapped[list['StudyEnvironment']] = orm.relationship(
      back_populates='study', cascade='all, delete-orphan', order_by='StudyEnvironment.id')


class StudyEnvironment(Base):
  __tablename__ = 'study_environments'
  id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
  study_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey('studies.id', ondelete='CASCADE'))
  name: orm.Mapped[str] = orm.mapped_column(sa.String(100))
  spec: orm.Mapped[str] = orm.mapped_column(sa.String(200))
  options: orm.Mapped[dict] = orm.mapped_column(sa.JSON, default=dict)
  keymap: orm.Mapped[Optional[dict]] = orm.mapped_column(sa.JSON, nullable=True)
  instructions: orm.Mapped[str] = orm.mapped_column(sa.Text, default='')
  study: orm.Mapped[Study] = orm.relationship(back_populates='environments')


class Player(Base):
  __tablename__ = 'players'
  id: orm.Mapped[int] = orm.mapped_column(primary_key=True)
  study_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey('studies.id', ondelete='CASCADE'))
  name: orm.Mapped[str] = orm.mapped_column(sa.String(100))
  token_hash: orm.Mapped[str] = orm.mapped_column(sa.String(64), unique=True)
  created: orm.Mapped[datetime.datetime] = orm.mapped_column(default=_now)


class EpisodeRow(Base):
  __tablename__ = 'episodes'
  id: orm.Mapped[str] = orm.mapped_column(sa.String(32), primary_key=True)
  study_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey('studies.id', ondelete='CASCADE'),
                                                index=True)
  environment_id: orm.Mapped[int] = orm.mapped_column(
      sa.ForeignKey('study_environments.id', ondelete='CASCADE'))
  player_id: orm.Mapped[int] = orm.mapped_column(sa.ForeignKey('players.id', ondelete='CASCADE'))
  dataset: orm.Mapped[str] = orm.mapped_column(sa.String(200))  # Relative to the data directory.
  state: orm.Mapped[str] = orm.mapped_column(sa.String(16), default=PLAYING)
  outcome: orm.Mapped[Optional[str]] = orm.mapped_column(sa.String(16), nullable=True)
  ending: orm.Mapped[Optional[str]] = orm.mapped_column(sa.String(16), nullable=True)
  num_steps: orm.Mapped[int] = orm.mapped_column(default=0)
  episode_return: orm.Mapped[float] = orm.mapped_column(default=0.0)
  stored: orm.Mapped[bool] = orm.mapped_column(default=False)
  tags: orm.Mapped[list] = orm.mapped_column(sa.JSON, default=list)
  notes: orm.Mapped[str] = orm.mapped_column(sa.Text, default='')
  step_tags: orm.Mapped[dict] = orm.mapped_column(sa.JSON, default=dict)  # {"12": ["goal"]}
  created: orm.Mapped[datetime.datetime] = orm.mapped_column(default=_now)
  updated: orm.Mapped[datetime.datetime] = orm.mapped_column(default=_now, onupdate=_now)


def _row(obj: Base) -> dict[str, Any]:
  out = {c.key: getattr(obj, c.key) for c in sa.inspect(obj).mapper.column_attrs}
  return {k: v.isoformat() if isinstance(v, datetime.datetime) else v for k, v in out.items()}


class Storage:
  """Every database operation of the creator; returns plain dicts, never live ORM objects."""

  def __init__(self, url: str):
    kwargs: dict[str, Any] = {}
    if url.startswith('sqlite'):
      kwargs['connect_args'] = {'check_same_thread': False, 'timeout': 30}
    self.url = url
    self.engine = sa.create_engine(url, **kwargs)
    if url.startswith('sqlite'):
      sa.event.listen(self.engine, 'connect', _sqlite_pragmas)
    Base.metadata.create_all(self.engine)
    self._sessions = orm.sessionmaker(self.engine, expire_on_commit=False)

  @classmethod
  def default_url(cls, data_dir: str) -> str:
    return 'sqlite:///' + os.path.join(os.path.abspath(data_dir), 'creator.db')

  def close(self) -> None:
    self.engine.dispose()

  # Studies.

  def create_study(self, data: dict[str, Any]) -> dict[str, Any]:
    with self._sessions.begin() as s:
      study = Study(join_code=secrets.token_urlsafe(16))
      _apply_study(study, data)
      s.add(study)
      s.flush()
      return self._study_dict(study)

  def update_study(self, study_id: int, data: dict[str, Any]) -> dict[str, Any]:
    with self._sessions.begin() as s:
      study = self._get(s, Study, study_id)
      _apply_study(study, data)
      s.flush()
      return self._study_dict(study)

  def delete_study(self, study_id: int) -> None:
    with self._sessions.begin() as s:
      study = self._get(s, Study, study_id)
      s.execute(sa.delete(EpisodeRow).where(EpisodeRow.study_id == study_id))
      s.execute(sa.delete(Player).where(Player.study_id == study_id))
      s.delete(study)

  def study(self, study_id: int) -> dict[str, Any]:
    with self._sessions() as s:
      return self._study_dict(self._get(s, Study, study_id))

  def studies(self) -> list[dict[str, Any]]:
    with self._sessions() as s:
      studies = s.scalars(sa.select(Study).order_by(Study.id)).all()
      counts = dict(s.execute(sa.select(EpisodeRow.study_id, sa.func.count()).where(
          EpisodeRow.state == COMPLETED).group_by(EpisodeRow.study_id)).all())
      return [{**self._study_dict(st), 'completed_episodes': counts.get(st.id, 0)}
              for st in studies]

  def environment(self, study_id: int, environment_id: int) -> dict[str, Any]:
    with self._sessions() as s:
      env = s.get(StudyEnvironment, environment_id)
      if env is None or env.study_id != study_id:
        raise errors.SchemaError(f'study {study_id} has no environment {environment_id}',
                                 field='environment_id')
      return _row(env)

  # Players.

  def enroll(self, study_id: int, join_code: str, name: str) -> tuple[dict[str, Any], str]:
    """A new player of the study, if `join_code` is the study's, and their token."""
    with self._sessions() as s:
      study = self._get(s, Study, study_id)
      if not secrets.compare_digest(study.join_code, join_code or ''):
        raise PermissionError('wrong study link')
    token = secrets.token_urlsafe(24)
    return self.add_player(study_id, name, token), token

  def add_player(self, study_id: int, name: str, token: Optional[str] = None) -> dict[str, Any]:
    """A player of the study; only the hash of `token` (a random one if None) is kept."""
    with self._sessions.begin() as s:
      self._get(s, Study, study_id)
      player = Player(study_id=study_id, name=check_name(name, 'name'),
                      token_hash=token_hash(token or secrets.token_urlsafe(24)))
      s.add(player)
      s.flush()
      return _row(player)

  def players(self, study_id: int) -> list[dict[str, Any]]:
    with self._sessions() as s:
      return [_row(p) for p in s.scalars(sa.select(Player).where(
          Player.study_id == study_id).order_by(Player.id))]

  def player_by_token(self, token: str) -> Optional[dict[str, Any]]:
    with self._sessions() as s:
      player = s.scalars(sa.select(Player).where(Player.token_hash == token_hash(token))).first()
      return None if player is None else _row(player)

  # Episodes.

  def start_episode(self, episode_id: str, study_id: int, environment_id: int, player_id: int,
                    dataset: str) -> None:
    with self._sessions.begin() as s:
      s.add(EpisodeRow(id=episode_id, study_id=study_id, environment_id=environment_id,
                       player_id=player_id, dataset=dataset, tags=[], step_tags={}))

  def end_episode(self, episode_id: str, *, state: str, num_steps: int, episode_return: float,
                  ending: Optional[str], outcome: Optional[str] = None) -> None:
    with self._sessions.begin() as s:
      row = self._get(s, EpisodeRow, episode_id)
      row.state, row.outcome, row.ending = state, outcome, ending
      row.num_steps, row.episode_return = num_steps, float(episode_return)

  def set_state(self, episode_id: str, state: str, outcome: Optional[str] = None) -> None:
    with self._sessions.begin() as s:
      row = self._get(s, EpisodeRow, episode_id)
      row.state, row.outcome = state, outcome

  def give_verdict(self, episode_id: str, state: str) -> dict[str, Any]:
    """The player's verdict on an ENDED episode: COMPLETED or REJECTED."""
    with self._sessions.begin() as s:
      row = self._get(s, EpisodeRow, episode_id)
      if row.state != ENDED or state not in (COMPLETED, REJECTED):
        raise errors.SchemaError(f'episode {episode_id} is {row.state}, not waiting for a verdict',
                                 field='verdict')
      row.state = state
      return _row(row)

  def mark_stored(self, episode_ids: Sequence[str]) -> None:
    """Steps of these episodes are durable: each SAVING one gets its outcome."""
    with self._sessions.begin() as s:
      for row in s.scalars(sa.select(EpisodeRow).where(EpisodeRow.id.in_(list(episode_ids)))):
        row.stored = True
        if row.state == SAVING:
          row.state, row.outcome = row.outcome or COMPLETED, None

  def unfinished(self) -> list[dict[str, Any]]:
    """Episodes that a stopped server left PLAYING, ENDED or SAVING without stored steps."""
    with self._sessions() as s:
      return [_row(r) for r in s.scalars(sa.select(EpisodeRow).where(
          EpisodeRow.state.in_((PLAYING, ENDED, SAVING)), EpisodeRow.stored.is_(False)))]

  def reconcile(self, stored_ids: Iterable[str],
                recovered: Optional[dict[str, int]] = None) -> dict[str, int]:
    """After a restart: episodes found in the datasets are stored (SAVING ones get their outcome,
    PLAYING ones are ABANDONED with their steps, ENDED ones still wait for their verdict);
    `recovered` (id -> number of steps) were recorded from their spool and are ABANDONED with
    those steps; every other unfinished episode is ABANDONED without steps."""
    recovered = dict(recovered or {})
    stored_ids = set(stored_ids) | set(recovered)
    counts = {'stored': 0, 'abandoned': 0}
    with self._sessions.begin() as s:
      rows = s.scalars(sa.select(EpisodeRow).where(
          sa.or_(EpisodeRow.state.in_((PLAYING, ENDED, SAVING)), EpisodeRow.stored.is_(False))))
      for row in rows:
        if row.id in stored_ids:
          if not row.stored:
            counts['stored'] += 1
          row.stored = True
          if row.id in recovered:
            row.state, row.outcome, row.num_steps = ABANDONED, None, recovered[row.id]
            row.ending = 'truncated'
          elif row.state in (PLAYING, SAVING):
            row.state, row.outcome = row.outcome or ABANDONED, None
        elif row.state in (PLAYING, ENDED, SAVING):
          row.state, row.outcome = ABANDONED, None
          counts['abandoned'] += 1
    return counts

  def episode(self, episode_id: str) -> dict[str, Any]:
    with self._sessions() as s:
      return _with_player_names(s, [_row(self._get(s, EpisodeRow, episode_id))])[0]

  def episodes(self, study_id: Optional[int] = None, *, environment_id: Optional[int] = None,
               states: Optional[Sequence[str]] = None, tags: Sequence[str] = (),
               player_ids: Optional[Sequence[int]] = None) -> list[dict[str, Any]]:
    """Episodes matching every filter given (all of `tags`), oldest first."""
    query = sa.select(EpisodeRow).order_by(EpisodeRow.created, EpisodeRow.id)
    if study_id is not None:
      query = query.where(EpisodeRow.study_id == study_id)
    if environment_id is not None:
      query = query.where(EpisodeRow.environment_id == environment_id)
    if states:
      query = query.where(EpisodeRow.state.in_(list(states)))
    if player_ids:
      query = query.where(EpisodeRow.player_id.in_(list(player_ids)))
    with self._sessions() as s:
      rows = [_row(r) for r in s.scalars(query)]
      rows = [r for r in rows if set(tags) <= set(r['tags'])]
      return _with_player_names(s, rows)

  def annotate(self, episode_id: str, *, add_tags: Sequence[str] = (),
               remove_tags: Sequence[str] = (), notes: Optional[str] = None,
               add_step_tags: Sequence[tuple[int, str]] = (),
               remove_step_tags: Sequence[tuple[int, str]] = ()) -> dict[str, Any]:
    """Adds/removes episode tags and step tags ((step index, label)), sets the notes."""
    with self._sessions.begin() as s:
      row = self._get(s, EpisodeRow, episode_id)
      tags = [t for t in row.tags if t not in remove_tags]
      tags += [check_name(t, 'tag') for t in add_tags if t not in tags]
      step_tags = {k: list(v) for k, v in row.step_tags.items()}
      for index, label in remove_step_tags:
        labels = step_tags.get(str(index), [])
        if label in labels:
          labels.remove(label)
        if not labels:
          step_tags.pop(str(index), None)
      for index, label in add_step_tags:
        if not 0 <= int(index) < max(row.num_steps, 1):
          raise errors.SchemaError(f'step {index} is outside the episode (0..{row.num_steps - 1})',
                                   field='step')
        labels = step_tags.setdefault(str(int(index)), [])
        if check_name(label, 'step tag') not in labels:
          labels.append(label)
      row.tags, row.step_tags = tags, step_tags
      if notes is not None:
        row.notes = str(notes)
      s.flush()
      return _with_player_names(s, [_row(row)])[0]

  # Internals.

  @staticmethod
  def _get(session: orm.Session, model: type, key: Any) -> Any:
    what = _WHAT[model]
    if isinstance(key, int) and not 1 <= key <= schemas.MAX_ID:
      raise LookupError(f'no {what} {key}')
    obj = session.get(model, key)
    if obj is None:
      raise LookupError(f'no {what} {key}')
    return obj

  @staticmethod
  def _study_dict(study: Study) -> dict[str, Any]:
    return {**_row(study), 'environments': [_row(e) for e in study.environments]}


_WHAT = {Study: 'study', StudyEnvironment: 'environment', Player: 'player', EpisodeRow: 'episode'}


def _with_player_names(session: orm.Session, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
  ids = {r['player_id'] for r in rows}
  names = dict(session.execute(sa.select(Player.id, Player.name).where(
      Player.id.in_(list(ids)))).all()) if ids else {}
  for r in rows:
    r['player_name'] = names.get(r['player_id'], '')
  return rows


def _apply_study(study: Study, data: dict[str, Any]) -> None:
  """Sets the fields given in `data` (a study's JSON), replacing its environments if given."""
  if 'name' in data or study.name is None:
    study.name = check_name(data.get('name'), 'name')
  for key in ('description', 'instructions'):
    if key in data:
      setattr(study, key, str(data[key]))
  for key in ('record_frames', 'active'):
    if key in data:
      setattr(study, key, bool(data[key]))
  if 'environments' in data:
    existing = {e.id: e for e in study.environments}
    kept_ids = {item.get('id') for item in data['environments']}
    played = set(orm.object_session(study).scalars(sa.select(EpisodeRow.environment_id).where(
        EpisodeRow.study_id == study.id)).all()) if study.id is not None else set()
    if played & (set(existing) - kept_ids):
      raise errors.SchemaError(f'environments {sorted(played & (set(existing) - kept_ids))} have '
                               f'episodes and cannot be removed', field='environments')
    kept = []
    for item in data['environments']:
      env = existing.get(item.get('id')) or StudyEnvironment()
      env.name = check_name(item.get('name') or item.get('spec'), 'environment name')
      env.spec = check_name(item.get('spec'), 'spec')
      if ':' not in env.spec:
        raise errors.SchemaError(f'{env.spec!r} is not a "family:name" environment spec',
                                 field='spec')
      env.options = dict(item.get('options') or {})
      env.keymap = item.get('keymap') or None
      env.instructions = str(item.get('instructions') or '')
      kept.append(env)
    if not kept:
      raise errors.SchemaError('a study needs at least one environment', field='environments')
    study.environments = kept


def _sqlite_pragmas(connection: Any, _: Any) -> None:
  cursor = connection.cursor()
  cursor.execute('PRAGMA journal_mode=WAL')
  # WAL + NORMAL: a commit survives a crash of the server; a power cut may lose the last ones,
  # which the restart's reconciliation with the datasets repairs.
  cursor.execute('PRAGMA synchronous=NORMAL')
  cursor.execute('PRAGMA foreign_keys=ON')
  cursor.close()
