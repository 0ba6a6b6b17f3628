"""benchmarks/record_overhead.py: a target's verdict never rests on an overhead within the noise."""

import importlib.util
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _benchmark():
  spec = importlib.util.spec_from_file_location(
      'record_overhead', os.path.join(REPO, 'benchmarks', 'record_overhead.py'))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def test_noise_level_baselines_are_undefined_and_ratios_carry_their_spread():
  bench = _benchmark()
  noise = bench.noise_level([24.3, 26.0, 25.1])
  assert noise == (26.0 - 24.3) / 2
  # The run that printed '-22.84x met': a tiny positive in-memory overhead under a negative ours.
  verdict = bench.ratio_verdict([-4.5, -3.0, 2.0], [0.2, 0.3, 0.1], noise, 2, at_most=True)
  assert verdict.startswith('undefined (baseline within noise') and 'met' not in verdict
  # ... and '105565418150.0x': ours at or below zero as the denominator.
  verdict = bench.ratio_verdict([300.0, 310.0, 290.0], [0.0, 2.0, 3.0], noise, 10, at_most=False)
  assert verdict.startswith('undefined (baseline within noise')
  # A numerator within the noise gives no ratio either.
  assert bench.ratio_verdict([0.5, 0.6, 0.7], [3.0, 4.0, 5.0], noise, 2,
                             at_most=True).startswith('undefined (numerator within noise')
  # Defined ratios: the median of the paired per-repeat ratios, with their min..max.
  assert bench.ratio_verdict([4.0, 5.0, 6.0], [1.6, 2.0, 2.5], noise, 2,
                             at_most=True) == '2.50x (2.40..2.50)  target <= 2  NOT met'
  assert bench.ratio_verdict([300.0, 310.0, 290.0], [4.0, 5.0, 6.0], noise, 10,
                             at_most=False) == '62.00x (48.33..75.00)  target >= 10  met'
