"""``doppler``: the doppler-gym command line.

Subcommands: ``graph info`` / ``graph list``, ``simulate``, ``eval``, ``train``, ``demo``. Library errors
(``ValueError``, ``TypeError``, file errors) are reported as one line, ``doppler: error: ...``,
with exit status 2, like argparse's usage errors; set ``DOPPLER_DEBUG=1`` to get the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from doppler_gym import __version__
from doppler_gym.cli import collective_cmd, demo_cmd, eval_cmd, graph_cmd, simulate_cmd, train_cmd


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="doppler",
        description="doppler-gym: device placement of dataflow graphs on a work-conserving runtime.",
    )
    parser.add_argument("--version", action="version", version=f"doppler-gym {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="{graph,simulate,eval,train,demo,collective}", required=True)
    graph_cmd.register(sub)
    simulate_cmd.register(sub)
    eval_cmd.register(sub)
    train_cmd.register(sub)
    demo_cmd.register(sub)
    collective_cmd.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on ``argv`` (default ``sys.argv[1:]``); returns the exit status."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors: argparse already printed
        return exc.code if isinstance(exc.code, int) else 1
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, OSError) as exc:
        if os.environ.get("DOPPLER_DEBUG"):
            raise
        message = " ".join(str(exc).split()) or type(exc).__name__
        print(f"doppler: error: {message}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
