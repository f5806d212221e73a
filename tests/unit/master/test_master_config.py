"""``MasterConfig``: the master's settings table, resolved flags > environment > TOML > defaults."""

from __future__ import annotations

import argparse
from dataclasses import fields
from pathlib import Path

import pytest
from fairshare.settings import ETCD_SECURITY_SETTINGS, SettingsError

from master.config import MASTER_SETTINGS, MasterConfig, load_config
from master.security import load_security
from master.settings.serving import auto_io_workers, usable_cores


def args(**flags: object) -> argparse.Namespace:
    return argparse.Namespace(**flags)


def test_config_defaults() -> None:
    assert load_config(args(), {}) == MasterConfig()


def test_the_table_has_every_field_of_the_config() -> None:
    etcd = {s.name for s in ETCD_SECURITY_SETTINGS}  # one field: etcd (an EtcdSecurity)
    names = sorted(f.name for f in fields(MasterConfig) if f.name != "etcd")
    assert sorted(s.name for s in MASTER_SETTINGS if s.name not in etcd) == names
    assert etcd <= {s.name for s in MASTER_SETTINGS}
    assert [s.name for s in MASTER_SETTINGS if not s.flag] == ["etcd_password", "fault_drop_acks"]


def test_the_etcd_settings_and_the_registry_key(tmp_path: Path) -> None:
    """Issue 23, finding 2: how the master reaches etcd, and the key signing its rows."""
    ca, password = tmp_path / "ca.pem", tmp_path / "password"
    ca.write_text("x")
    password.write_text("pw\n")
    config = load_config(
        args(
            registry="etcd://127.0.0.1:2379/x",
            etcd_tls_ca=str(ca),
            etcd_user="fairshare-master",
            etcd_password_file=str(password),
        ),
        {},
    )
    assert (config.etcd.ca, config.etcd.user, config.etcd.password) == (
        ca,
        "fairshare-master",
        "pw",
    )
    key = tmp_path / "registry.key"
    key.write_text("short\n")
    with pytest.raises(SettingsError, match=r"--registry-key: .* holds 5 bytes"):
        load_security(load_config(args(registry="etcd://h/x", registry_key=str(key)), {}))
    key.write_text("k" * 40)
    with pytest.raises(SettingsError, match="--registry-key: signs the rows of an etcd registry"):
        load_security(load_config(args(registry_key=str(key)), {}))
    secured = load_security(load_config(args(registry="etcd://h/x", registry_key=str(key)), {}))
    assert secured.registry_key == b"k" * 40


def test_config_precedence_flags_env_toml_defaults(tmp_path: Path) -> None:
    toml = tmp_path / "fs.toml"
    toml.write_text(
        '[master]\npolicy = "pf"\nplacement = "first-fit"\nagent-timeout = "30s"\n'
        "allocation_interval = 0.5\n"
        '[agent]\nresources = "cpus:1"\n',
        encoding="utf-8",
    )
    env = {"FAIRSHARE_MASTER_POLICY": "asset", "FAIRSHARE_LOG_FORMAT": "json"}
    config = load_config(args(config=str(toml), placement="random", port=0), env)
    assert config.policy == "asset"  # env over TOML
    assert config.placement == "random"  # flag over TOML
    assert config.agent_timeout == 30.0 and config.allocation_interval == 0.5  # TOML
    assert config.log_format == "json"  # shared variable
    assert config.port == 0 and config.metrics_port == 9100  # flag 0 is not "unset"
    specific = {"FAIRSHARE_LOG_FORMAT": "json", "FAIRSHARE_MASTER_LOG_FORMAT": "text"}
    assert load_config(args(), specific).log_format == "text"
    assert load_config(args(), {"FAIRSHARE_MASTER_OFFER_TIMEOUT": "500ms"}).offer_timeout == 0.5
    assert load_config(args(), {"FAIRSHARE_MASTER_VALIDATE": "yes"}).validate
    assert load_config(args(), {"FAIRSHARE_MASTER_CONFIG": str(toml)}).policy == "pf"
    assert load_config(args(), {"FAIRSHARE_CONFIG": str(toml)}).policy == "pf"
    drop = {"FAIRSHARE_MASTER_FAULT_DROP_ACKS": "0.3"}
    assert load_config(args(), drop).fault_drop_acks == 0.3


