"""The `vitperf` command."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from pytest_vitperf.report import table


def _capabilities(args: argparse.Namespace) -> int:
    from pytest_vitperf.precision import matrix_rows

    for line in table(("precision", "GPU", "needs", "backends"), matrix_rows()):
        print(line)
    return 0


def _env(args: argparse.Namespace) -> int:
    from pytest_vitperf.backends import select_backend
    from pytest_vitperf.env import header_line, probe_device

    device = probe_device(0)
    backend, reason = select_backend(args.backend, device)
    print(header_line(device, backend.name, backend.version()))
    if reason:
        print(f"backend {backend.name} cannot run here: {reason}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vitperf", description="pytest-vitperf utilities")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("capabilities", help="print the precision capability matrix").set_defaults(func=_capabilities)
    env = sub.add_parser("env", help="print the device, driver and versions a run would record")
    env.add_argument("--backend", default="auto", choices=("auto", "torch", "tensorrt", "tensorrt-rtx"))
    env.set_defaults(func=_env)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
