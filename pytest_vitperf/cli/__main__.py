"""`python -m pytest_vitperf.cli`: the `vitperf` command where its script is not on PATH."""

import sys

from pytest_vitperf.cli import main

if __name__ == "__main__":  # importing the module (as the dependency check does) runs nothing
    sys.exit(main())
