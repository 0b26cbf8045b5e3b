"""Command plugins: the ``doppler_gym.commands`` entry-point group that upper packages plug into."""

from __future__ import annotations

import argparse
import subprocess
import sys
from importlib.metadata import EntryPoint

import pytest

from doppler_gym.cli import main as cli_main
from tests.doppler_gym.cli.cli_helpers import error_line, run

HERE = __name__  # the fake plugins' register functions live in this module


def register_hello(subparsers: argparse._SubParsersAction) -> None:
    """A third-party style command: ``doppler hello [--name NAME]``."""
    p = subparsers.add_parser("hello", help="say hello")
    p.add_argument("--name", default="world")
    p.set_defaults(func=lambda args: print(f"hello, {args.name}") or 0)


def register_half_way(subparsers: argparse._SubParsersAction) -> None:
    subparsers.add_parser("half", help="registers, then fails")
    raise RuntimeError("half-way failure")


def register_wrong_name(subparsers: argparse._SubParsersAction) -> None:
    subparsers.add_parser("other", help="not the entry point's name").set_defaults(func=lambda args: 0)


NOT_A_FUNCTION = 3


def plugin(name: str, value: str) -> EntryPoint:
    return EntryPoint(name=name, value=value, group=cli_main.COMMAND_GROUP)


@pytest.fixture
def with_plugins(monkeypatch):
    """Install fake entry points next to the real ones: ``with_plugins(name=value, ...)``."""

    def install(**plugins: str) -> None:
        real = cli_main.entry_points

        def fake(*, group: str) -> list[EntryPoint]:
            return [*real(group=group), *(plugin(n, v) for n, v in plugins.items())]

        monkeypatch.setattr(cli_main, "entry_points", fake)

    return install


def test_the_agents_commands_are_installed_plugins():
    names = {ep.name: ep.value for ep in cli_main.command_plugins()}
    assert names["train"] == "agents.cli.train_cmd:register"
    assert names["eval"] == "agents.cli.eval_cmd:register"
    assert names["demo"] == "agents.cli.demo_cmd:register"


def test_building_the_command_line_loads_no_torch():
    """The plugins' register functions are cheap: ``doppler --help`` imports no torch."""
    code = ("import sys\nfrom doppler_gym.cli.main import build_parser\nbuild_parser()\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_a_third_party_command_registers_through_the_group(capsys, with_plugins):
    with_plugins(hello=f"{HERE}:register_hello")
    code, out, _ = run(capsys, "hello", "--name", "doppler")
    assert code == 0 and out == "hello, doppler\n"
    code, out, _ = run(capsys, "--help")
    assert code == 0
    usage = out.split("\n\n")[0]
    for name in ("graph", "simulate", "collective", "cluster", "whatif", "train", "eval", "demo", "hello"):
        assert name in usage, name
    assert "say hello" in out


def test_the_command_list_is_what_is_registered():
    parser = cli_main.build_parser(plugins=[plugin("hello", f"{HERE}:register_hello")])
    usage = parser.format_usage()
    assert "{graph,simulate,collective,cluster,whatif,hello}" in usage and "train" not in usage


def test_a_plugin_that_fails_to_import_leaves_the_other_commands_working(capsys, with_plugins):
    with_plugins(broken="no_such_module_for_doppler:register")
    code, out, _ = run(capsys, "graph", "info", "paper/chainmm")
    assert code == 0 and "lower bound" in out
    code, out, _ = run(capsys, "--help")
    assert code == 0 and "broken" in out and "unavailable" in out
    for argv in (["broken"], ["broken", "--flag", "x"], ["broken", "--help"]):
        code, _, err = run(capsys, *argv)
        line = error_line(err)
        assert code == 2, argv
        assert "command 'broken' is unavailable" in line and "no_such_module_for_doppler:register" in line
        assert "ModuleNotFoundError" in line


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        (f"{HERE}:register_half_way", "RuntimeError: half-way failure"),
        (f"{HERE}:register_wrong_name", "added no command named 'wrong'"),
        (f"{HERE}:NOT_A_FUNCTION", "not a register(subparsers) function"),
        (f"{HERE}:no_such_name", "AttributeError"),
    ],
)
def test_a_plugin_that_fails_to_register_says_so_when_run(capsys, with_plugins, value, needle):
    name = "half" if "half_way" in value else "wrong"
    with_plugins(**{name: value})
    code, _, err = run(capsys, name)
    line = error_line(err)
    assert code == 2 and f"command {name!r} is unavailable" in line and value in line and needle in line
    code, out, _ = run(capsys, "graph", "list")
    assert code == 0 and "paper/chainmm" in out


def test_a_plugin_may_not_replace_a_command(capsys, with_plugins):
    with_plugins(graph=f"{HERE}:register_hello")
    code, out, err = run(capsys, "graph", "info", "paper/chainmm")
    assert code == 0 and "lower bound" in out
    assert f"plugin {HERE}:register_hello" in err and "the command 'graph' is already registered" in err


def test_debug_mode_raises_the_plugin_error(capsys, with_plugins, monkeypatch):
    with_plugins(broken="no_such_module_for_doppler:register")
    monkeypatch.setenv("DOPPLER_DEBUG", "1")
    with pytest.raises(ModuleNotFoundError):
        cli_main.main(["broken"])
