"""``fairshare`` (``fairshare.cli``): the table of subcommands, lazy imports, ``--version``, help on
every option, usage errors, the exit-code contract, and ``--master`` defaults of every client."""

from __future__ import annotations

import argparse
import json
import logging
import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
from fairshare import cli
from fairshare.settings import Setting, resolve_settings

ROOT = Path(__file__).resolve().parents[3]
CLIENTS = (
    "agent",
    "status",
    "run",
    "agents",
    "weights",
    "quota",
    "reserve",
    "unreserve",
    "frameworks",
    "tasks",
    "stop",
    "logs",
    "roles",
)
# (those talk to a master)
OPERATOR_COMMANDS = ("agents", "weights", "quota", "reserve", "unreserve", "frameworks", "tasks")
OPERATOR_COMMANDS += ("stop", "roles")


def run_cli(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fairshare.cli", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


def run_python(code: str, *paths: Path) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": ":".join(str(path) for path in paths)} if paths else None
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env=env,
    )


# -- help text on every option ---------------------------------------------------------------------


def options_without_help(parser: argparse.ArgumentParser) -> list[str]:
    """Every option and positional of ``parser`` whose help is missing or empty."""
    return [
        "/".join(action.option_strings) or action.dest
        for action in parser._actions
        if not isinstance(action, argparse._SubParsersAction)
        and (not action.help or action.help == argparse.SUPPRESS or not action.help.strip())
    ]


def command_parser(name: str) -> argparse.ArgumentParser:
    """The subparser of ``name`` with its flags, as ``fairshare NAME`` parses."""
    top = cli.build_parser(name)
    [sub] = [a for a in top._actions if isinstance(a, argparse._SubParsersAction)]
    parser: argparse.ArgumentParser = sub.choices[name]
    return parser


def test_the_help_checker_finds_an_option_without_help() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--documented", help="some help")
    parser.add_argument("--bare")
    parser.add_argument("--blank", help=" ")
    parser.add_argument("--hidden", help=argparse.SUPPRESS)
    parser.add_argument("positional")
    assert options_without_help(parser) == ["--bare", "--blank", "--hidden", "positional"]


def test_the_top_level_options_have_help() -> None:
    assert options_without_help(cli.build_parser()) == []


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_option_of_every_command_has_help(name: str) -> None:
    parser = command_parser(name)
    assert len(parser._actions) > 1, f"{name} added no arguments"
    assert options_without_help(parser) == [], name


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_command_has_the_log_flags_and_clients_have_master(name: str) -> None:
    flags = {flag for action in command_parser(name)._actions for flag in action.option_strings}
    assert {"--log-level", "--log-format", "--config"} <= flags
    assert ("--master" in flags) is (name in CLIENTS)


def test_every_command_has_a_one_line_summary() -> None:
    for name, (summary, module) in cli.COMMANDS.items():
        assert summary and "\n" not in summary, name
        packages = ("master", "agent", "framework_sdk", "client_commands", "analysis")
        assert module.split(".")[0] in packages, name


# -- lazy imports, help, version -------------------------------------------------------------------

LOADED = """
    import contextlib, io, sys
    from fairshare import cli
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            cli.main({argv!r})
        except SystemExit:
            pass
    packages = ("master", "agent", "framework_sdk", "analysis", "grpc")
    print(sorted({{m.split(".")[0] for m in sys.modules if m.split(".")[0] in packages}}))
    print(out.getvalue())
"""


def test_help_lists_every_command_and_imports_none_of_them() -> None:
    done = run_python(LOADED.format(argv=["--help"]))
    assert done.returncode == 0, done.stderr
    loaded, _, text = done.stdout.partition("\n")
    assert loaded == "[]"
    for name, (summary, _) in cli.COMMANDS.items():
        assert name in text
        assert summary.split()[0] in text


def test_a_command_imports_only_its_own_module() -> None:
    done = run_python(LOADED.format(argv=["allocate", "--help"]))
    assert done.returncode == 0, done.stderr
    # offline analysis on the master's core: no agent, SDK or gRPC
    assert done.stdout.partition("\n")[0] == "['analysis', 'master']"
    done = run_python(LOADED.format(argv=["simulate", "--help"]))
    assert done.stdout.partition("\n")[0] == "['analysis', 'master']"
    done = run_python(LOADED.format(argv=["status", "--help"]))
    assert done.stdout.partition("\n")[0] == "['grpc']"  # status needs no SDK


def test_version_subprocess() -> None:
    done = run_cli("--version")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == f"fairshare {metadata.version('fairshare')}\n"


def test_no_subcommand_or_an_unknown_one_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in ([], ["frobnicate"], ["--verbose", "status"]):
        with pytest.raises(SystemExit) as caught:
            cli.main(argv)
        assert caught.value.code == 2
    assert "invalid choice: 'frobnicate'" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_help_exits_0(capsys: pytest.CaptureFixture[str], name: str) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main([name, "--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: fairshare {name}")
    assert f"FAIRSHARE_{name.upper()}_<SETTING>" in out  # the variables are explained
    epilog = " ".join(out[out.index("Settings come from") :].split())
    for flag in ("--master", "--log-level", "--log-format"):  # only the shared flags it has
        has = re.search(rf"^  {flag}\b(?!-)", out, re.MULTILINE) is not None
        said = re.search(rf"{flag}\b(?!-)", epilog) is not None
        assert said == has, (name, flag)  # issue 24: up has no --master


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["run", "--master", "h:1"], "required: --name, --task"),
        (["run", "--name", "x"], "required: --task"),
        (["simulate"], "required: SCENARIO.json"),
        (["allocate"], "required: CASE.json"),
        (["stop", "--master", "h:1"], "required: NAME"),
    ],
)
def test_missing_required_arguments_exit_2(
    capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    with pytest.raises(SystemExit) as caught:
        cli.main(argv)
    assert caught.value.code == 2
    assert fragment in capsys.readouterr().err


def test_bad_duration_flag_exits_2_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["master", "--allocation-interval", "soon"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("fairshare master: --allocation-interval 'soon': ")
    assert "not a duration" in err


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["agent", "--log-level", "loud"], "--log-level 'loud'"),
        (["status", "--log-format", "xml"], "--log-format"),  # argparse's choices
        (["up", "--agents", "0"], "--agents '0'"),
        (["weights", "--master", "nohost"], "--master 'nohost'"),
        (["simulate", "x.json", "--out", " "], "--out ' '"),
    ],
)
def test_bad_settings_of_any_command_exit_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    try:
        code = cli.main(argv)
    except SystemExit as usage_error:
        code = int(str(usage_error.code))
    assert code == 2
    out, err = capsys.readouterr()
    assert out == "" and named in err and "Traceback" not in err


