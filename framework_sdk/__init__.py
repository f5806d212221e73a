"""The public fairshare client API.

Only pure modules are imported here, so that ``master.core`` may use ``ResourceVector`` without
pulling in gRPC. ``__all__`` is the public surface.
"""

from framework_sdk.resources import MILLI, ResourceError, ResourceVector

__all__ = ["MILLI", "ResourceError", "ResourceVector"]
