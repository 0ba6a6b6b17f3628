"""`rlds-suite browse` in a real browser: Debian's chromium (headless, driven by chromium-driver
through Selenium) opens the page over a MAGICAL dataset (two image views), an Atari recording and
a CartPole recording, sorts and filters the episode list, opens an episode, steps, plays and
scrubs it, and sees every image view, the plots with their cursor and the flags at the cursor.

Screenshots go to $BROWSE_SCREENSHOTS (default: the test's tmp directory), never into git.
Runs under pytest only (a browser and a server).
"""

from __future__ import annotations

import asyncio
import os
import pathlib
import socket
import threading

import pytest

import rlds_suite
from rlds_suite.browse import server
from rlds_suite.tfds import datasets

REPO = pathlib.Path(__file__).resolve().parent.parent
MAGICAL_DUMMY = REPO / 'builders' / 'magical_demos' / 'dummy_data'
from tests import chromium  # pylint: disable=g-import-not-at-top,wrong-import-position  (skips without a browser)

from aiohttp import web  # pylint: disable=g-import-not-at-top,wrong-import-position
from selenium.common import exceptions  # pylint: disable=g-import-not-at-top,wrong-import-position
from selenium.webdriver.common.by import By  # pylint: disable=g-import-not-at-top,wrong-import-position
from selenium.webdriver.support.ui import Select, WebDriverWait  # pylint: disable=g-import-not-at-top,wrong-import-position


def _browser(profile: str):
  return chromium.browser(profile, window='1200,1100')


class Served:
  """The browse app over `directory` on a loopback port, in its own thread and event loop."""

  def __init__(self, directory: str):
    with socket.socket() as s:
      s.bind(('127.0.0.1', 0))
      port = s.getsockname()[1]
    self.url = f'http://127.0.0.1:{port}'
    self._loop = asyncio.new_event_loop()
    self._runner = web.AppRunner(server.create_app(datasets.load_builder(directory)))
    started = threading.Event()

    def run() -> None:
      asyncio.set_event_loop(self._loop)
      self._loop.run_until_complete(self._runner.setup())
      self._loop.run_until_complete(web.TCPSite(self._runner, '127.0.0.1', port).start())
      started.set()
      self._loop.run_forever()

    self._thread = threading.Thread(target=run, daemon=True)
    self._thread.start()
    assert started.wait(60)

  def close(self) -> None:
    asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(60)
    self._loop.call_soon_threadsafe(self._loop.stop)
    self._thread.join(30)


@pytest.fixture(scope='module')
def driver(tmp_path_factory):
  browser = _browser(str(tmp_path_factory.mktemp('profile')))
  yield browser
  browser.quit()


@pytest.fixture(scope='module')
def shots(tmp_path_factory):
  path = os.environ.get('BROWSE_SCREENSHOTS') or str(tmp_path_factory.mktemp('screenshots'))
  os.makedirs(path, exist_ok=True)
  return path


def _rows(driver) -> list[list[str]]:
  return [[td.text for td in tr.find_elements(By.TAG_NAME, 'td')]
          for tr in driver.find_elements(By.CSS_SELECTOR, '#episode-table tbody tr')]


def _images_loaded(driver) -> list[int]:
  """naturalWidth of each image view of the player (0: not loaded)."""
  return driver.execute_script(
      "return [...document.querySelectorAll('#player .view img')].map(i => i.complete ? i.naturalWidth : 0)")


