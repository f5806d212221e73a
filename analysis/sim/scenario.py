"""Scenario files for ``fairshare simulate``: parsing and validation into immutable specs.

Invariant: ``parse_scenario`` either returns a fully checked ``Scenario`` or raises
``ScenarioError`` whose ``field`` names the offending entry (``users[1].duration.k``); nothing
downstream re-validates. Format (see docs/scenarios.md)::

    {"seed": 1, "policy": "drf", "placement": "best-fit", "slots_per_agent": 14,
     "fit_window": 8,
     "agents": [{"id": "s1", "resources": {"cpus": 9, "mem": 18}, "count": 1, "join": 0}],
     "servers": {"mix": "google", "count": 100, "scale": 1,
                 "join": {"start": 0, "every": 10}},
     "users": [{"id": "u1", "name": "user 1", "task": {"cpus": 0.2, "mem": 0.3},
                "tasks": 1000, "join": 0, "leave": 1080, "weight": 1, "preemptible": false,
                "duration": {"dist": "exponential", "mean": 100},
                "jobs": [{"submit": 10, "tasks": 5, "duration": {"mean": 3}}]}],
     "workload": {"generator": "google-like", "users": 100, "jobs": 2000, ...},
     "until": 1500, "sample_every": 5, "allocation_interval": 1, "measure_from": 0,
     "rebalance": {"every": 10, "grace": 5, "threshold": 0.1, "release": 0.05,
                   "patience": 3, "max_kills": 4, "cooldown": 2},
     "variants": [{"name": "slots-14", "policy": "slots", "slots_per_agent": 14}, ...],
     "roles": {"eng": {"weight": 3, "guarantee": {"cpus": 8}, "limit": {"cpus": 12},
                       "quota_at": 100}},
     "hierarchy": "hdrf"}

``agents`` and ``servers`` may be combined (listed agents first); at least one agent overall.
An agent joins the pool at its ``join`` time (default 0); drawn servers join one by one,
server ``k`` (from 1) at ``start + (k - 1) * every``.
A user has one job of ``tasks`` tasks submitted when it joins, plus the jobs of ``jobs`` (each
submitted at or after its join); ``workload`` adds generated users (``analysis.sim.workload``).
``variants`` lists named changes of top-level keys; each variant is parsed as a whole scenario.
Users may sit in roles (``"role": "eng/dev"``, default ``*``); ``roles`` weighs role paths and
``hierarchy`` (``hdrf``, ``naive``, ``flat``; default: the core's) says how the tree is used; a
role may carry a quota (``guarantee``, ``limit``: ``master.core.quota``), which the operator
sets at ``quota_at`` seconds (default 0).

Here: the top level (keys, agents, servers, rebalance, variants); the specs are
``analysis.sim.scenario_specs``'s, the field readers ``scenario_fields``', the users (listed and
generated) ``scenario_users``'; their names stay importable from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from analysis.sim.scenario_fields import (
    ScenarioError,
    choice_field,
    duration_field,
    number_field,
    object_field,
    quotas_field,
    resources_field,
    roles_field,
    whole_field,
)
from analysis.sim.scenario_specs import (
    Duration,
    JobSpec,
    RebalanceSpec,
    RoleQuota,
    Scenario,
    SimulatedAgent,
    UserSpec,
)
from analysis.sim.scenario_users import parse_users
from analysis.sim.servers import MIXES
from master.core.checks import hierarchy_refusal
from master.core.fairness import FAIRNESS_POLICIES
from master.core.hierarchy import HIERARCHIES
from master.core.placement import PLACEMENT_POLICIES
from master.core.rebalance import RebalanceConfig

__all__ = [
    "Duration",
    "JobSpec",
    "RebalanceSpec",
    "RoleQuota",
    "Scenario",
    "ScenarioError",
    "SimulatedAgent",
    "UserSpec",
    "duration_field",
    "number_field",
    "object_field",
    "parse_scenario",
    "resources_field",
    "whole_field",
]

POLICIES = tuple(FAIRNESS_POLICIES)  # the core's strategy tables name the choices
PLACEMENTS = tuple(PLACEMENT_POLICIES)


def _agents(raw: Mapping[str, Any]) -> tuple[SimulatedAgent, ...]:
    listed = raw.get("agents", [])
    if not isinstance(listed, list):
        raise ScenarioError("agents", "expected a list")
    agents: list[SimulatedAgent] = []
    for index, value in enumerate(listed):
        entry = object_field(value, f"agents[{index}]")
        resources = resources_field(entry.get("resources"), f"agents[{index}].resources")
        count = whole_field(entry, "count", f"agents[{index}].", 1)
        if count < 1:
            raise ScenarioError(f"agents[{index}].count", "must be >= 1")
        base = entry.get("id", f"a{index + 1}")
        if not isinstance(base, str) or not base:
            raise ScenarioError(f"agents[{index}].id", "expected a non-empty string")
        join = number_field(entry, "join", f"agents[{index}].", 0.0)
        if join < 0:
            raise ScenarioError(f"agents[{index}].join", "must be >= 0")
        for n in range(count):
            agents.append(
                SimulatedAgent(base if count == 1 else f"{base}-{n + 1}", resources, join)
            )
    if len({a.id for a in agents}) != len(agents):
        raise ScenarioError("agents", "agent ids repeat")
    return tuple(agents)


def _rebalance(value: Any) -> RebalanceSpec:
    """``rebalance``: ``every`` and ``grace`` seconds, and ``RebalanceConfig``'s settings."""
    raw = object_field(value, "rebalance")
    where = "rebalance."
    every = number_field(raw, "every", where, 10.0)
    grace = number_field(raw, "grace", where, 0.0)
    if every <= 0 or grace < 0:
        raise ScenarioError("rebalance.every/grace", "every must be > 0 and grace >= 0")
    base = RebalanceConfig()
    try:
        config = RebalanceConfig(
            threshold=Fraction(repr(number_field(raw, "threshold", where, float(base.threshold)))),
            release=Fraction(repr(number_field(raw, "release", where, float(base.release)))),
            patience=whole_field(raw, "patience", where, base.patience),
            max_kills=whole_field(raw, "max_kills", where, base.max_kills),
            cooldown=whole_field(raw, "cooldown", where, base.cooldown),
        )
    except ValueError as exc:
        raise ScenarioError("rebalance", str(exc)) from None
    return RebalanceSpec(every, grace, config)


