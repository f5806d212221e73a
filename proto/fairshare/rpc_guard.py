"""``RpcGuard``: the gate every call to a daemon's gRPC server passes first
(docs/architecture.md §6).

A grpc.aio server interceptor that wraps each method's handler once (the wrapped handler is
reused: a call costs one dictionary lookup) so that, before the servicer sees a call:

- **the request decodes**: a request (or a message of a request stream) that is not a valid
  protobuf of its type ends the call with INVALID_ARGUMENT (``UndecodableRequest`` inside a
  request stream), never UNKNOWN with a traceback;
- **the caller is known** (``Authenticator``), when authentication is on: its principal is the
  principal of its bearer token (``authorization: Bearer PRINCIPAL:SECRET``, checked against the
  credentials file) or, without a token, the common name of its client certificate (mutual TLS:
  the certificate then only admits the connection when a token names someone); a call with
  neither, or with a token that does not check, ends with UNAUTHENTICATED; a peer address that
  had too many tokens refused gets its new tokens refused without a hash for a while
  (``fairshare.auth_throttle``: RESOURCE_EXHAUSTED with "retry in"). Methods of
  ``open_services`` (the standard health service, for probes) need no principal. The principal
  is then ``caller()`` for the servicer (a context variable of the call's own task);
- **each refusal is logged at most a few times a second** per kind (``LogLimiter``), with
  the method and the claimed principal, never a secret.

A guard built with ``forwarded_principal=KEY`` trusts its callers instead: it serves only a
socket that the daemon's own front processes can open (the master's I/O workers on a Unix socket
of mode 0600, ``master.io_workers``), which authenticated the call themselves and name its
principal in the metadata ``KEY`` (absent: anonymous); nothing is checked again.

Invariants: with authentication off every caller is ``None`` (anonymous) and nothing is
refused but undecodable requests; a token is verified with one scrypt the first time it is seen
(in a worker thread, at most ``VERIFY_CONCURRENCY`` at once, off the event loop), after that from
the cache (``fairshare.credentials``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeAlias

import grpc
from google.protobuf.message import DecodeError
from grpc import aio

from fairshare.auth_throttle import FailureThrottle
from fairshare.credentials import Credentials
from fairshare.logs import LogLimiter, log_event

__all__ = [
    "OPEN_SERVICES",
    "AuthError",
    "AuthThrottled",
    "Authenticator",
    "RpcGuard",
    "UndecodableRequest",
    "caller",
]

log = logging.getLogger("fairshare.rpc")

OPEN_SERVICES: Final = ("grpc.health.v1.Health",)
VERIFY_CONCURRENCY: Final = 2
Handler: TypeAlias = "grpc.RpcMethodHandler[Any, Any]"
Context = aio.ServicerContext[Any, Any]

_CALLER: contextvars.ContextVar[str | None] = contextvars.ContextVar("fairshare_caller")


def caller() -> str | None:
    """The principal of the call being served (None: anonymous, authentication off)."""
    return _CALLER.get(None)


class UndecodableRequest(Exception):
    """A message of a request stream is not a valid protobuf of its type."""

    code = "INVALID_ARGUMENT"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class AuthError(Exception):
    """The caller could not be authenticated (the message says why, never with a secret)."""


class AuthThrottled(AuthError):
    """The caller's address had too many tokens refused: its new tokens are not checked now."""

    def __init__(self, retry_in: float) -> None:
        super().__init__(f"too many refused tokens from this address: retry in {retry_in:.1f}s")
        self.retry_in = retry_in


class _Undecodable:
    __slots__ = ("error",)

    def __init__(self, error: str) -> None:
        self.error = error


