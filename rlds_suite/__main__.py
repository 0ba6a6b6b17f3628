import sys

from rlds_suite.cli import main

sys.exit(main())
