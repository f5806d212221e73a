"""The public surface of ``framework_sdk``: ``__all__`` resolves, ``ResourceVector`` and
``TaskState`` are the kernel's, and the allocation core stands on the kernel alone (importing
``master.core`` loads neither the SDK nor gRPC)."""

from __future__ import annotations

import subprocess
import sys

import fairshare.resources
import fairshare.task_states

import framework_sdk


def test_every_public_name_resolves() -> None:
    for name in framework_sdk.__all__:
        assert getattr(framework_sdk, name) is not None, name
    assert set(framework_sdk.__all__) <= set(dir(framework_sdk))


def test_the_sdk_re_exports_the_kernel_vocabulary() -> None:
    assert framework_sdk.ResourceVector is fairshare.resources.ResourceVector
    assert framework_sdk.ResourceError is fairshare.resources.ResourceError
    assert framework_sdk.TaskState is fairshare.task_states.TaskState


def test_importing_the_core_loads_neither_the_sdk_nor_grpc() -> None:
    code = (
        "import sys, master.core\n"
        "loaded = [m for m in ('framework_sdk', 'grpc', 'fairshare.v1') if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_unknown_attribute_is_an_attribute_error() -> None:
    try:
        framework_sdk.NoSuchThing  # noqa: B018
    except AttributeError as error:
        assert "NoSuchThing" in str(error)
    else:
        raise AssertionError("expected AttributeError")
