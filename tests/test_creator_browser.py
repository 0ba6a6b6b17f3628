"""The creator in a real browser: Debian's chromium (headless, driven by chromium-driver through
Selenium) creates a study as designer, enrols as a player through the study link, plays CartPole
with real key presses, confirms the episode, replays it, tags a step and downloads the dataset,
which loads with tfds.builder_from_directory with the actions the keys pressed.

Screenshots of the player and replay pages go to $CREATOR_SCREENSHOTS (default: the test's tmp
directory), never into git.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import urllib.request
import zipfile

import numpy as np
import pytest

from tests import creator_helpers as h

pytest.importorskip('gymnasium')
from tests import chromium  # pylint: disable=g-import-not-at-top,wrong-import-position  (skips without a browser)

from selenium.common import exceptions  # pylint: disable=g-import-not-at-top,wrong-import-position
from selenium.webdriver.common.by import By  # pylint: disable=g-import-not-at-top,wrong-import-position
from selenium.webdriver.common.keys import Keys  # pylint: disable=g-import-not-at-top,wrong-import-position
from selenium.webdriver.common.action_chains import ActionChains  # pylint: disable=g-import-not-at-top,wrong-import-position
from selenium.webdriver.support.ui import Select, WebDriverWait  # pylint: disable=g-import-not-at-top,wrong-import-position


def _browser(profile: str, downloads: str):
  return chromium.browser(profile, window='1100,1000', downloads=downloads)


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
      # Designer: log in with the printed link, pick the environment from what envs.make offers
      # (family, id, options as fields), check it (a preview frame), create and start the study.
      driver.get(f'{server.url}/#designer={h.TOKEN}')
      form = wait.until(lambda d: d.find_element(By.ID, 'study-form'))
      form.find_element(By.NAME, 'name').send_keys('browser study')
      form.find_element(By.NAME, 'instructions').send_keys('Balance the pole.')
      row = wait.until(lambda d: d.find_element(By.CSS_SELECTOR, '#env-rows .env-row'))
      Select(row.find_element(By.CLASS_NAME, 'family')).select_by_value('gymnasium')
      Select(row.find_element(By.CLASS_NAME, 'name')).select_by_value('CartPole-v1')
      row.find_element(By.CSS_SELECTOR, 'input[name=seed]').send_keys('1')
      row.find_element(By.CSS_SELECTOR, 'input[name=max_episode_steps]').send_keys('8')
      row.find_element(By.CLASS_NAME, 'env-instructions').send_keys('LEFT/RIGHT push.')
      row.find_element(By.CLASS_NAME, 'check').click()
      wait.until(lambda d: row.find_element(By.CLASS_NAME, 'preview').is_displayed())
      assert 'left: action 0' in row.find_element(By.CLASS_NAME, 'check-result').text
      driver.save_screenshot(os.path.join(shots, 'creator_new_study.png'))
      # The JSON stays available as the advanced view; a misspelt id is refused on save, in words.
      driver.find_element(By.ID, 'advanced-toggle').click()
      raw = driver.find_element(By.ID, 'env-json')
      environments = json.loads(raw.get_attribute('value'))
      assert environments == [{'spec': 'gymnasium:CartPole-v1', 'instructions': 'LEFT/RIGHT push.',
                               'options': {'seed': 1, 'max_episode_steps': 8}}]
      raw.clear()
      raw.send_keys(json.dumps([{**environments[0], 'spec': 'gymnasium:CartPol-v1'}]))
      driver.find_element(By.ID, 'study-save').click()
      error = wait.until(lambda d: d.find_element(By.ID, 'study-error').is_displayed() and
                         d.find_element(By.ID, 'study-error'))
      assert 'CartPol-v1' in error.text and 'Error' not in error.text
      raw.clear()
      raw.send_keys(json.dumps(environments))
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
      # The episode waits, paused, for the first key.
      wait.until(lambda d: d.find_element(By.ID, 'overlay').text == 'Press any key to start')
      for empty in driver.find_elements(By.CSS_SELECTOR, '.instructions'):
        assert not empty.is_displayed() or empty.text.strip()  # No empty instruction bars.
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
      assert not driver.find_element(By.ID, 'overlay').is_displayed()
      verdict_text = driver.find_element(By.ID, 'verdict-text').text
      assert 'the game ended' in verdict_text or 'time ran out' in verdict_text, verdict_text
      assert 'terminated' not in verdict_text and 'truncated' not in verdict_text
      driver.save_screenshot(os.path.join(shots, 'creator_player.png'))
      driver.find_element(By.ID, 'accept').click()
      confirmation = wait.until(lambda d: d.find_element(By.ID, 'confirmation').is_displayed() and
                                d.find_element(By.ID, 'confirmation'))
      assert 'Kept' in confirmation.text and 'Next episode (ENTER)' in confirmation.text
      wait.until(lambda d: 'COMPLETED' in d.find_element(By.ID, 'my-episodes').text)
      driver.save_screenshot(os.path.join(shots, 'creator_player_kept.png'))
      body.send_keys(Keys.ENTER)  # The next episode, waiting for its first key.
      wait.until(lambda d: not d.find_element(By.ID, 'confirmation').is_displayed() and
                 d.find_element(By.ID, 'step').text == '0')

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

      driver.find_element(By.ID, 'notes').send_keys('steady hands')
      driver.find_element(By.ID, 'save-notes').click()
      time.sleep(0.5)

      # Designer: the episodes panel names the player and shows the notes; download the study's
      # completed episodes as a zip.
      driver.get(f'{server.url}/')
      wait.until(lambda d: 'browser study' in d.find_element(By.ID, 'studies').text)
      driver.find_element(By.XPATH, "//table[@id='studies']//button[text()='episodes']").click()
      wait.until(lambda d: 'COMPLETED' in d.find_element(By.ID, 'episodes').text)
      episodes_text = driver.find_element(By.ID, 'episodes').text
      assert 'ada' in episodes_text and 'steady hands' in episodes_text, episodes_text
      driver.find_element(By.ID, 'download').click()
      wait.until(lambda d: any(f.endswith('.zip') for f in os.listdir(downloads)))
      # A stopped study offers no Play.
      driver.find_element(By.XPATH, "//table[@id='studies']//button[text()='stop']").click()
      wait.until(lambda d: 'stopped' in d.find_element(By.ID, 'studies').text)
      driver.get(link)
      wait.until(lambda d: d.find_element(By.ID, 'not-running').is_displayed())
      assert not driver.find_element(By.ID, 'play-button').is_displayed()
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


_FAKE_GAMEPAD = """
window.pad = {id: 'scripted pad', index: 0, connected: true, mapping: 'standard',
              buttons: Array.from({length: 17}, () => ({pressed: false, value: 0})), axes: [0, 0, 0, 0]};
