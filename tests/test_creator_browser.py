"""The creator in a real browser: Debian's chromium (headless, driven by chromium-driver through
Selenium) creates a study as designer, enrols as a player through the study link, plays CartPole
with real key presses, confirms the episode, replays it, tags a step and downloads the dataset,
which loads with tfds.builder_from_directory with the actions the keys pressed.

Screenshots of the player and replay pages go to $CREATOR_SCREENSHOTS (default: the test's tmp
directory), never into git.
"""

from __future__ import annotations

import os
import shutil
import time
import zipfile

import numpy as np
import pytest

from tests import creator_helpers as h

CHROMIUM, DRIVER = '/usr/bin/chromium', '/usr/bin/chromedriver'
pytest.importorskip('gymnasium')
webdriver = pytest.importorskip('selenium.webdriver')
if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
  pytest.skip('chromium and chromium-driver are not installed (scripts/setup_envs.sh installs them)',
              allow_module_level=True)

from selenium.common import exceptions  # pylint: disable=g-import-not-at-top,wrong-import-position
from selenium.webdriver.common.by import By  # pylint: disable=g-import-not-at-top,wrong-import-position
from selenium.webdriver.common.keys import Keys  # pylint: disable=g-import-not-at-top,wrong-import-position
from selenium.webdriver.support.ui import WebDriverWait  # pylint: disable=g-import-not-at-top,wrong-import-position


def _browser(profile: str, downloads: str):
  options = webdriver.ChromeOptions()
  options.binary_location = CHROMIUM
  for flag in ('--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
               '--disable-component-update', '--disable-sync', '--no-first-run',
               '--disable-dev-shm-usage', f'--user-data-dir={profile}', '--window-size=1100,1000'):
    options.add_argument(flag)
  options.add_experimental_option('prefs', {'download.default_directory': downloads,
                                            'download.prompt_for_download': False})
  return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))


