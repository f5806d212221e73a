"""``fairshare.settings``: one resolver (flags > environment > TOML > defaults), its error
messages naming each source, the TOML layout, the shared settings, the parsers and durations."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import pytest
from fairshare.settings import (
    SHARED_SETTINGS,
    Setting,
    SettingsError,
    add_setting_flags,
    boolean,
    choice,
    duration,
    env_name,
    log_level,
    master_address,
    non_empty_text,
    optional_positive_duration,
    parse_duration,
    port,
    positive_duration,
    positive_int,
    positive_number,
    resolve_settings,
    share,
)

DEMO = (
    *SHARED_SETTINGS,
    Setting("port", port, 5050, "the port"),
    Setting("work_dir", non_empty_text, "./work", "the work dir"),
    Setting("policy", choice("drf", "asset"), "drf", "the policy", choices=("drf", "asset")),
    Setting("timeout", positive_duration, "15s", "a timeout"),
    Setting("offer_timeout", optional_positive_duration, None, "maybe a timeout"),
    Setting("validate", boolean, False, "check everything", switch=True),
    Setting("drop", share, 0.0, "fault injection", flag=False),
)


def parser() -> argparse.ArgumentParser:
    built = argparse.ArgumentParser(prog="demo")
    add_setting_flags(built, DEMO)
    return built


def resolve(
    argv: list[str] | None = None, env: dict[str, str] | None = None, command: str = "demo"
) -> dict[str, Any]:
    return resolve_settings(command, DEMO, parser().parse_args(argv or []), env or {})


def write(tmp_path: Path, text: str, name: str = "fs.toml") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# -- precedence ------------------------------------------------------------------------------------


def test_defaults_are_parsed_like_any_value() -> None:
    values = resolve()
    assert values == {
        "master": "127.0.0.1:5050",
        "log_level": "INFO",
        "log_format": "text",
        "port": 5050,
        "work_dir": "./work",
        "policy": "drf",
        "timeout": 15.0,
        "offer_timeout": None,
        "validate": False,
        "drop": 0.0,
    }


def test_flag_beats_environment_beats_toml_beats_default(tmp_path: Path) -> None:
    config = write(
        tmp_path,
        'master = "top:1"\nlog_level = "debug"\n'
        '[demo]\nport = 7000\nwork-dir = "/toml"\ntimeout = 2\npolicy = "asset"\n'
        '[other]\nport = "not even a port"\n',
    )
    env = {"FAIRSHARE_DEMO_PORT": "7001", "FAIRSHARE_DEMO_TIMEOUT": "500ms"}
    values = resolve(["--config", config, "--timeout", "1m"], env)
    assert values["timeout"] == 60.0  # flag
    assert values["port"] == 7001  # environment
    assert values["work_dir"] == "/toml"  # the command's table ('-' or '_' in keys)
    assert values["policy"] == "asset"
    assert values["master"] == "top:1"  # a shared setting at the top level
    assert values["log_level"] == "DEBUG"
    assert values["log_format"] == "text"  # default


def test_a_flag_set_to_zero_is_not_unset() -> None:
    assert resolve(["--port", "0"], {"FAIRSHARE_DEMO_PORT": "7"})["port"] == 0


def test_shared_settings_own_variable_and_the_commands_variable() -> None:
    assert resolve(env={"FAIRSHARE_MASTER": "m:1"})["master"] == "m:1"
    both = {"FAIRSHARE_MASTER": "m:1", "FAIRSHARE_DEMO_MASTER": "d:2"}
    assert resolve(env=both)["master"] == "d:2"  # the command's own variable is more specific
    assert resolve(["--master", "f:3"], both)["master"] == "f:3"
    assert resolve(env={"FAIRSHARE_LOG_FORMAT": "json"})["log_format"] == "json"
    assert resolve(env={"FAIRSHARE_LOG_LEVEL": "warning"})["log_level"] == "WARNING"
    # only shared settings have a variable without the command's name
    assert resolve(env={"FAIRSHARE_PORT": "7"})["port"] == 5050


def test_the_commands_table_beats_the_top_level(tmp_path: Path) -> None:
    config = write(tmp_path, 'master = "top:1"\n[demo]\nmaster = "table:2"\n')
    assert resolve(["--config", config])["master"] == "table:2"


def test_env_names() -> None:
    assert env_name("agent", Setting("work_dir", non_empty_text)) == "FAIRSHARE_AGENT_WORK_DIR"
    assert env_name("master", Setting("port", port)) == "FAIRSHARE_MASTER_PORT"


def test_switches_and_settings_without_a_flag() -> None:
    assert resolve(["--validate"])["validate"] is True
    assert resolve(env={"FAIRSHARE_DEMO_VALIDATE": "yes"})["validate"] is True
    assert resolve(env={"FAIRSHARE_DEMO_DROP": "0.3"})["drop"] == 0.3
    with pytest.raises(SystemExit):
        parser().parse_args(["--drop", "0.3"])  # environment or file only


def test_config_file_from_flag_command_variable_or_shared_variable(tmp_path: Path) -> None:
    first = write(tmp_path, "[demo]\nport = 1\n", "first.toml")
    second = write(tmp_path, "[demo]\nport = 2\n", "second.toml")
    third = write(tmp_path, "[demo]\nport = 3\n", "third.toml")
    env = {"FAIRSHARE_DEMO_CONFIG": second, "FAIRSHARE_CONFIG": third}
    assert resolve(["--config", first], env)["port"] == 1
    assert resolve([], env)["port"] == 2
    assert resolve([], {"FAIRSHARE_CONFIG": third})["port"] == 3


def test_other_commands_tables_and_shared_keys_they_alone_have_are_ignored(
    tmp_path: Path,
) -> None:
    config = write(tmp_path, 'master = "m:1"\n[agent]\nresourcez = 1\n[demo]\nport = 9\n')
    no_master = tuple(setting for setting in DEMO if setting.name != "master")
    args = argparse.Namespace(config=config)
    values = resolve_settings("demo", no_master, args, {})
    assert values["port"] == 9 and "master" not in values


# -- every source names itself in errors -----------------------------------------------------------


def test_bad_flag_names_the_flag() -> None:
    with pytest.raises(SettingsError, match=r"^--port 'http': 'http' is not a port number"):
        resolve(["--port", "http"])
    with pytest.raises(SettingsError, match=r"^--timeout '0s': '0s' must be more than zero"):
        resolve(["--timeout", "0s"])


def test_bad_variable_names_the_variable() -> None:
    with pytest.raises(SettingsError, match=r"^FAIRSHARE_DEMO_TIMEOUT 'soon': .*not a duration"):
        resolve(env={"FAIRSHARE_DEMO_TIMEOUT": "soon"})
    with pytest.raises(SettingsError, match=r"^FAIRSHARE_MASTER 'nohost': .*HOST:PORT"):
        resolve(env={"FAIRSHARE_MASTER": "nohost"})
    with pytest.raises(SettingsError, match=r"^FAIRSHARE_LOG_FORMAT 'xml': .*text, json"):
        resolve(env={"FAIRSHARE_LOG_FORMAT": "xml"})


def test_bad_file_value_names_the_key_and_the_file(tmp_path: Path) -> None:
    config = write(tmp_path, "[demo]\nport = 70000\n")
    with pytest.raises(SettingsError, match=rf"^port in {config} 70000: .*port number"):
        resolve(["--config", config])
    config = write(tmp_path, 'log_level = "loud"\n')
    with pytest.raises(SettingsError, match=rf"^log_level in {config} 'loud': "):
        resolve(["--config", config])


def test_a_bad_value_is_an_error_even_when_a_higher_source_is_good(tmp_path: Path) -> None:
    # The file is read whole: a bad key there is reported even if a flag sets the setting.
    config = write(tmp_path, "[demo]\nportz = 1\n")
    with pytest.raises(SettingsError, match=r"\[demo\] has unknown key 'portz' \(known: "):
        resolve(["--config", config, "--port", "1"])


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("port = [\n", "not valid TOML"),
        ("demo = 3\n", "[demo] must be a table"),
        ("port = 1\n", "unknown top-level key 'port'"),
        ("[demo]\nwork_dirr = '/x'\n", "[demo] has unknown key 'work_dirr'"),
    ],
)
def test_bad_files_name_the_file(tmp_path: Path, text: str, fragment: str) -> None:
    config = write(tmp_path, text)
    with pytest.raises(SettingsError) as caught:
        resolve(["--config", config])
    message = str(caught.value)
    assert message.startswith(f"--config {config}: ")
    assert fragment in message


def test_an_unreadable_file_names_the_flag_or_the_variable(tmp_path: Path) -> None:
    missing = str(tmp_path / "missing.toml")
    with pytest.raises(SettingsError, match=rf"^--config {missing}: cannot read it"):
        resolve(["--config", missing])
    with pytest.raises(SettingsError, match=rf"^FAIRSHARE_CONFIG={missing}: cannot read it"):
        resolve([], {"FAIRSHARE_CONFIG": missing})
    with pytest.raises(SettingsError, match=rf"^FAIRSHARE_DEMO_CONFIG={missing}: cannot read"):
        resolve([], {"FAIRSHARE_DEMO_CONFIG": missing})
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(SettingsError, match="not valid TOML"):
        resolve(["--config", str(binary)])


def test_a_bad_default_names_the_flag() -> None:
    broken = (Setting("port", port, "http", "the port"),)
    with pytest.raises(SettingsError, match=r"^default of --port 'http'"):
        resolve_settings("demo", broken, argparse.Namespace(), {})


# -- flags -----------------------------------------------------------------------------------------


def test_flags_are_none_when_unset_and_help_shows_defaults() -> None:
    args = parser().parse_args([])
    assert all(getattr(args, s.name) is None for s in DEMO if s.flag)
    assert args.config is None
    text = parser().format_help()
    assert "--work-dir WORK_DIR" in text and "(default ./work)" in text
    assert "--master HOST:PORT" in text and "(default 127.0.0.1:5050)" in text
    assert "--drop" not in text


def test_choices_are_checked_by_the_parser(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        parser().parse_args(["--policy", "fifo"])
    assert caught.value.code == 2
    assert "--policy" in capsys.readouterr().err


# -- durations -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("500ms", 0.5),
        ("15s", 15.0),
        ("2m", 120.0),
        ("3", 3.0),
        ("1h", 3600.0),
        ("1.5s", 1.5),
        (" 10s ", 10.0),
        ("0", 0.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "abc", "-1", "5x", "s", "1e3", "1 5s", "ms500", "1.s", "15 sec", ".5s"]
)
def test_parse_duration_rejects_bad_text(text: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_duration(text)
    assert repr(text) in str(caught.value)


def test_duration_settings() -> None:
    assert duration(2) == 2.0 and duration(0.25) == 0.25 and duration("0") == 0.0
    for bad in (True, -1, math.nan, math.inf, "-1s", [1]):
        with pytest.raises(ValueError):
            duration(bad)
    assert positive_duration("1ms") == 0.001
    with pytest.raises(ValueError, match="more than zero"):
        positive_duration(0)
    for off in (None, "", "none", "OFF", " off "):
        assert optional_positive_duration(off) is None
    assert optional_positive_duration("2m") == 120.0
    with pytest.raises(ValueError):
        optional_positive_duration("0s")


# -- parsers ---------------------------------------------------------------------------------------


def test_parsers_accept_good_values() -> None:
    assert port("0") == 0 and port(65535) == 65535
    assert share("0.5") == 0.5 and share(0) == 0.0
    assert positive_int("3") == 3 and positive_int(1) == 1
    assert positive_number("1.5") == 1.5 and positive_number(2) == 2.0
    assert boolean("YES") is True and boolean("off") is False and boolean(True) is True
    assert log_level("debug") == "DEBUG"
    assert master_address(" m:5050 ") == "m:5050"
    assert non_empty_text("  x ") == "x"


@pytest.mark.parametrize(
    ("parse", "raw"),
    [
        (port, "-1"),
        (port, 65536),
        (port, True),
        (port, 1.0),
        (share, 1),
        (share, "nan"),
        (share, True),
        (positive_int, "0"),
        (positive_int, "-2"),
        (positive_int, "1.5"),
        (positive_int, 2.0),
        (positive_int, True),
        (positive_number, "0"),
        (positive_number, "nan"),
        (positive_number, "inf"),
        (positive_number, "x"),
        (positive_number, False),
        (boolean, "maybe"),
        (log_level, "loud"),
        (master_address, "host"),
        (master_address, "host:0"),
        (master_address, ":5050"),
        (master_address, "host:99999"),
        (non_empty_text, " "),
        (non_empty_text, 3),
    ],
)
def test_parsers_reject_bad_values(parse: Any, raw: Any) -> None:
    with pytest.raises(ValueError):
        parse(raw)