def browse(driver, directory: str, shots: str, name: str, episodes: int, image_views: int,
           plots: set[str]) -> None:
  """Lists, sorts, filters, opens, steps, plays and scrubs an episode; screenshots list and view."""
  served = Served(directory)
  wait = WebDriverWait(driver, 90, ignored_exceptions=(exceptions.StaleElementReferenceException,))
  try:
    driver.get(served.url + '/')
    wait.until(lambda d: 'episodes' in d.find_element(By.ID, 'progress').text
               and 'indexing' not in d.find_element(By.ID, 'progress').text)
    wait.until(lambda d: len(_rows(d)) == episodes)
    assert f'{episodes} episodes' in driver.find_element(By.ID, 'stats-summary').text
    # Sort by return, twice (ascending, then descending), as a person clicks the header.
    header = driver.find_element(By.CSS_SELECTOR, 'th[data-sort=return]')
    header.click()
    wait.until(lambda d: 'sorted-asc' in header.get_attribute('class'))
    returns = [float(r[3]) for r in _rows(driver)]
    assert returns == sorted(returns)
    header.click()
    wait.until(lambda d: 'sorted-desc' in header.get_attribute('class'))
    wait.until(lambda d: [float(r[3]) for r in _rows(d)] == sorted(returns, reverse=True))
    driver.save_screenshot(os.path.join(shots, f'browse_{name}_list.png'))
    # Filter on the ending: only matching rows stay.
    ending = _rows(driver)[0][4]
    Select(driver.find_element(By.NAME, 'ending')).select_by_value(ending)
    wait.until(lambda d: all(r[4] == ending for r in _rows(d)))
    # Open the first listed episode.
    first = driver.find_element(By.CSS_SELECTOR, '#episode-table tbody tr')
    episode_id, length = first.get_attribute('data-id'), int(_rows(driver)[0][2])
    first.click()
    wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, '#player .controls'))
    assert driver.current_url.endswith(f'#episode={episode_id}')
    wait.until(lambda d: len(_images_loaded(d)) == image_views and all(_images_loaded(d)))
    names = {e.text for e in driver.find_elements(By.CSS_SELECTOR, '#player .plot .name')}
    assert plots <= names, names
    label = driver.find_element(By.CLASS_NAME, 'step-label')
    assert label.text == f'step 0 / {length - 1}'
    flags = driver.find_element(By.CLASS_NAME, 'flags').text
    assert 'is_first yes' in flags and 'is_last no' in flags
    driver.find_element(By.XPATH, "//button[text()='step \u25B6']").click()
    assert label.text == f'step 1 / {length - 1}'
    # Play at the fastest speed: the cursor moves on its own, to the end, where play stops.
    Select(driver.find_element(By.CLASS_NAME, 'speed')).select_by_value('8')
    driver.find_element(By.CLASS_NAME, 'play').click()
    wait.until(lambda d: label.text == f'step {length - 1} / {length - 1}')
    wait.until(lambda d: 'play' in d.find_element(By.CLASS_NAME, 'play').text)
    assert 'is_last yes' in driver.find_element(By.CLASS_NAME, 'flags').text
    # Scrub to the middle (as dragging the slider does), then every view shows that step's frame.
    middle = length // 2
    driver.execute_script(
        "const s = document.querySelector('#player input[type=range]'); s.value = arguments[0];"
        "s.dispatchEvent(new Event('input'));", middle)
    assert label.text == f'step {middle} / {length - 1}'
    wait.until(lambda d: all(f'/frames/{i}/{middle}' in src for i, src in enumerate(d.execute_script(
        "return [...document.querySelectorAll('#player .view img')].map(i => i.src)"))))
    wait.until(lambda d: all(_images_loaded(d)))
    driver.save_screenshot(os.path.join(shots, f'browse_{name}_episode.png'))
    assert not [e for e in driver.get_log('browser')
                if e['level'] == 'SEVERE' and 'favicon' not in e['message']]
  finally:
    served.close()


def test_magical_two_views(driver, shots, tmp_path):
  builder = datasets.build('magical_demos/move_to_corner', manual_dir=str(MAGICAL_DUMMY),
                           data_dir=str(tmp_path))
  browse(driver, str(builder.data_dir), shots, 'magical', episodes=2, image_views=2,
         plots={'action', 'reward'})


def test_atari_recording(driver, shots, tmp_path):
  pytest.importorskip('ale_py')
  rlds_suite.record('atari:Pong', 'random', episodes=2, data_dir=str(tmp_path / 'pong'), seed=0,
                    max_episode_steps=40, progress=False)
  browse(driver, str(tmp_path / 'pong'), shots, 'atari', episodes=2, image_views=1,
         plots={'action', 'reward'})


def test_cartpole_recording(driver, shots, tmp_path):
  pytest.importorskip('gymnasium')
  rlds_suite.record('gymnasium:CartPole-v1', 'random', episodes=4, data_dir=str(tmp_path / 'cp'),
                    seed=0, progress=False)
  browse(driver, str(tmp_path / 'cp'), shots, 'cartpole', episodes=4, image_views=0,
         plots={'observation', 'action', 'reward'})