class Authenticator:
    """Who is calling: from a client certificate (``certificates``) or a token
    (``credentials``); ``required`` when either is configured."""

    def __init__(
        self,
        credentials: Credentials | None = None,
        certificates: bool = False,
        throttle: FailureThrottle | None = None,
    ) -> None:
        self.credentials = credentials
        self.certificates = certificates
        self.throttle = throttle or FailureThrottle()
        self._verifying = asyncio.Semaphore(VERIFY_CONCURRENCY)

    @property
    def required(self) -> bool:
        """True when every call must come from a known principal."""
        return self.credentials is not None or self.certificates

    @property
    def mode(self) -> str:
        """``off``, or the accepted proofs: ``certificate``, ``token``, ``certificate+token``."""
        kinds = ["certificate"] if self.certificates else []
        if self.credentials is not None:
            kinds.append("token")
        return "+".join(kinds) or "off"

    async def principal(
        self, token: str | None, certificate: str | None, peer: str | None = None
    ) -> str | None:
        """The principal of a caller at ``peer`` presenting ``token`` and/or a certificate
        naming ``certificate``; None when authentication is off; ``AuthError`` when it fails
        (``AuthThrottled`` when ``peer`` had too many tokens refused)."""
        if not self.required:
            return None
        if token is not None:  # a token names the principal; a certificate only admits
            return await self._from_token(token, peer)
        if certificate is not None and self.certificates:
            return certificate
        raise AuthError("no credentials: present a client certificate or a bearer token")

    async def _from_token(self, token: str, peer: str | None) -> str:
        credentials = self.credentials
        if credentials is None:
            raise AuthError("this server does not accept tokens (no credentials file)")
        known = credentials.cached(token)
        if known is None:
            retry_in = self.throttle.take(peer)  # before queueing for a hash
            if retry_in > 0:
                raise AuthThrottled(retry_in)
            async with self._verifying:
                known = credentials.cached(token)
                if known is None:
                    known = await asyncio.to_thread(credentials.check, token) or False
            if known is not False:
                self.throttle.give_back(peer)
        if known is False or known is None:
            raise AuthError("unknown principal or wrong secret")
        return str(known)


def bearer_token(metadata: Iterable[tuple[str, Any]] | None) -> str | None:
    """The token of an ``authorization: Bearer ...`` header, if any."""
    for key, value in metadata or ():
        if key == "authorization":
            text = value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
            scheme, _, token = text.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def _metadata_value(metadata: Iterable[tuple[str, Any]] | None, key: str) -> str | None:
    """The value of the metadata ``key``, if present."""
    for name, value in metadata or ():
        if name == key:
            return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
    return None


def certificate_name(auth_context: Mapping[str, Iterable[bytes]]) -> str | None:
    """The common name of the peer's verified client certificate, if it sent one."""
    names = auth_context.get("x509_common_name") or ()
    for name in names:
        text = name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
        if text:
            return text
    return None


def _safe(deserializer: Callable[[bytes], Any] | None, what: str) -> Callable[[bytes], Any]:
    def decode(data: bytes) -> Any:
        if deserializer is None:
            return data
        try:
            return deserializer(data)
        except (DecodeError, ValueError, TypeError, RuntimeError) as error:
            return _Undecodable(f"the request is not a valid {what}: {error}")

    return decode


