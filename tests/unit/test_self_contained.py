"""A clone is whole: nothing in the repository points to a design file or papers outside it.

Docstrings and docs once referred to a design document and a papers folder beside the
repository, which a clone does not have. The architecture is ``docs/architecture.md`` now and
the papers are cited by title, authors and venue. These tests keep it so: no text file of the
repository (tracked, or new and not ignored: ``git ls-files --cached --others
--exclude-standard``) names the old design file or the folder beside the repository, and every
repository path that ``docs/architecture.md`` writes in backquotes exists.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ARCHITECTURE = ROOT / "docs" / "architecture.md"

TEXT_SUFFIXES = frozenset(
    {".py", ".pyi", ".md", ".toml", ".yaml", ".yml", ".proto", ".json", ".cfg", ".txt"}
)
# Spelled in pieces so that this file does not name them itself.
OUTSIDE_REFERENCES = ("DESIGN" + ".md", ".." + "/shared/", "shared" + "/papers")

# What a repository path in backquotes ends with when it names a file.
PATH_SUFFIXES = (*TEXT_SUFFIXES, ".sh", ".png", ".html", ".css", ".js")
PATH_SHAPE = re.compile(r"[\w.-]+(?:/[\w.*-]+)*/?")


def repository_files() -> list[Path]:
    """The repository's files as git lists them (tracked, and new ones not ignored)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git work tree")
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    return [ROOT / name for name in dict.fromkeys(listed.split("\0")) if name]


def test_no_text_file_points_outside_the_repository() -> None:
    offenders = []
    for path in repository_files():
        if path.suffix not in TEXT_SUFFIXES or not path.is_file():
            continue  # a tracked file deleted in the work tree is not there to read
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            for reference in OUTSIDE_REFERENCES:
                if reference in line:
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {reference}")
    assert offenders == []


def test_no_file_of_the_repository_is_a_link_leading_out_of_it() -> None:
    """A symlink committed by mistake (a venv linked from another clone, as cafc8ce had) makes
    a clean clone different from the tree it came from: CI's own venv cannot be created."""
    outside = []
    for path in repository_files():
        if path.is_symlink():
            target = path.resolve()
            if not target.is_relative_to(ROOT.resolve()):
                outside.append(f"{path.relative_to(ROOT)} -> {target}")
    assert outside == []


def repository_paths(markdown: str) -> list[str]:
    """Paths into the repository written in backquotes: a backquoted word (up to its first
    space) shaped like a path that starts at one of the repository's top-level entries, or any
    such word with a ``/`` that ends like a file name."""
    found = []
    for quoted in re.findall(r"`([^`\n]+)`", markdown):
        word = quoted.split()[0] if quoted.split() else ""
        if not PATH_SHAPE.fullmatch(word) or "/" not in word:
            continue
        top = word.split("/", 1)[0]
        if (ROOT / top).exists() or word.endswith(PATH_SUFFIXES):
            found.append(word)
    return found


def test_every_path_the_architecture_names_exists() -> None:
    paths = repository_paths(ARCHITECTURE.read_text(encoding="utf-8"))
    assert len(paths) > 50  # the page names the code it describes
    missing = [p for p in paths if not any(ROOT.glob(p.rstrip("/")))]
    assert missing == []


def test_the_path_reader_finds_paths_and_only_paths() -> None:
    text = (
        "`master/core/state.py`, `agent/core/` and `proto/fairshare/v1/*.proto`; "
        "`tests/bench/bench_core.py --quick`; `docs/no-such-page.md`; not `eng/dev`, "
        "`<work-dir>/agent.sqlite`, `/api/v1/state`, `fairshare up --masters N` or `MasterState`"
    )
    assert repository_paths(text) == [
        "master/core/state.py",
        "agent/core/",
        "proto/fairshare/v1/*.proto",
        "tests/bench/bench_core.py",
        "docs/no-such-page.md",
    ]
