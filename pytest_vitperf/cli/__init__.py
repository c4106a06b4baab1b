"""The `vitperf` command. Each group of subcommands lives in its own module and adds its parsers here."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pytest_vitperf import __version__
from pytest_vitperf.cli import ab, baselines, calibrate, device, engines, floors, merge


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vitperf", description="pytest-vitperf utilities")
    parser.add_argument("--version", action="version", version=f"vitperf (pytest-vitperf) {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (device, baselines, calibrate, ab, floors, engines, merge):
        group.add(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from pytest_vitperf.core.files import FileError
    from pytest_vitperf.verdicts.baselines.upgrade import UpgradeError

    try:
        return int(args.func(args))
    except (FileError, UpgradeError) as exc:
        print(f"vitperf {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