class RpcGuard(aio.ServerInterceptor):  # type: ignore[type-arg]
    """Decodes safely, authenticates, and names the caller (see the module docstring)."""

    def __init__(
        self,
        authenticator: Authenticator | None = None,
        open_services: Sequence[str] = OPEN_SERVICES,
        limiter: LogLimiter | None = None,
        forwarded_principal: str | None = None,
    ) -> None:
        self.authenticator = authenticator or Authenticator()
        self.forwarded_principal = forwarded_principal
        self.open_services = tuple(open_services)
        self.limiter = limiter or LogLimiter()
        self.refused: dict[str, int] = {}
        self._wrapped: dict[str, Handler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler:
        method = handler_call_details.method
        wrapped = self._wrapped.get(method)
        if wrapped is not None:
            return wrapped
        handler = await continuation(handler_call_details)
        if handler is None:
            return handler
        service = method.lstrip("/").rpartition("/")[0]
        wrapped = self._wrap_handler(handler, method, service not in self.open_services)
        self._wrapped[method] = wrapped
        return wrapped

    # -- refusals ---------------------------------------------------------------------------------

    def note(self, kind: str, method: str, **fields: Any) -> None:
        """Count a refusal and log it if the limiter lets it through."""
        self.refused[kind] = self.refused.get(kind, 0) + 1
        held = self.limiter.allow((kind, method))
        if held is not None:
            log_event(log, kind, logging.WARNING, method=method, suppressed=held, **fields)

    async def _identify(self, context: Context, method: str, authenticate: bool) -> None:
        if self.forwarded_principal is not None:  # a trusted front authenticated the caller
            _CALLER.set(_metadata_value(context.invocation_metadata(), self.forwarded_principal))
            return
        if not authenticate or not self.authenticator.required:
            return
        token = bearer_token(context.invocation_metadata())
        certificate = None
        if self.authenticator.certificates:
            certificate = certificate_name(context.auth_context())
        try:
            principal = await self.authenticator.principal(token, certificate, context.peer())
        except AuthError as error:
            claimed = token.partition(":")[0][:64] if token else certificate or "-"
            throttled = isinstance(error, AuthThrottled)
            kind = "auth.throttled" if throttled else "auth.refused"
            self.note(kind, method, peer=context.peer(), claimed=claimed, error=error)
            code = grpc.StatusCode.RESOURCE_EXHAUSTED if throttled else None
            await context.abort(code or grpc.StatusCode.UNAUTHENTICATED, str(error))
        _CALLER.set(principal)

    async def _undecodable(self, context: Context, method: str, request: _Undecodable) -> None:
        self.note("rpc.undecodable", method, peer=context.peer())
        await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.error)

    # -- wrapping ---------------------------------------------------------------------------------

    def _wrap_handler(self, handler: Handler, method: str, authenticate: bool) -> Handler:
        what = method.rpartition("/")[2] + " request"
        decode = _safe(handler.request_deserializer, what)
        serialize = handler.response_serializer
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary, method, authenticate), decode, serialize
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._streaming(handler.unary_stream, method, authenticate, False),
                decode,
                serialize,
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._stream_in(handler.stream_unary, method, authenticate), decode, serialize
            )
        assert handler.stream_stream is not None
        return grpc.stream_stream_rpc_method_handler(
            self._streaming(handler.stream_stream, method, authenticate, True),
            decode,
            serialize,
        )

    def _unary(self, behavior: Any, method: str, authenticate: bool) -> Any:
        async def unary(request: Any, context: Context) -> Any:
            if isinstance(request, _Undecodable):
                await self._undecodable(context, method, request)
            await self._identify(context, method, authenticate)
            return await behavior(request, context)

        return unary if inspect.iscoroutinefunction(behavior) else behavior

    def _stream_in(self, behavior: Any, method: str, authenticate: bool) -> Any:
        async def stream_in(requests: Any, context: Context) -> Any:
            await self._identify(context, method, authenticate)
            return await behavior(self._checked(requests, method, context), context)

        return stream_in if inspect.iscoroutinefunction(behavior) else behavior

    def _streaming(self, behavior: Any, method: str, authenticate: bool, streamed: bool) -> Any:
        if not inspect.isasyncgenfunction(behavior):
            return behavior

        async def streaming(request: Any, context: Context) -> Any:
            if not streamed and isinstance(request, _Undecodable):
                await self._undecodable(context, method, request)
            await self._identify(context, method, authenticate)
            argument = self._checked(request, method, context) if streamed else request
            async with contextlib.aclosing(behavior(argument, context)) as responses:
                async for response in responses:
                    yield response

        return streaming

    async def _checked(
        self, requests: AsyncIterator[Any], method: str, context: Context
    ) -> AsyncIterator[Any]:
        """The messages of a request stream; an undecodable one raises
        ``UndecodableRequest`` (the servicer ends the stream with INVALID_ARGUMENT)."""
        async for request in requests:
            if isinstance(request, _Undecodable):
                self.note("rpc.undecodable", method, peer=context.peer())
                raise UndecodableRequest(request.error)
            yield request