def _servers(doc: Mapping[str, Any]) -> tuple[str | None, int, float, tuple[float, float]]:
    """``servers``: the mix, how many, their scale, and their join schedule (start, every)."""
    if "servers" not in doc:
        return None, 0, 1.0, (0.0, 0.0)
    servers = object_field(doc["servers"], "servers")
    mix = servers.get("mix", "google")
    if mix not in MIXES:
        raise ScenarioError("servers.mix", f"unknown mix {mix!r} (known: {', '.join(MIXES)})")
    count = whole_field(servers, "count", "servers.")
    scale = number_field(servers, "scale", "servers.", 1.0)
    if count < 1 or scale <= 0:
        raise ScenarioError("servers.count", "count must be >= 1 and scale > 0")
    return str(mix), count, scale, _join_schedule(servers.get("join", {}))


def _join_schedule(value: Any) -> tuple[float, float]:
    """``servers.join``: ``{"start": S, "every": E}``, server k (from 1) at ``S + (k-1) E``."""
    raw = object_field(value, "servers.join")
    start = number_field(raw, "start", "servers.join.", 0.0)
    every = number_field(raw, "every", "servers.join.", 0.0)
    if start < 0 or every < 0:
        raise ScenarioError("servers.join", "start and every must be >= 0")
    return start, every


def _variants(doc: Mapping[str, Any]) -> tuple[tuple[str, Scenario], ...]:
    listed = doc.get("variants", [])
    if not isinstance(listed, list):
        raise ScenarioError("variants", "expected a list")
    base = {key: value for key, value in doc.items() if key != "variants"}
    variants = []
    for index, value in enumerate(listed):
        entry = dict(object_field(value, f"variants[{index}]"))
        name = entry.pop("name", None)
        if not isinstance(name, str) or not name or "/" in name or name.startswith("."):
            raise ScenarioError(f"variants[{index}].name", "expected a file-name-safe string")
        if "variants" in entry:
            raise ScenarioError(f"variants[{index}].variants", "variants do not nest")
        try:
            variants.append((name, parse_scenario({**base, **entry})))
        except ScenarioError as exc:
            raise ScenarioError(
                f"variants[{index}].{exc.field}", str(exc).split(": ", 1)[-1]
            ) from None
    if len({name for name, _ in variants}) != len(variants):
        raise ScenarioError("variants", "variant names repeat")
    return tuple(variants)


