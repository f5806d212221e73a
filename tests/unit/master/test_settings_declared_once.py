"""Each master setting declared once: the table ``MASTER_SETTINGS`` is the
source of every default, choice and help; ``MasterConfig``, ``RuntimeConfig``, ``RuntimeLimits``,
``RebalanceSettings`` and ``CoreConfig`` agree with it, and the daemon builds the runtime's configs
from the resolved settings by field name, so no setting is lost between them."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

import pytest
from fairshare.setting_tables import SERVER_TLS_SETTINGS, built_from, table_defaults
from fairshare.settings import ETCD_SECURITY_SETTINGS, add_setting_flags, etcd_security

from agent.config import AgentSettings
from agent.settings import AGENT_SETTINGS
from client_commands.run_config import RUN_SETTINGS, RunConfig, run_config
from master.commands.up import UP_SETTINGS
from master.config import MASTER_SETTINGS, MasterConfig, load_config, master_config
from master.core.config import CoreConfig
from master.daemon.runtime_config import rebalance_settings, runtime_config
from master.runtime.authority import RuntimeLimits
from master.runtime.rebalance_settings import RebalanceSettings
from master.runtime.state import RuntimeConfig
from master.security import load_security
from master.settings import MASTER_DEFAULTS
from master.settings.allocation import CORE_RENAMES

NO_FLAG = {"fault_drop_acks", "etcd_password"}  # fault injection; a secret kept off argv
CORE_DIFFERS = {"min_allocatable"}  # the master takes Mesos's default; a bare core offers anything
RUNTIME_ONLY = {  # RuntimeConfig fields that are not settings (built or wired by the daemon)
    "core", "allocation_batch", "agent_heartbeat_interval", "rebalance", "version", "acl",
    "authenticated", "limits", "events",
}  # fmt: skip


def _field_names(cls: type) -> set[str]:
    return {field.name for field in dataclasses.fields(cls)}


def test_the_master_config_is_the_table_with_its_defaults() -> None:
    folded = {s.name for s in ETCD_SECURITY_SETTINGS}  # one ``etcd`` field
    assert sorted({s.name for s in MASTER_SETTINGS} - folded) == sorted(
        _field_names(MasterConfig) - {"etcd"}
    )
    assert len({s.name for s in MASTER_SETTINGS}) == len(MASTER_SETTINGS)
    assert MasterConfig() == master_config(MASTER_DEFAULTS)
    assert table_defaults(MASTER_SETTINGS) == MASTER_DEFAULTS
    assert {s.name for s in MASTER_SETTINGS if not s.flag} == NO_FLAG


def test_every_setting_has_help_and_its_default_among_its_choices() -> None:
    for setting in MASTER_SETTINGS:
        assert setting.help.strip(), setting.name
        if setting.choices is not None:
            assert MASTER_DEFAULTS[setting.name] in setting.choices, setting.name


def test_the_runtime_limits_are_settings_with_the_tables_defaults() -> None:
    limits = RuntimeLimits()
    for name in _field_names(RuntimeLimits):
        assert getattr(limits, name) == MASTER_DEFAULTS[name], name


def test_the_rebalancers_knobs_are_the_rebalance_settings() -> None:
    knobs = RebalanceSettings()
    for name in _field_names(RebalanceSettings):
        assert getattr(knobs, name) == MASTER_DEFAULTS["rebalance_" + name], name


def test_the_runtime_config_is_settings_plus_documented_wiring() -> None:
    runtime = RuntimeConfig()
    for name in _field_names(RuntimeConfig) - RUNTIME_ONLY:
        assert getattr(runtime, name) == MASTER_DEFAULTS[name], name


def test_the_core_and_the_master_agree_on_every_shared_default() -> None:
    core = CoreConfig()
    shared = [
        (field, CORE_RENAMES.get(field, field))
        for field in _field_names(CoreConfig)
        if CORE_RENAMES.get(field, field) in MASTER_DEFAULTS
    ]
    assert {field for field, _ in shared} >= {"policy", "placement", "sample_size", "validate"}
    for field, setting in shared:
        if field not in CORE_DIFFERS:
            assert getattr(core, field) == MASTER_DEFAULTS[setting], field
    assert set(CORE_RENAMES.values()) <= set(MASTER_DEFAULTS)


def test_the_daemon_hands_every_setting_to_the_runtime_by_name() -> None:
    values = {
        "policy": "pf",
        "placement": "random",
        "placement_sample": 7,
        "min_allocatable_resources": "mem:64",
        "offer_timeout": "9s",
        "validate": "yes",
        "allocation_interval": "2s",
        "agent_timeout": "40s",
        "heartbeat_interval": "3s",
        "reregistration_timeout": "1m",
        "max_frameworks_per_principal": 3,
        "max_agents_per_principal": 4,
        "registration_rate": 5,
        "registration_burst": 6,
        "registry_max_agent_age": "1d",
        "registry_max_agent_count": 8,
        "registry_max_framework_age": "2d",
        "registry_max_framework_count": 9,
        "max_agent_resources": "cpus:10;mem:20",
        "max_principal_resources": "cpus:30;mem:60",
        "max_resource_names": 5,
    }
    env = {f"FAIRSHARE_MASTER_{name.upper()}": str(value) for name, value in values.items()}
    config = load_config(argparse.Namespace(), env)
    runtime = runtime_config(config, load_security(config))
    for name in _field_names(RuntimeLimits):
        assert getattr(runtime.limits, name) == getattr(config, name) != MASTER_DEFAULTS[name]
    for name in _field_names(RuntimeConfig) - RUNTIME_ONLY:
        assert getattr(runtime, name) == getattr(config, name), name
    for field in _field_names(CoreConfig):
        setting = CORE_RENAMES.get(field, field)
        if setting in MASTER_DEFAULTS:
            assert getattr(runtime.core, field) == getattr(config, setting), field
    assert runtime.core.sample_size == 7 and runtime.core.offer_timeout == 9.0
    assert runtime.rebalance is None


def test_the_rebalance_knobs_come_through_the_prefix() -> None:
    env = {"FAIRSHARE_MASTER_REBALANCE": "on", "FAIRSHARE_MASTER_REBALANCE_MAX_KILLS": "2"}
    knobs = rebalance_settings(load_config(argparse.Namespace(), env))
    assert knobs == RebalanceSettings(max_kills=2)


def test_server_tls_settings_are_one_declaration_for_master_and_agent() -> None:
    for setting in SERVER_TLS_SETTINGS:
        assert setting in MASTER_SETTINGS and setting in AGENT_SETTINGS
        assert [s for s in MASTER_SETTINGS if s.name == setting.name] == [setting]
        assert [s for s in AGENT_SETTINGS if s.name == setting.name] == [setting]


def test_help_shows_each_default_from_the_table() -> None:
    parser = argparse.ArgumentParser()
    add_setting_flags(parser, MASTER_SETTINGS)
    text = " ".join(parser.format_help().split())
    assert "(default 5050)" in text and "(default drf)" in text and "(default 2w)" in text


def test_built_from_copies_fields_by_name_prefix_and_rename(tmp_path: Path) -> None:
    @dataclasses.dataclass(frozen=True)
    class Source:
        a: int = 1
        x_b: int = 2
        other: int = 3

        @property
        def c(self) -> int:  # a property is not a field: never copied
            return 99

    @dataclasses.dataclass(frozen=True)
    class Target:
        a: int = 0
        c: int = 0
        d: int = 0

    assert built_from(Target, Source()) == Target(a=1)
    assert built_from(Target, Source(), renames={"d": "other"}, c=5) == Target(a=1, c=5, d=3)

    @dataclasses.dataclass(frozen=True)
    class Prefixed:
        b: int = 0

    assert built_from(Prefixed, Source(), prefix="x_") == Prefixed(b=2)


def test_the_agents_optional_settings_take_the_tables_defaults() -> None:
    defaults = table_defaults(AGENT_SETTINGS)
    names = {s.name for s in AGENT_SETTINGS}
    for field in dataclasses.fields(AgentSettings):
        if field.name == "etcd":  # the etcd_* settings folded into one value
            assert field.default == etcd_security(defaults)
            continue
        assert field.name in names, field.name  # every field is a setting
        if field.default is not dataclasses.MISSING:
            assert field.default == defaults[field.name], field.name


def test_run_reads_its_defaults_and_values_from_its_table() -> None:
    defaults = table_defaults(RUN_SETTINGS)
    for field in dataclasses.fields(RunConfig):
        if field.name in defaults and field.default is not dataclasses.MISSING:
            assert field.default == defaults[field.name], field.name
    env = {"FAIRSHARE_RUN_CONNECT_TIMEOUT": "7s", "FAIRSHARE_RUN_COUNT": "3"}
    parsed = argparse.Namespace(name="fw", task="cpus:1")
    with pytest.MonkeyPatch.context() as patch:
        for name in list(os.environ):
            if name.startswith("FAIRSHARE_"):
                patch.delenv(name)
        for name, value in env.items():
            patch.setenv(name, value)
        config = run_config(parsed)
    assert (config.connect_timeout, config.count, config.role) == (7.0, 3, "*")


def test_up_uses_the_masters_own_settings() -> None:
    master = {s.name: s for s in MASTER_SETTINGS}
    shared = [s for s in UP_SETTINGS if s.name in ("port", "policy", "placement", "hierarchy")]
    assert len(shared) == 4
    for setting in shared:
        mine = master[setting.name]
        assert (setting.parse, setting.default, setting.choices, setting.metavar) == (
            mine.parse,
            mine.default,
            mine.choices,
            mine.metavar,
        )
