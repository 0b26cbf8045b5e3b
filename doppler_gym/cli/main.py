"""``doppler``: the doppler-gym command line.

:func:`build_parser` registers the core's commands (:data:`CORE_COMMANDS`: ``graph``, ``simulate``,
``collective``, ``cluster``, ``whatif``), then every command plugin of the :data:`COMMAND_GROUP` entry-point
group (``train``, ``eval`` and ``demo`` come from ``agents``); see :mod:`doppler_gym.cli` for how a package adds one.
A plugin that fails to load or register leaves the other commands working: its command is listed as
unavailable and, when run, says which plugin failed and why.

Library errors (``ValueError``, ``TypeError``, file errors) are reported as one line,
``doppler: error: ...``, with exit status 2, like argparse's usage errors; set ``DOPPLER_DEBUG=1``
to get the traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from importlib.metadata import EntryPoint, entry_points

from doppler_gym import __version__
from doppler_gym.cli import cluster_cmd, collective_cmd, graph_cmd, simulate_cmd, whatif_cmd

COMMAND_GROUP = "doppler_gym.commands"  # entry-point group of command plugins: NAME = "module:register"
CORE_COMMANDS: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    graph_cmd.register, simulate_cmd.register, collective_cmd.register, cluster_cmd.register, whatif_cmd.register,
)


def command_plugins() -> list[EntryPoint]:
    """The installed command plugins (entry points of :data:`COMMAND_GROUP`), sorted by name."""
    return sorted(entry_points(group=COMMAND_GROUP), key=lambda ep: ep.name)


def build_parser(plugins: Iterable[EntryPoint] | None = None) -> argparse.ArgumentParser:
    """The ``doppler`` parser: the core commands, then ``plugins`` (default :func:`command_plugins`)."""
    parser = argparse.ArgumentParser(
        prog="doppler",
        description="doppler-gym: device placement of dataflow graphs on a work-conserving runtime.",
    )
    parser.add_argument("--version", action="version", version=f"doppler-gym {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for register in CORE_COMMANDS:
        register(sub)
    for plugin in command_plugins() if plugins is None else plugins:
        add_plugin(sub, plugin)
    sub.metavar = "{" + ",".join(sub.choices) + "}"
    return parser


def add_plugin(sub: argparse._SubParsersAction, plugin: EntryPoint) -> None:
    """Call the plugin's ``register(sub)``. The entry point's name is the command it adds; if loading or
    registering fails, that command stays in the list and reports the failure when run; a plugin
    whose name is taken is skipped with a warning."""
    name, where = plugin.name, f"{plugin.value} ({COMMAND_GROUP})"
    if name in sub.choices:  # the command that is there keeps working
        print(f"doppler: warning: plugin {where} skipped: the command {name!r} is already registered",
              file=sys.stderr)
        return
    try:
        register = plugin.load()
        if not callable(register):
            raise TypeError(f"{plugin.value} is a {type(register).__name__}, not a register(subparsers) function")
        register(sub)
        if name not in sub.choices:
            raise ValueError(f"register(subparsers) added no command named {name!r} (the entry point's name)")
    except Exception as exc:  # any failure of a third-party plugin: keep the other commands working
        run = failed_plugin(name, where, exc)
        if name in sub.choices:  # registered half-way: the parser exists, make running it report the failure
            sub.choices[name].set_defaults(func=run)
        else:
            p = sub.add_parser(name, help="(unavailable: its plugin failed to load; run it to see why)",
                               add_help=False, prefix_chars="\0")
            p.add_argument("rest", nargs=argparse.REMAINDER)
            p.set_defaults(func=run)


def failed_plugin(name: str, where: str, exc: BaseException) -> Callable[[argparse.Namespace], int]:
    """A command function that reports a plugin failure (or re-raises it under ``DOPPLER_DEBUG``)."""

    def run(args: argparse.Namespace) -> int:
        if os.environ.get("DOPPLER_DEBUG"):
            raise exc
        message = " ".join(str(exc).split()) or "no message"
        print(f"doppler: error: command {name!r} is unavailable: its plugin {where} failed: "
              f"{type(exc).__name__}: {message}", file=sys.stderr)
        return 2

    return run


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
