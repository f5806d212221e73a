"""The public surface of ``framework_sdk``: ``__all__`` resolves, and importing the package (as
``master.core`` does for ``ResourceVector``) does not load gRPC or the wire API."""

from __future__ import annotations

import subprocess
import sys

import framework_sdk


def test_every_public_name_resolves() -> None:
    for name in framework_sdk.__all__:
        assert getattr(framework_sdk, name) is not None, name
    assert set(framework_sdk.__all__) <= set(dir(framework_sdk))


def test_importing_the_package_does_not_import_grpc() -> None:
    code = (
        "import sys, framework_sdk\n"
        "from framework_sdk.resources import ResourceVector\n"
        "assert 'grpc' not in sys.modules and 'fairshare.v1' not in sys.modules\n"
        "framework_sdk.Framework\n"
        "assert 'grpc' in sys.modules\n"
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