def test_designer_player_replay_download_in_chromium(tmp_path):
  shots = os.environ.get('CREATOR_SCREENSHOTS') or str(tmp_path / 'screenshots')
  os.makedirs(shots, exist_ok=True)
  downloads = str(tmp_path / 'downloads')
  os.makedirs(downloads)
  with h.ServerThread(str(tmp_path / 'data')) as server:
    driver = _browser(str(tmp_path / 'profile'), downloads)
    # Pages reload (enrolment, navigation): elements found mid-reload go stale; look again.
    wait = WebDriverWait(driver, 60, ignored_exceptions=(exceptions.StaleElementReferenceException,
                                                         exceptions.NoSuchElementException))
    try:
      # Designer: log in with the printed link, create and start a study.
      driver.get(f'{server.url}/#designer={h.TOKEN}')
      form = wait.until(lambda d: d.find_element(By.ID, 'study-form'))
      form.find_element(By.NAME, 'name').send_keys('browser study')
      form.find_element(By.NAME, 'instructions').send_keys('Balance the pole.')
      environments = form.find_element(By.NAME, 'environments')
      environments.clear()
      environments.send_keys('[{"spec": "gymnasium:CartPole-v1", "options": {"seed": 1, '
                             '"max_episode_steps": 8}, "instructions": "LEFT/RIGHT push."}]')
      driver.find_element(By.ID, 'study-save').click()
      wait.until(lambda d: 'browser study' in d.find_element(By.ID, 'studies').text)
      driver.find_element(By.XPATH, "//table[@id='studies']//button[text()='start']").click()
      wait.until(lambda d: 'running' in d.find_element(By.ID, 'studies').text)
      link = driver.find_element(By.CLASS_NAME, 'study-link').get_attribute('href')

      # Player: enrol through the study link and play with real key presses.
      driver.get(link)
      wait.until(lambda d: d.find_element(By.ID, 'enroll').is_displayed())
      name = driver.find_element(By.ID, 'player-name')
      name.clear()
      name.send_keys('ada')
      driver.find_element(By.ID, 'enroll-button').click()
      wait.until(lambda d: d.find_element(By.ID, 'play-button').is_displayed())
      assert 'Balance the pole.' in driver.find_element(By.ID, 'study-instructions').text
      driver.find_element(By.ID, 'play-button').click()
      wait.until(lambda d: 'One step per key press' in d.find_element(By.ID, 'keymap').text)
      body = driver.find_element(By.TAG_NAME, 'body')
      presses = [Keys.ARROW_LEFT, Keys.ARROW_RIGHT, 'd', 'a', Keys.ARROW_RIGHT, Keys.ARROW_LEFT,
                 'd', 'd']
      pressed = []
      for key in presses:
        step = int(driver.find_element(By.ID, 'step').text)
        body.send_keys(key)
        pressed.append(key)
        wait.until(lambda d, s=step: int(d.find_element(By.ID, 'step').text) == s + 1)
        if driver.find_element(By.ID, 'verdict').is_displayed():
          break
      wait.until(lambda d: d.find_element(By.ID, 'verdict').is_displayed())
      driver.save_screenshot(os.path.join(shots, 'creator_player.png'))
      driver.find_element(By.ID, 'accept').click()
      wait.until(lambda d: 'COMPLETED' in d.find_element(By.ID, 'my-episodes').text)

      # Replay: step through with the keyboard, tag a step.
      driver.find_element(By.CSS_SELECTOR, '#my-episodes a').click()
      wait.until(lambda d: d.find_element(By.ID, 'replay-total').text not in ('', '0'))
      page = driver.find_element(By.TAG_NAME, 'body')
      page.send_keys(Keys.ARROW_RIGHT)
      page.send_keys(Keys.ARROW_RIGHT)
      wait.until(lambda d: d.find_element(By.ID, 'replay-step').text == '2')
      page.send_keys(Keys.SHIFT, Keys.ARROW_RIGHT)
      wait.until(lambda d: d.find_element(By.ID, 'replay-step').text ==
                 d.find_element(By.ID, 'replay-total').text)
      page.send_keys(Keys.SHIFT, Keys.ARROW_LEFT)
      wait.until(lambda d: d.find_element(By.ID, 'replay-step').text == '0')
      page.send_keys(Keys.ARROW_RIGHT)
      page.send_keys(Keys.ARROW_RIGHT)
      wait.until(lambda d: d.find_element(By.ID, 'replay-step').text == '2')
      expected_key = 'right' if pressed[2] in ('d', Keys.ARROW_RIGHT) else 'left'
      assert driver.find_element(By.ID, 'replay-keys').text == expected_key
      driver.find_element(By.ID, 'step-tag').send_keys('goal')
      driver.find_element(By.ID, 'add-step-tag').click()
      wait.until(lambda d: 'goal' in d.find_element(By.ID, 'step-tags').text)
      wait.until(lambda d: d.find_element(By.ID, 'replay-frame').get_attribute('src').startswith('blob:'))
      time.sleep(0.3)
      driver.save_screenshot(os.path.join(shots, 'creator_replay.png'))

      # Designer: download the study's completed episodes as a zip.
      driver.get(f'{server.url}/')
      wait.until(lambda d: 'browser study' in d.find_element(By.ID, 'studies').text)
      driver.find_element(By.XPATH, "//table[@id='studies']//button[text()='episodes']").click()
      wait.until(lambda d: 'COMPLETED' in d.find_element(By.ID, 'episodes').text)
      driver.find_element(By.ID, 'download').click()
      wait.until(lambda d: any(f.endswith('.zip') for f in os.listdir(downloads)))
    finally:
      driver.quit()

  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  from rlds_suite.tfds import datasets  # pylint: disable=g-import-not-at-top
  (archive,) = [f for f in os.listdir(downloads) if f.endswith('.zip')]
  out = tmp_path / 'unzipped'
  zipfile.ZipFile(os.path.join(downloads, archive)).extractall(out)
  (directory,) = {os.path.dirname(str(p)) for p in out.rglob('dataset_info.json')}
  builder = tfds.builder_from_directory(directory)
  (episode,) = list(datasets.numpy_episodes(builder.as_dataset(split='train')))
  steps = episode['steps']
  n = len(pressed)
  expected = [0 if key in (Keys.ARROW_LEFT, 'a') else 1 for key in pressed]
  np.testing.assert_array_equal(steps['action'][:n], expected)
  assert [k.decode() for k in steps['keys'][:n]] == ['left' if a == 0 else 'right' for a in expected]
  np.testing.assert_array_equal(np.flatnonzero(steps['tag:goal']), [2])
  assert len(steps['is_first']) == n + 1 and steps['is_last'][-1]
  assert datasets.validate(directory).ok
  shutil.rmtree(out)