Object.defineProperty(navigator, 'getGamepads', {value: () => [window.pad], configurable: true});
"""


def _api(server, path):
  request = urllib.request.Request(server.url + path, headers=h.designer())
  with urllib.request.urlopen(request) as response:
    return json.loads(response.read())


def test_gamepad_and_held_keys_in_chromium(tmp_path):
  """A scripted navigator.getGamepads stand-in: its d-pad buttons step CartPole (discrete), its
  left stick sets Pendulum's continuous torque; a held arrow key ramps the torque. The recorded
  actions say so."""
  with h.ServerThread(str(tmp_path / 'data')) as server:
    request = urllib.request.Request(server.url + '/api/studies', method='POST', headers={
        **h.designer(), 'Content-Type': 'application/json'}, data=json.dumps({
            'name': 'pads', 'active': True, 'record_frames': False, 'environments': [
                {'spec': 'gymnasium:CartPole-v1', 'options': {'seed': 0}},
                {'spec': 'gymnasium:Pendulum-v1', 'options': {'max_episode_steps': 500}}]}).encode())
    with urllib.request.urlopen(request) as response:
      study = json.loads(response.read())
    cartpole, pendulum = (e['id'] for e in study['environments'])
    driver = _browser(str(tmp_path / 'profile'), str(tmp_path))
    wait = WebDriverWait(driver, 60, ignored_exceptions=(exceptions.StaleElementReferenceException,
                                                         exceptions.NoSuchElementException))
    step = lambda d: int(d.find_element(By.ID, 'step').text)  # pylint: disable=unnecessary-lambda-assignment

    def play(environment_id):
      driver.get(f'{server.url}/play/{study["id"]}')
      wait.until(lambda d: d.find_element(By.ID, 'play-button').is_displayed())
      driver.execute_script(_FAKE_GAMEPAD)
      Select(driver.find_element(By.ID, 'env-select')).select_by_value(str(environment_id))
      driver.find_element(By.ID, 'play-button').click()
      wait.until(lambda d: 'scripted pad' in d.find_element(By.ID, 'gamepad-status').text)
      wait.until(lambda d: d.find_element(By.ID, 'overlay').text == 'Press any key to start')

    def cancelled_steps():
      driver.find_element(By.ID, 'cancel-button').click()
      wait.until(lambda d: 'Stopped' in d.find_element(By.ID, 'confirmation').text)
      rows = _api(server, f'/api/episodes?study={study["id"]}&state=CANCELLED')
      return _api(server, f'/api/episodes/{rows[-1]["id"]}/steps')

    try:
      driver.get(f'{server.url}/#designer={h.TOKEN}')
      wait.until(lambda d: d.find_element(By.ID, 'designer').is_displayed())
      play(cartpole)
      for button in (15, 14, 15):  # d-pad right, left, right: one step per press.
        before = step(driver)
        driver.execute_script(f'window.pad.buttons[{button}].pressed = true;')
        wait.until(lambda d, b=before: step(d) == b + 1)
        driver.execute_script(f'window.pad.buttons[{button}].pressed = false;')
        time.sleep(0.2)
      recorded = cancelled_steps()
      assert recorded['action'][:3] == [1, 0, 1] and recorded['keys'][:3] == ['right', 'left', 'right']

      play(pendulum)
      driver.execute_script('window.pad.axes[0] = 0.5;')  # Half right: half the torque bound.
      wait.until(lambda d: step(d) >= 5)
      driver.execute_script('window.pad.axes[0] = 0;')
      time.sleep(0.3)
      ActionChains(driver).key_down(Keys.ARROW_RIGHT).perform()
      time.sleep(1.2)
      ActionChains(driver).key_up(Keys.ARROW_RIGHT).perform()
      time.sleep(0.3)
      recorded = cancelled_steps()
    finally:
      driver.quit()
  actions = [a[0] for a in recorded['action']]
  keys = recorded['keys']
  stick = [a for a, k in zip(actions, keys) if k == 'stick']
  assert len(stick) >= 4 and all(abs(a - 1.0) < 1e-6 for a in stick), list(zip(actions, keys))
  ramp = [a for a, k in zip(actions, keys) if k == 'right']
  assert len(ramp) >= 8, list(zip(actions, keys))
  assert ramp[0] < 0.5 and ramp == sorted(ramp) and abs(ramp[-1] - 2.0) < 1e-6, ramp