def test_shared_top_level_keys_apply_and_the_master_address_is_ignored(tmp_path: Path) -> None:
    toml = tmp_path / "fs.toml"
    toml.write_text('master = "elsewhere:5050"\nlog_level = "debug"\n', encoding="utf-8")
    config = load_config(args(config=str(toml)), {})
    assert config.log_level == "DEBUG"
    toml.write_text("master = 3\n", encoding="utf-8")  # another command's setting, not [master]
    assert load_config(args(config=str(toml)), {}) == MasterConfig()
    assert load_config(args(), {"FAIRSHARE_MASTER": "elsewhere:5050"}) == MasterConfig()


@pytest.mark.parametrize(
    ("flags", "env", "toml", "fragment"),
    [
        ({}, {"FAIRSHARE_MASTER_PORT": "http"}, None, "FAIRSHARE_MASTER_PORT 'http': "),
        ({}, {"FAIRSHARE_MASTER_AGENT_TIMEOUT": "-1"}, None, "FAIRSHARE_MASTER_AGENT_TIMEOUT"),
        ({}, {"FAIRSHARE_MASTER_POLICY": "fifo"}, None, "FAIRSHARE_MASTER_POLICY 'fifo'"),
        ({}, {"FAIRSHARE_MASTER_FAULT_DROP_ACKS": "1.5"}, None, "share in [0, 1)"),
        ({"port": 70000}, {}, None, "--port"),
        ({}, {}, '[master]\npolcy = "drf"\n', "unknown key 'polcy'"),
        ({}, {}, 'polcy = "drf"\n', "unknown top-level key 'polcy'"),
        ({}, {}, "policy = [\n", "not valid TOML"),
        ({}, {}, '[master]\nallocation-interval = "0s"\n', "more than zero"),
    ],
)
def test_bad_settings_name_their_source(
    tmp_path: Path, flags: dict[str, object], env: dict[str, str], toml: str | None, fragment: str
) -> None:
    if toml is not None:
        path = tmp_path / "bad.toml"
        path.write_text(toml, encoding="utf-8")
        flags = {**flags, "config": str(path)}
    with pytest.raises(SettingsError) as caught:
        load_config(args(**flags), env)
    assert fragment in str(caught.value)


def test_missing_config_file() -> None:
    with pytest.raises(SettingsError, match="cannot read"):
        load_config(args(config="/nonexistent/fs.toml"), {})


def test_policy_choices_come_from_the_cores_tables_and_the_sample_size_is_a_setting() -> None:
    from master.core.fairness import FAIRNESS_POLICIES
    from master.core.placement import PLACEMENT_POLICIES

    by_name = {s.name: s for s in MASTER_SETTINGS}
    assert by_name["policy"].choices == tuple(FAIRNESS_POLICIES)
    assert by_name["placement"].choices == tuple(PLACEMENT_POLICIES)
    assert load_config(args(placement_sample="16"), {}).placement_sample == 16
    env = {"FAIRSHARE_MASTER_PLACEMENT_SAMPLE": "32"}
    assert load_config(args(), env).placement_sample == 32
    with pytest.raises(SettingsError, match="--placement-sample '0'"):
        load_config(args(placement_sample="0"), {})


def test_io_workers_auto_is_one_fewer_than_the_cores_from_four_on() -> None:
    assert [auto_io_workers(n) for n in (1, 2, 3, 4, 8, 200)] == [0, 0, 0, 3, 7, 64]
    cores = auto_io_workers(usable_cores())
    assert load_config(args(io_workers="auto"), {}).io_workers == cores
    assert load_config(args(), {}).io_workers == cores  # the default
    assert load_config(args(io_workers="2"), {"FAIRSHARE_MASTER_IO_WORKERS": "0"}).io_workers == 2
    with pytest.raises(SettingsError, match="neither auto nor a whole number"):
        load_config(args(io_workers="many"), {})