# -- --master: flag > FAIRSHARE_<COMMAND>_MASTER > FAIRSHARE_MASTER > TOML > 127.0.0.1:5050 -------


def client_settings(name: str) -> tuple[Setting, ...]:
    """The settings table of client command ``name``."""
    from agent.settings import AGENT_SETTINGS
    from client_commands.logs import LOGS_SETTINGS
    from client_commands.operator import OPERATOR_SETTINGS
    from client_commands.run import RUN_SETTINGS
    from client_commands.status import STATUS_SETTINGS

    tables = {"agent": AGENT_SETTINGS, "run": RUN_SETTINGS, "status": STATUS_SETTINGS}
    tables["logs"] = LOGS_SETTINGS
    operators = dict.fromkeys(OPERATOR_COMMANDS, OPERATOR_SETTINGS)
    return {**tables, **operators}[name]


@pytest.mark.parametrize("name", CLIENTS)
def test_every_client_finds_the_master_the_same_way(name: str, tmp_path: Path) -> None:
    settings = client_settings(name)
    flags = {action.dest for action in command_parser(name)._actions}
    assert {s.name for s in settings if s.flag} <= flags  # the table the command uses
    config = tmp_path / "fs.toml"
    config.write_text('master = "top:1"\n', encoding="utf-8")

    def master(env: dict[str, str], **flags: str) -> str:
        value: str = resolve_settings(name, settings, argparse.Namespace(**flags), env)["master"]
        return value

    assert master({}) == "127.0.0.1:5050"
    assert master({"FAIRSHARE_CONFIG": str(config)}) == "top:1"
    assert master({"FAIRSHARE_CONFIG": str(config), "FAIRSHARE_MASTER": "env:2"}) == "env:2"
    own = {"FAIRSHARE_MASTER": "env:2", f"FAIRSHARE_{name.upper()}_MASTER": "own:3"}
    assert master(own) == "own:3"
    assert master(own, master="flag:4") == "flag:4"


def test_status_without_master_uses_the_variable_or_the_file(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("FAIRSHARE_MASTER", "127.0.0.1:1")  # nothing listens on port 1
    assert cli.main(["status"]) == 1
    assert "no master answers at 127.0.0.1:1 " in capsys.readouterr().err
    config = tmp_path / "fs.toml"
    config.write_text('[status]\nmaster = "127.0.0.1:2"\n', encoding="utf-8")
    monkeypatch.delenv("FAIRSHARE_MASTER")
    assert cli.main(["status", "--config", str(config)]) == 1
    assert "no master answers at 127.0.0.1:2 " in capsys.readouterr().err


# -- the contract around a command's main ----------------------------------------------------------

FAKE_COMMAND = """
import argparse, logging, sys
from fairshare.cli import command_settings
from fairshare.settings import SHARED_SETTINGS, SettingsError, add_setting_flags

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--then", choices=["pipe", "bad", "ok"], help="what to do")
    add_setting_flags(parser, SHARED_SETTINGS)

def main(args: argparse.Namespace) -> int:
    command_settings("fake", SHARED_SETTINGS, args)
    logging.getLogger("fake").info("fake.ran")
    if args.then == "pipe":
        raise BrokenPipeError
    if args.then == "bad":
        raise SettingsError("--then 'bad': not today")
    return 0
"""


@pytest.fixture
def fake_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "fake_command.py").write_text(FAKE_COMMAND, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(cli.COMMANDS, "fake", ("a command for tests", "fake_command"))
    return tmp_path


def test_a_settings_error_exits_2_with_the_command_name(
    fake_command: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["fake", "--then", "bad"]) == 2
    err = capsys.readouterr().err
    assert err.endswith("fairshare fake: --then 'bad': not today\n")


def test_main_leaves_logging_as_it_found_it(
    fake_command: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = logging.getLogger()
    before = (list(root.handlers), root.level)
    assert cli.main(["fake", "--then", "ok", "--log-format", "json", "--log-level", "debug"]) == 0
    assert (list(root.handlers), root.level) == before
    [line] = [line for line in capsys.readouterr().err.splitlines() if "fake.ran" in line]
    record = json.loads(line)
    assert list(record)[:4] == ["ts", "level", "event", "logger"]
    assert (record["event"], record["level"], record["logger"]) == ("fake.ran", "INFO", "fake")


def test_a_reader_that_goes_away_is_not_an_error(fake_command: Path) -> None:
    code = """
        import sys
        from fairshare import cli
        cli.COMMANDS["fake"] = ("a command for tests", "fake_command")
        sys.exit(cli.main(["fake", "--then", "pipe", "--log-level", "error"]))
    """
    done = run_python(code, fake_command, ROOT / "proto")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
