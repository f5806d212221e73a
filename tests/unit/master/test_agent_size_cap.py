"""``Authority.check_agent_size``: no agent reports more of a named resource than
``RuntimeLimits.max_agent_resources``; resources the cap does not name are not capped."""

from __future__ import annotations

import pytest
from fairshare.resources import ResourceVector

from master.core.errors import InvalidArgument
from master.runtime.authority import DEFAULT_MAX_AGENT_RESOURCES, Authority, RuntimeLimits


def test_the_default_cap_admits_the_largest_machines_and_refuses_absurd_ones() -> None:
    authority = Authority()
    authority.check_agent_size(ResourceVector.parse("cpus:1920;mem:33554432;gpus:16"))
    authority.check_agent_size(DEFAULT_MAX_AGENT_RESOURCES)  # at the cap: admitted
    with pytest.raises(InvalidArgument, match=r"cpus:4e\+15 .*--max-agent-resources cpus:100000"):
        authority.check_agent_size(ResourceVector.parse("cpus:4000000000000000;mem:64"))


def test_an_operator_cap_names_the_first_resource_above_it() -> None:
    authority = Authority(limits=RuntimeLimits(max_agent_resources=ResourceVector(cpus=8, mem=64)))
    authority.check_agent_size(ResourceVector(cpus=8, mem=64, widgets=10**9))  # widgets: uncapped
    with pytest.raises(InvalidArgument, match="mem:65 is more than one agent may have"):
        authority.check_agent_size(ResourceVector(cpus=1, mem=65))
