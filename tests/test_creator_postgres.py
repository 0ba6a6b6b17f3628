"""The creator's storage and protocol tests against a real PostgreSQL server (Debian's postgresql
package, installed by scripts/setup_envs.sh), started on loopback for this module and stopped after.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid

import pytest

from tests import creator_helpers as h
from tests import test_creator

pytest.importorskip('psycopg')


def _bin(name: str) -> str:
  found = sorted(glob.glob(f'/usr/lib/postgresql/*/bin/{name}'))
  if not found:
    pytest.skip(f'PostgreSQL is not installed ({name} not under /usr/lib/postgresql/*/bin); '
                'scripts/setup_envs.sh installs the postgresql package', allow_module_level=True)
  return found[-1]


def _as_server_user(command: list[str]) -> list[str]:
  """PostgreSQL refuses to run as root: root runs it as the package's 'postgres' user."""
  return ['runuser', '-u', 'postgres', '--', *command] if os.geteuid() == 0 else command


@pytest.fixture(scope='module')
def postgres():
  initdb, pg_ctl = _bin('initdb'), _bin('pg_ctl')
  root = tempfile.mkdtemp(prefix='creator-pg-')
  data = os.path.join(root, 'data')
  if os.geteuid() == 0:
    shutil.chown(root, 'postgres')
  with socket.socket() as s:
    s.bind(('127.0.0.1', 0))
    port = s.getsockname()[1]
  subprocess.run(_as_server_user([initdb, '-D', data, '-U', 'creator', '--auth=trust', '-E', 'UTF8']),
                 check=True, capture_output=True)
  options = f'-c listen_addresses=127.0.0.1 -p {port} -k {root} -c fsync=off'
  subprocess.run(_as_server_user([pg_ctl, '-D', data, '-o', options, '-l',
                                  os.path.join(root, 'log'), '-w', 'start']),
                 check=True, capture_output=True)
  try:
    yield f'postgresql+psycopg://creator@127.0.0.1:{port}'
  finally:
    subprocess.run(_as_server_user([pg_ctl, '-D', data, '-m', 'fast', '-w', 'stop']),
                   capture_output=True)
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def database(postgres, monkeypatch):
  """A fresh database on the server for one test; the creator's tests use it through h.DB_URL."""
  import psycopg  # pylint: disable=g-import-not-at-top
  name = 'creator_' + uuid.uuid4().hex[:12]
  with psycopg.connect(postgres.replace('postgresql+psycopg', 'postgresql') + '/postgres',
                       autocommit=True) as connection:
    connection.execute(f'CREATE DATABASE {name}')
  monkeypatch.setattr(h, 'DB_URL', f'{postgres}/{name}')
  return h.DB_URL


@pytest.mark.parametrize('test', [test_creator.test_study_crud_and_permissions,
                                  test_creator.test_players_only_reach_their_own_study_and_episodes,
                                  test_creator.test_play_replay_tags_and_download,
                                  test_creator.test_episode_states,
                                  test_creator.test_restart_reconciles_database_and_datasets],
                         ids=lambda t: t.__name__)
def test_on_postgresql(test, database, tmp_path):
  from rlds_suite.creator import storage  # pylint: disable=g-import-not-at-top
  db = storage.Storage(database)
  assert db.engine.dialect.name == 'postgresql'
  db.close()
  test(tmp_path)
