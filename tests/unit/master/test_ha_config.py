"""The HA settings of ``fairshare master`` (docs/architecture.md §5): ``--registry`` (sqlite or an
``etcd://`` target), ``--election-ttl`` (whole seconds, at least 2) and ``--advertise``."""

from __future__ import annotations

import argparse

import pytest
from fairshare.settings import SettingsError

from master.config import load_config


def args(**flags: object) -> argparse.Namespace:
    return argparse.Namespace(**flags)


def test_the_registry_is_sqlite_by_default_or_an_etcd_target() -> None:
    assert load_config(args(), {}).registry == "sqlite"
    config = load_config(args(registry="etcd://h1:2379,h2:2379/prod"), {})
    assert config.registry.startswith("etcd://") and "h2:2379" in config.registry
    env = {"FAIRSHARE_MASTER_REGISTRY": "etcd://127.0.0.1:2379"}
    assert load_config(args(), env).registry.startswith("etcd://127.0.0.1:2379")


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        ({"registry": "postgres://db"}, "registry"),
        ({"registry": "etcd://"}, "registry"),
        ({"election_ttl": "1s"}, "election"),
        ({"election_ttl": "2.5s"}, "election"),
        ({"advertise": "no-port"}, "advertise"),
    ],
)
def test_bad_ha_settings_name_their_field(flags: dict[str, object], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        load_config(args(**flags), {})


def test_election_ttl_and_advertise() -> None:
    config = load_config(args(election_ttl="3s", advertise="m1.example:5050"), {})
    assert config.election_ttl == 3.0 and config.advertise == "m1.example:5050"
    assert load_config(args(), {}).election_ttl == 5.0