SCENARIO_KEYS = frozenset(
    {
        "seed", "policy", "placement", "slots_per_agent", "agents", "servers", "users",
        "placement_sample", "until", "sample_every", "allocation_interval", "workload",
        "variants", "name", "description", "measure_from", "fit_window", "rebalance",
        "roles", "hierarchy",
    }
)  # fmt: skip


def parse_scenario(raw: Any) -> Scenario:
    """Check a decoded scenario document; raises ``ScenarioError`` naming the bad field."""
    doc = object_field(raw, "scenario")
    unknown = sorted(set(doc) - SCENARIO_KEYS)
    if unknown:
        hint = (
            " (this looks like a case file of fairshare allocate: docs/cases.md;"
            " scenarios: docs/scenarios.md)"
            if "frameworks" in doc or "resources" in doc
            else f" (known: {', '.join(sorted(SCENARIO_KEYS))})"
        )
        raise ScenarioError(unknown[0], f"unknown key{hint}")
    agents = _agents(doc)
    mix, mix_count, mix_scale, mix_join = _servers(doc)
    if not agents and not mix_count:
        raise ScenarioError("agents", "no agents: list some or draw them from 'servers'")
    seed = whole_field(doc, "seed", "", 0)
    users = parse_users(doc, seed)
    until = None if doc.get("until") is None else number_field(doc, "until", "")
    sample_every = number_field(doc, "sample_every", "", 0.0)
    interval = number_field(doc, "allocation_interval", "", 0.0)
    measure_from = number_field(doc, "measure_from", "", 0.0)
    fit_window = whole_field(doc, "fit_window", "", 8)
    if measure_from < 0 or fit_window < 0:
        raise ScenarioError("measure_from/fit_window", "must be >= 0")
    rebalance = None if doc.get("rebalance") is None else _rebalance(doc["rebalance"])
    if rebalance is not None and until is None:
        raise ScenarioError("rebalance", "a rebalancing timer needs 'until'")
    slots = whole_field(doc, "slots_per_agent", "", 14)
    if slots < 1 or sample_every < 0 or (until is not None and until <= 0):
        raise ScenarioError("slots_per_agent/sample_every/until", "out of range")
    if interval < 0:
        raise ScenarioError("allocation_interval", "must be >= 0")
    sample = doc.get("placement_sample", 8)
    if sample == "all":
        sample = len(agents) + mix_count
    if isinstance(sample, bool) or not isinstance(sample, int) or sample < 1:
        raise ScenarioError(
            "placement_sample", f"expected a whole number >= 1 or 'all', got {sample!r}"
        )
    policy = choice_field(doc, "policy", POLICIES, "drf")
    hierarchy = doc.get("hierarchy", "")
    if not isinstance(hierarchy, str):
        raise ScenarioError(
            "hierarchy", f"expected one of {', '.join(HIERARCHIES)}, got {hierarchy!r}"
        )
    refusal = hierarchy_refusal(hierarchy, policy)  # the core's rule
    if refusal is not None:
        raise ScenarioError("hierarchy", refusal)
    role_weights = roles_field(doc)
    role_quotas = quotas_field(doc)
    return Scenario(
        seed=seed,
        policy=policy,
        placement=choice_field(doc, "placement", PLACEMENTS, "best-fit"),
        slots_per_agent=slots,
        agents=agents,
        mix=mix,
        mix_count=mix_count,
        mix_scale=mix_scale,
        users=tuple(users),
        until=until,
        sample_every=sample_every,
        allocation_interval=interval,
        variants=_variants(doc),
        sample_size=sample,
        mix_join_start=mix_join[0],
        mix_join_every=mix_join[1],
        fit_window=fit_window,
        measure_from=measure_from,
        rebalance=rebalance,
        hierarchy=hierarchy,
        role_weights=role_weights,
        has_roles=bool(role_weights) or any(user.role != "*" for user in users),
        role_quotas=role_quotas,
    )
