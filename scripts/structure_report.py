"""Print the source tree's structure in figures: lines per top-level package and subpackage,
the loose modules of each top-level package (modules beside its subpackages), and the non-test
files over a line limit (400 by default).

Run: ``python3 scripts/structure_report.py [--limit N] [--root CHECKOUT]``. Counted: the
``*.py`` files of the distributed packages (``master``, ``agent``, ``framework_sdk``,
``client_commands``, ``analysis`` and the kernel under ``proto/fairshare``), generated
``*_pb2*`` code left out; the limit list covers every non-test ``*.py`` file of the tree
(generated code, virtual environments and other hidden directories left out). Standard
library only; reads files, changes nothing.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES: dict[str, Path] = {}


def _set_root(root: Path) -> None:
    global ROOT
    ROOT = root.resolve()
    PACKAGES.clear()
    PACKAGES.update(
        fairshare=ROOT / "proto" / "fairshare",
        master=ROOT / "master",
        agent=ROOT / "agent",
        framework_sdk=ROOT / "framework_sdk",
        client_commands=ROOT / "client_commands",
        analysis=ROOT / "analysis",
    )


SKIPPED_DIRS = {"tests", "__pycache__", "build", "dist"}


def _skipped(part: str) -> bool:
    """A directory left out: tests, builds, caches, and hidden ones (.venv*, .git)."""
    return part in SKIPPED_DIRS or part.startswith(".")


def _generated(path: Path) -> bool:
    return "_pb2" in path.name


def _lines(path: Path) -> int:
    with path.open(encoding="utf-8") as handle:
        return sum(1 for _ in handle)


def _sources(root: Path) -> list[Path]:
    return sorted(
        path
        for path in root.rglob("*.py")
        if not _generated(path) and not any(_skipped(part) for part in path.relative_to(ROOT).parts)
    )


def package_lines() -> list[tuple[str, int, int]]:
    """(package or subpackage, files, lines), top-level packages first, each followed by its
    subpackages (the lines of a subpackage include its own subpackages')."""
    rows = []
    for name, root in PACKAGES.items():
        if not root.is_dir():
            continue
        files = _sources(root)
        rows.append((name, len(files), sum(_lines(p) for p in files)))
        per_sub: dict[str, list[Path]] = defaultdict(list)
        for path in files:
            parts = path.relative_to(root).parts
            for depth in range(1, len(parts)):
                per_sub[".".join((name, *parts[:depth]))].append(path)
        for sub in sorted(per_sub):
            paths = per_sub[sub]
            rows.append((sub, len(paths), sum(_lines(p) for p in paths)))
    return rows


def loose_modules() -> dict[str, list[str]]:
    """Per top-level package: the modules at its top level (beside its subpackages, if any),
    ``__init__.py`` left out."""
    loose = {}
    for name, root in PACKAGES.items():
        if not root.is_dir():
            continue
        loose[name] = sorted(
            p.name for p in root.glob("*.py") if p.name != "__init__.py" and not _generated(p)
        )
    return loose


def files_over(limit: int) -> list[tuple[int, str]]:
    """The non-test ``*.py`` files of the tree over ``limit`` lines, longest first."""
    over = [(_lines(p), str(p.relative_to(ROOT))) for p in _sources(ROOT)]
    return sorted((row for row in over if row[0] > limit), reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=400, help="line limit (default 400)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout (default: this one)")
    args = parser.parse_args()
    _set_root(args.root)
    print("lines per package (files, lines):")
    for name, count, lines in package_lines():
        indent = "  " * name.count(".")
        print(f"  {indent}{name:<{36 - len(indent)}} {count:>4} {lines:>7}")
    print("loose modules (top-level modules of each package, beside its subpackages):")
    for name, modules in loose_modules().items():
        print(f"  {name} ({len(modules)}): {', '.join(modules)}")
    over = files_over(args.limit)
    print(f"non-test files over {args.limit} lines ({len(over)}):")
    for lines, path in over:
        print(f"  {lines:>5} {path}")


if __name__ == "__main__":
    main()
