"""The distribution holds every package of the source tree (issue 16: a non-editable install,
as the container image makes, lacked ``master.runtime``, so ``fairshare master`` could not start
there while every test, on an editable install, passed)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def source_packages() -> set[str]:
    """Every directory with an ``__init__.py`` under the distributed top-level packages."""
    roots = {
        "master": ROOT / "master",
        "agent": ROOT / "agent",
        "framework_sdk": ROOT / "framework_sdk",
        "client_commands": ROOT / "client_commands",
        "analysis": ROOT / "analysis",
        "fairshare": ROOT / "proto" / "fairshare",
    }
    found = set()
    for name, path in roots.items():
        for init in path.rglob("__init__.py"):
            parts = init.parent.relative_to(path).parts
            if "__pycache__" not in parts:
                found.add(".".join((name, *parts)))
    return found


def test_every_package_is_in_the_distribution() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    assert source_packages() - listed == set()
    assert listed - source_packages() == set()


def test_the_dashboard_files_are_package_data() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = config["tool"]["setuptools"]["package-data"]["master.web"]
    static = ROOT / "master" / "web" / "static"
    shipped = {p.name for pattern in patterns for p in static.glob(pattern.split("/", 1)[1])}
    assert shipped == {p.name for p in static.iterdir()} >= {"index.html", "dashboard.js"}
