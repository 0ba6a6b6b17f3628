"""Test files run by pytest alone, not as Bazel py_test targets (the one list of them).

BUILD.bazel excludes these from its py_test targets, and `pytest --outside-bazel` (conftest.py)
collects only these, so the README's test command runs every test exactly once.
test_packaging builds a wheel and a venv; test_envs needs the optional environment extras and EGL
rendering; the creator's browser, load and PostgreSQL tests start Chromium and servers.
"""

PYTEST_ONLY = [
    "tests/test_packaging.py",
    "tests/test_envs.py",
    "tests/test_creator_browser.py",
    "tests/test_creator_load.py",
    "tests/test_creator_postgres.py",
    "tests/test_browse_browser.py",
]
