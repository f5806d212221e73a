"""Mesos's allocator semantics the core follows (for frameworks written for Mesos): minimum
allocatable resources for whole-agent offers, and decline filters forgotten when a framework
disconnects (Mesos's ``deactivateFramework`` clears ``offerFilters``)."""

from __future__ import annotations

import argparse

import pytest
from fairshare.resources import ResourceVector
from fairshare.settings import SettingsError

from master.config import MASTER_SETTINGS, load_config
from master.core import CoreConfig, MasterState, SendOffers

R = ResourceVector.parse
MESOS_DEFAULT = (R("cpus:0.01"), R("mem:32"))


def offered_agents(messages: list[object]) -> list[str]:
    return sorted(
        offer.agent_id
        for message in messages
        if isinstance(message, SendOffers)
        for offer in message.offers
    )


def test_agents_with_less_than_the_minimum_free_are_not_offered() -> None:
    state = MasterState(CoreConfig(validate=True, min_allocatable=MESOS_DEFAULT))
    state.handle_add_agent("crumbs", R("cpus:0.005;mem:16;disk:100"), 0.0)
    state.handle_add_agent("memory", R("mem:64"), 0.0)  # mem:32 alone is allocatable
    state.handle_add_agent("whole", R("cpus:1;mem:16"), 0.0)
    state.handle_add_framework("f", 0.0)
    assert offered_agents(state.handle_allocate(1.0)) == ["memory", "whole"]


def test_without_a_minimum_any_free_resources_are_offered() -> None:
    state = MasterState(CoreConfig(validate=True))
    state.handle_add_agent("crumbs", R("cpus:0.005;mem:16"), 0.0)
    state.handle_add_framework("f", 0.0)
    assert offered_agents(state.handle_allocate(1.0)) == ["crumbs"]


def test_a_disconnected_frameworks_filters_are_forgotten() -> None:
    state = MasterState(CoreConfig(validate=True))
    state.handle_add_agent("s1", R("cpus:4;mem:4096"), 0.0)
    state.handle_add_framework("f", 0.0)
    (message,) = state.handle_allocate(1.0)
    assert isinstance(message, SendOffers)
    state.handle_decline("f", [message.offers[0].offer_id], 1.0, refuse_seconds=1000.0)
    assert offered_agents(state.handle_allocate(2.0)) == []  # the filter holds
    state.handle_deactivate_framework("f", 3.0)
    state.handle_activate_framework("f", 4.0)
    assert offered_agents(state.handle_allocate(5.0)) == ["s1"]


def _config(*flags: str) -> object:
    parser = argparse.ArgumentParser()
    for setting in MASTER_SETTINGS:
        parser.add_argument(f"--{setting.name.replace('_', '-')}", dest=setting.name)
    return load_config(parser.parse_args(list(flags)), {})


def test_the_master_flag_defaults_to_mesos_and_takes_none() -> None:
    assert _config().min_allocatable_resources == MESOS_DEFAULT  # type: ignore[attr-defined]
    none = _config("--min-allocatable-resources", "none")
    assert none.min_allocatable_resources == ()  # type: ignore[attr-defined]
    with pytest.raises(SettingsError, match="min-allocatable-resources"):
        _config("--min-allocatable-resources", "cpus:1|")
