"""`python -m pytest_vitperf.cli`: the `vitperf` command where its script is not on PATH."""

import sys

from pytest_vitperf.cli import main

sys.exit(main())
