"""`python3 -m rlds_suite`: the `rlds-suite` command line."""

import sys

import rlds_suite

if getattr(rlds_suite, '__file__', None) is None:
  # A folder named rlds_suite without an __init__.py came first on sys.path (a checkout named
  # rlds_suite, run from its parent directory): Python made it a namespace package that shadows the
  # installed one, whose modules then fail on names its __init__ defines.
  print(f'error: rlds_suite is the folder {", ".join(rlds_suite.__path__)} here (the current '
        'directory shadows the installed package): run from another directory, or from inside '
        'the checkout', file=sys.stderr)
  sys.exit(2)

from rlds_suite.cli import main  # pylint: disable=g-import-not-at-top,wrong-import-position

sys.exit(main())
