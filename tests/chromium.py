"""Debian's chromium, headless, driven by chromium-driver through Selenium: the one setup of the
browser tests (creator, browse). Importing it skips the test module when either is missing."""

from __future__ import annotations

import os
from typing import Optional

import pytest

CHROMIUM, DRIVER = '/usr/bin/chromium', '/usr/bin/chromedriver'
webdriver = pytest.importorskip('selenium.webdriver')
if not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)):
  pytest.skip('chromium and chromium-driver are not installed (scripts/setup_envs.sh installs them)',
              allow_module_level=True)


def browser(profile: str, *, window: str, downloads: Optional[str] = None):
  """A headless Chromium with its own profile directory; downloads land in `downloads`."""
  options = webdriver.ChromeOptions()
  options.binary_location = CHROMIUM
  for flag in ('--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
               '--disable-component-update', '--disable-sync', '--no-first-run',
               '--disable-dev-shm-usage', f'--user-data-dir={profile}', f'--window-size={window}'):
    options.add_argument(flag)
  if downloads:
    options.add_experimental_option('prefs', {'download.default_directory': downloads,
                                              'download.prompt_for_download': False})
  return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=DRIVER))
