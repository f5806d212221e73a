"""scripts/structure_report.py: the figures of the tree's structure (lines per package and
subpackage, loose modules, non-test files over a line limit) are the files' own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "structure_report.py"


def report(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout


def write(path: Path, lines: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("x = 1\n" * lines, encoding="utf-8")


def test_a_small_tree_is_counted_exactly(tmp_path: Path) -> None:
    write(tmp_path / "master" / "__init__.py", 1)
    write(tmp_path / "master" / "daemon.py", 450)
    write(tmp_path / "master" / "core" / "__init__.py", 2)
    write(tmp_path / "master" / "core" / "state.py", 30)
    write(tmp_path / "analysis" / "__init__.py", 3)
    write(tmp_path / "proto" / "fairshare" / "v1" / "common_pb2.py", 900)  # generated
    write(tmp_path / "tests" / "test_big.py", 999)  # a test
    write(tmp_path / ".venv-other" / "lib" / "big.py", 999)  # a virtual environment
    out = report("--root", str(tmp_path), "--limit", "400")
    lines = out.splitlines()
    assert lines[lines.index("  " + "master".ljust(36) + "    4     483") + 1] == (
        "    " + "master.core".ljust(34) + "    2      32"
    )
    assert "  " + "analysis".ljust(36) + "    1       3" in lines
    assert "  master (1): daemon.py" in lines
    assert out.endswith("non-test files over 400 lines (1):\n    450 master/daemon.py\n")


def test_this_tree_lists_only_files_over_the_limit() -> None:
    out = report("--limit", "300")
    listed = out.split("non-test files over 300 lines", 1)[1].splitlines()[1:]
    assert listed
    for row in listed:
        count, path = row.split()
        assert int(count) > 300 and not path.startswith("tests/")
        assert len((ROOT / path).read_text(encoding="utf-8").splitlines()) == int(count)
