"""``agent.tasks.isolation.cgroups`` and ``modes``: which hierarchy is chosen, what limits are
written, and the isolation a daemon picks.

The v2 files are checked on a fake tree (a directory standing in for /sys/fs/cgroup, as the
functions take their paths): this project's machines have v1 memory and cpu controllers, and a
unified hierarchy with neither. The v1 path runs for real in ``test_command_executor.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from fairshare.resources import ResourceVector

from agent.tasks.isolation import cgroup_discovery, cgroups
from agent.tasks.isolation.modes import Isolation, IsolationError, choose

V1_MOUNTS = """\
cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/cpuacct cgroup rw,relatime,cpuacct 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
"""


def fake_v2(root: Path) -> str:
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.subtree_control").write_text("")
    return f"cgroup2 {root} cgroup2 rw,nosuid 0 0\n"


def test_v2_is_chosen_when_it_has_memory_and_cpu(tmp_path: Path) -> None:
    mounts = fake_v2(tmp_path) + V1_MOUNTS
    found = cgroup_discovery.detect(mounts)
    assert found == cgroup_discovery.Hierarchies(2, str(tmp_path), str(tmp_path))
    assert (tmp_path / "fairshare").is_dir()
    assert (tmp_path / "cgroup.subtree_control").read_text() == "+memory +cpu"


def test_v1_is_parsed_combined_or_apart() -> None:
    apart = cgroup_discovery._v1_mounts(cgroup_discovery._mounts(V1_MOUNTS))
    assert apart == cgroup_discovery.Hierarchies(
        1, "/sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpuacct"
    )
    combined = "cgroup /c cgroup rw,cpu,cpuacct 0 0\ncgroup /m cgroup rw,memory 0 0\n"
    assert cgroup_discovery._v1_mounts(
        cgroup_discovery._mounts(combined)
    ) == cgroup_discovery.Hierarchies(1, "/m", "/c", "/c")
    assert (
        cgroup_discovery._v1_mounts(cgroup_discovery._mounts("cgroup /m cgroup rw,memory 0 0\n"))
        is None
    )


def test_no_controllers_no_cgroups(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("hugetlb\n")
    assert cgroup_discovery.detect(f"cgroup2 {tmp_path} cgroup2 rw 0 0\n") is None


def test_v2_task_cgroup_limits(tmp_path: Path) -> None:
    hierarchies = cgroup_discovery.detect(fake_v2(tmp_path))
    assert hierarchies is not None
    name = cgroup_discovery.task_name("fw-1", "web/1")
    assert name.startswith("web_1-") and "/" not in name
    assert name != cgroup_discovery.task_name("fw-2", "web/1")
    cgroup = cgroup_discovery.task_cgroup(hierarchies, "agent-x", name)
    leaf = tmp_path / "fairshare" / "agent-x" / name
    assert cgroup == cgroups.TaskCgroup(2, str(leaf), str(leaf))
    assert cgroups.TaskCgroup.from_json(cgroup.to_json()) == cgroup
    for level in (tmp_path / "fairshare", tmp_path / "fairshare" / "agent-x"):
        level.mkdir(exist_ok=True)
    leaf.mkdir(parents=True)
    (leaf / "cgroup.procs").write_text("")
    cgroups.create(cgroup, 64 << 20, 1.5)
    assert (leaf / "memory.max").read_text() == str(64 << 20)
    assert (leaf / "memory.swap.max").read_text() == "0"
    assert (leaf / "cpu.weight").read_text() == "150"
    assert (leaf / "cpu.max").read_text() == "150000 100000"
    assert (tmp_path / "fairshare" / "agent-x" / "cgroup.subtree_control").read_text() == (
        "+memory +cpu"
    )
    (leaf / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
    (leaf / "memory.peak").write_text("1048576\n")
    (leaf / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert cgroups.usage(cgroup) == (2.5, 1 << 20)
    assert cgroups.oom_killed(cgroup)


def test_v1_limits_on_a_fake_tree(tmp_path: Path) -> None:
    cgroup = cgroups.TaskCgroup(1, str(tmp_path / "m"), str(tmp_path / "c"), str(tmp_path / "a"))
    for directory in cgroup.dirs:
        Path(directory).mkdir()
        (Path(directory) / "cgroup.procs").write_text("")
    (tmp_path / "m" / "memory.memsw.limit_in_bytes").write_text("9223372036854771712\n")
    cgroups.create(cgroup, 32 << 20, 0.001)
    assert (tmp_path / "m" / "memory.limit_in_bytes").read_text() == str(32 << 20)
    assert (tmp_path / "m" / "memory.memsw.limit_in_bytes").read_text() == str(32 << 20)
    assert (tmp_path / "c" / "cpu.shares").read_text() == "2"  # the kernel's minimum
    assert (tmp_path / "c" / "cpu.cfs_quota_us").read_text() == "1000"  # and its minimum
    (tmp_path / "m" / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\n")
    assert not cgroups.oom_killed(cgroup)  # kernels before 4.13 have no oom_kill line


def test_choose_the_strongest_available(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cgroup_discovery, "detect", lambda: None)
    isolation, why = choose(None, tmp_path)
    assert isolation.mode == "rlimits" and "instead of cgroups" in why
    with pytest.raises(IsolationError, match="--isolation cgroups"):
        choose("cgroups", tmp_path)
    assert choose("none", tmp_path)[0].mode == "none"
    found = cgroup_discovery.Hierarchies(1, "/m", "/c", None)
    monkeypatch.setattr(cgroup_discovery, "detect", lambda: found)
    chosen, why = choose(None, tmp_path)
    assert (chosen.mode, chosen.hierarchies, why) == ("cgroups", found, "the strongest available")
    assert chosen.scope == cgroup_discovery.scope_name(tmp_path)


def test_rlimits_limit_the_address_space_to_mem() -> None:
    limits = Isolation("rlimits").prepare(("fw", "t"), ResourceVector.parse("cpus:1;mem:100"))
    assert limits.rlimit_as == 100 << 20 and limits.cgroup is None
    assert Isolation("none").prepare(("fw", "t"), ResourceVector.parse("mem:1")).rlimit_as is None
