"""The README's PyTorch and JAX examples run as written (each in a fresh interpreter)."""

import importlib.util
import pathlib
import re
import subprocess
import sys

import pytest

README = pathlib.Path(__file__).resolve().parents[1] / 'README.md'


def _example(name: str) -> str:
  found = re.search(rf'<!-- example: {name} -->\n```python\n(.*?)```', README.read_text(), re.S)
  assert found, f'README has no "{name}" example'
  return found.group(1)


@pytest.mark.parametrize('name, module', [('pytorch', 'torch'), ('jax', 'jax')])
def test_readme_example_trains(name, module):
  if importlib.util.find_spec(module) is None:
    pytest.skip(f'{module} is not installed (pip install rlds_suite[test] installs it)')
  result = subprocess.run([sys.executable, '-c', _example(name)], capture_output=True, text=True,
                          timeout=600, check=False)
  assert result.returncode == 0, result.stderr[-3000:]
  step, loss = re.search(r'step (\d+) loss (\S+)', result.stdout).groups()
  assert int(step) == 19 and 0 < float(loss) < 2
