"""docs/sdk.md is the SDK's reference (issue 24, item 6): every public name of
``framework_sdk`` (its ``__all__``) and of ``framework_sdk.testing`` is on it, every import its
code shows works, every ``framework_sdk.x.y`` it names exists, and its examples that need no
master run."""

from __future__ import annotations

import ast
import asyncio
import importlib
import re
from pathlib import Path
from typing import Any

import framework_sdk
import framework_sdk.testing
from framework_sdk import ResourceVector
from framework_sdk.testing import FakeAgent, ThreadedFakeMaster

DOC = Path(__file__).resolve().parents[3] / "docs" / "sdk.md"
BLOCK = re.compile(r"```python\n(.*?)```", re.DOTALL)


def _blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def test_every_public_name_is_on_the_page() -> None:
    text = DOC.read_text(encoding="utf-8")
    shown = set(re.findall(r"`([A-Za-z_][A-Za-z0-9_]*)", text))
    for block in _blocks():
        shown |= {
            alias.name
            for node in ast.walk(ast.parse(block))
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        }
    missing = [
        n for n in (*framework_sdk.__all__, *framework_sdk.testing.__all__) if n not in shown
    ]
    assert not missing, f"docs/sdk.md does not show {missing}"


def test_every_import_the_page_shows_works() -> None:
    imported = 0
    for block in _blocks():
        for node in ast.walk(ast.parse(block)):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                module = importlib.import_module(node.module)
                for alias in node.names:
                    assert hasattr(module, alias.name), f"{node.module}.{alias.name}"
                    imported += 1
    assert imported >= len(framework_sdk.__all__)


def test_the_examples_that_need_no_master_run() -> None:
    for block in _blocks():
        if "asyncio.run(" in block:
            continue  # the first example talks to a master
        namespace: dict[str, object] = {}
        exec(compile(block, str(DOC), "exec"), namespace)
    task = namespace_of_shapes()
    assert str(task) == "cpus:0.5;mem:256"


def test_the_first_example_runs_its_job_against_a_master() -> None:
    """The page's first example, run against the SDK's fake master with two agents (so offers
    keep coming after the launch): it launches t1 once, ends when t1 has, and tears down (the
    second newcomer pass found it launching t1 on every offer and failing)."""
    block = _blocks()[0]
    assert block.rstrip().endswith("asyncio.run(main())")
    agents = [FakeAgent(f"ag-{n}", ResourceVector.parse("cpus:4;mem:4096")) for n in (1, 2)]
    with ThreadedFakeMaster(agents=agents, task_time_scale=0.01) as fake:
        code = block.replace('"127.0.0.1:5050"', repr(fake.address))
        namespace: dict[str, Any] = {}
        exec(
            compile(code.rstrip().removesuffix("asyncio.run(main())"), str(DOC), "exec"), namespace
        )
        asyncio.run(asyncio.wait_for(namespace["main"](), 30))
        launched = fake.call(lambda: [t.task_id for t in fake.master.launched_tasks])
    assert launched == ["t1"]


def namespace_of_shapes() -> object:
    for block in _blocks():
        if "etl-1" in block and "TaskSpec(" in block:
            namespace: dict[str, object] = {}
            exec(compile(block, str(DOC), "exec"), namespace)
            return namespace["shape"]
    raise AssertionError("the page shows no TaskSpec example")


def test_stream_logs_is_a_module_function_as_the_page_says() -> None:
    assert callable(framework_sdk.stream_logs)
    assert not hasattr(framework_sdk.Framework, "stream_logs")


def test_the_sdk_reads_the_variables_the_commands_read(tmp_path: Path) -> None:
    from fairshare.settings import SettingsError
    from fairshare.transport import INSECURE

    from framework_sdk.options import (
        ENVIRONMENT_VARIABLES,
        ClientOptions,
        security_from_environment,
    )

    assert ENVIRONMENT_VARIABLES == (
        "FAIRSHARE_TLS_CA",
        "FAIRSHARE_TLS_CERT",
        "FAIRSHARE_TLS_KEY",
        "FAIRSHARE_TOKEN_FILE",
        "FAIRSHARE_TLS_SERVER_NAME",
        "FAIRSHARE_ETCD_TLS_CA",
        "FAIRSHARE_ETCD_TLS_CERT",
        "FAIRSHARE_ETCD_TLS_KEY",
        "FAIRSHARE_ETCD_USER",
        "FAIRSHARE_ETCD_PASSWORD_FILE",
        "FAIRSHARE_ETCD_PASSWORD",
    )
    assert security_from_environment({}) is INSECURE
    ca, token = tmp_path / "ca.pem", tmp_path / "token"
    ca.write_text("not checked here")
    token.write_text("batch:secret\n")
    security = security_from_environment(
        {"FAIRSHARE_TLS_CA": str(ca), "FAIRSHARE_TOKEN_FILE": str(token)}
    )
    assert (security.ca, security.token) == (ca, "batch:secret")
    try:
        security_from_environment({"FAIRSHARE_TLS_CA": str(tmp_path / "missing.pem")})
    except SettingsError as error:
        assert "FAIRSHARE_TLS_CA" in str(error)
    else:
        raise AssertionError("a missing CA file was accepted")
    assert ClientOptions(security=INSECURE).security is INSECURE
    etcd = security_from_environment(
        {
            "FAIRSHARE_ETCD_TLS_CA": str(ca),
            "FAIRSHARE_ETCD_USER": "r",
            "FAIRSHARE_ETCD_PASSWORD": "p",
        }
    ).etcd
    assert (etcd.ca, etcd.user, etcd.password) == (ca, "r", "p")
