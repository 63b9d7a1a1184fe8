"""The asyncio client: drives the sans-IO core with an ``httpx.AsyncClient`` and a heartbeat task."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from typing import Any, Awaitable, Callable, Dict, Generator, Mapping, Optional, Union

import httpx

from . import _core
from .types import (
    ClaimResult,
    KeyPage,
    KeyRecord,
    OnceResult,
    OutcomeInput,
    Reconciliation,
    ReconcileInfo,
    StepRecord,
)

AsyncTokenSource = Union[str, Callable[[], Union[str, Awaitable[str]]]]
AsyncEffect = Callable[["AsyncEffectContext"], Union[Awaitable[OutcomeInput], OutcomeInput]]
AsyncReconciler = Callable[
    [str, Mapping[str, StepRecord], ReconcileInfo],
    Union[Awaitable[Optional[Reconciliation]], Optional[Reconciliation]],
]

_ACCEPT = "application/json, application/problem+json"


class AsyncEffectContext(_core.ContextBase):
    """Given to the effect of :meth:`AsyncClient.once`.

    As :class:`~idemkey.EffectContext`, with ``lease_lost_event`` an
    ``asyncio.Event`` and ``record_step``/``step``/``wait_lease_lost`` coroutines.
    """

    _driver: "AsyncClient"

    async def record_step(self, name: str, provider_ref: str) -> None:
        """Records that a named step finished at its provider (a repeat with the same ref is safe)."""
        await self._driver._drive(self._core.ctx_record_step(self, name, provider_ref))

    async def step(self, name: str, run: Callable[[str], Union[Awaitable[str], str]]) -> str:
        """Runs a named step unless it is already done: ``await run(step_effect_id)`` performs it
        and returns the provider's reference, which is then recorded."""
        result: str = await self._driver._drive(self._core.ctx_step(self, name, run))
        return result

    async def wait_lease_lost(self, timeout: Optional[float] = None) -> bool:
        """Waits until the lease is lost (True) or ``timeout`` seconds pass (False)."""
        try:
            await asyncio.wait_for(self.lease_lost_event.wait(), timeout)
        except asyncio.TimeoutError:
            return False
        return True


class AsyncClient:
    """An asyncio idemkey client: the same calls as :class:`~idemkey.Client`, as coroutines.

    ``token`` may also be a coroutine function. Effects and reconcilers should
    be coroutine functions (plain functions are accepted, but block the event
    loop, and so the heartbeats, while they run).
    """

    def __init__(
        self,
        base_url: str,
        token: AsyncTokenSource,
        *,
        transport: Optional[httpx.AsyncBaseTransport] = None,
        http_client: Optional[httpx.AsyncClient] = None,
        retry_for_ms: int = 30_000,
        request_timeout_ms: int = 15_000,
        max_wait_ms: int = 5_000,
        heartbeat_fraction: float = 1 / 3,
    ) -> None:
        self._token_source = token
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.AsyncClient(transport=transport)
        self._core = _core.Core(
            base_url,
            context_factory=self._new_context,
            retry_for_ms=retry_for_ms,
            request_timeout_ms=request_timeout_ms,
            max_wait_ms=max_wait_ms,
            heartbeat_fraction=heartbeat_fraction,
        )

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    # ------------------------------------------------------------ driver

    def _new_context(self, **kw: Any) -> AsyncEffectContext:
        ctx = AsyncEffectContext(lease_lost_event=asyncio.Event(), **kw)
        ctx._driver = self
        return ctx

    async def _token(self) -> str:
        t: Any = self._token_source() if callable(self._token_source) else self._token_source
        if inspect.isawaitable(t):
            t = await t
        return str(t)

    async def _send(self, a: _core.Send) -> Union[_core.Response, _core.NoAnswer]:
        headers = {"authorization": f"Bearer {await self._token()}", "accept": _ACCEPT}
        if a.content is not None:
            headers["content-type"] = "application/json"
        try:
            r = await self._http.request(a.method, a.url, content=a.content, headers=headers, timeout=a.timeout_s)
        except httpx.TransportError as e:
            return _core.NoAnswer(e)
        return _core.Response(r.status_code, r.headers, r.content)

    @staticmethod
    async def _call_user(fn: Callable[..., Any], args: tuple) -> Any:  # type: ignore[type-arg]
        r = fn(*args)
        if inspect.isawaitable(r):
            r = await r
        return r

    async def _drive(self, gen: Generator[Any, Any, Any], stop: Optional[asyncio.Event] = None) -> Any:
        value: Any = None
        exc: Optional[BaseException] = None
        while True:
            try:
                action = gen.throw(exc) if exc is not None else gen.send(value)
            except StopIteration as s:
                return s.value
            value, exc = None, None
            try:
                value = await self._perform(action, stop)
            except BaseException as e:  # thrown back into the core, which decides
                exc = e

    async def _perform(self, action: Any, stop: Optional[asyncio.Event]) -> Any:
        if isinstance(action, _core.Send):
            return await self._send(action)
        if isinstance(action, _core.Sleep):
            await asyncio.sleep(max(0.0, action.seconds))
            return None
        if isinstance(action, _core.WaitStop):
            assert stop is not None
            try:
                await asyncio.wait_for(stop.wait(), max(0.0, action.seconds))
            except asyncio.TimeoutError:
                pass
            return stop.is_set()
        if isinstance(action, _core.CallUser):
            return await self._call_user(action.fn, action.args)
        if isinstance(action, _core.RunEffect):
            halt = asyncio.Event()
            beats = asyncio.ensure_future(self._drive(action.heartbeats, halt))
            try:
                return await self._call_user(action.effect, (action.ctx,))
            finally:
                halt.set()
                beats.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await beats
        raise TypeError(f"unknown action {action!r}")

    # ------------------------------------------------------------ once()

    async def once(
        self,
        operation: str,
        key: str,
        request: Any,
        effect: AsyncEffect,
        reconcile: Optional[AsyncReconciler] = None,
        *,
        fingerprint: Optional[str] = None,
        deadline_ms: int = 30_000,
        lease_ms: Optional[int] = None,
    ) -> OnceResult:
        """As :meth:`idemkey.Client.once`, with ``await effect(ctx)`` and heartbeats in a task."""
        result: OnceResult = await self._drive(
            self._core.once(
                operation,
                key,
                request,
                effect,
                reconcile,
                fingerprint=fingerprint,
                deadline_ms=deadline_ms,
                lease_ms=lease_ms,
            )
        )
        return result

    # ------------------------------------------------------------ low level

    async def claim(
        self,
        operation: str,
        key: str,
        request: Any = None,
        *,
        fingerprint: Optional[str] = None,
        wait_ms: Optional[int] = None,
        lease_ms: Optional[int] = None,
    ) -> ClaimResult:
        r: ClaimResult = await self._drive(
            self._core.claim(operation, key, request, fingerprint=fingerprint, wait_ms=wait_ms, lease_ms=lease_ms)
        )
        return r

    async def complete(self, operation: str, key: str, owner_token: str, outcome: OutcomeInput) -> KeyRecord:
        r: KeyRecord = await self._drive(self._core.complete(operation, key, owner_token, outcome))
        return r

    async def release(self, operation: str, key: str, owner_token: str) -> None:
        await self._drive(self._core.release(operation, key, owner_token))

    async def heartbeat(
        self, operation: str, key: str, owner_token: str, lease_ms: Optional[int] = None
    ) -> KeyRecord:
        r: KeyRecord = await self._drive(self._core.heartbeat(operation, key, owner_token, lease_ms))
        return r

    async def record_step(
        self, operation: str, key: str, owner_token: str, step: str, provider_ref: str
    ) -> KeyRecord:
        r: KeyRecord = await self._drive(self._core.record_step(operation, key, owner_token, step, provider_ref))
        return r

    async def quarantine(self, operation: str, key: str, owner_token: str, reason: str) -> KeyRecord:
        r: KeyRecord = await self._drive(self._core.quarantine(operation, key, owner_token, reason))
        return r

    async def resolve(
        self,
        operation: str,
        key: str,
        *,
        outcome: Optional[OutcomeInput] = None,
        release: bool = False,
        reason: Optional[str] = None,
        owner_token: Optional[str] = None,
    ) -> Optional[KeyRecord]:
        r: Optional[KeyRecord] = await self._drive(
            self._core.resolve(operation, key, outcome=outcome, release=release, reason=reason, owner_token=owner_token)
        )
        return r

    async def lookup(self, operation: str, key: str) -> Optional[KeyRecord]:
        r: Optional[KeyRecord] = await self._drive(self._core.lookup(operation, key))
        return r

    async def list_keys(
        self,
        *,
        state: Optional[str] = None,
        operation: Optional[str] = None,
        older_than: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> KeyPage:
        r: KeyPage = await self._drive(
            self._core.list_keys(state=state, operation=operation, older_than=older_than, limit=limit, cursor=cursor)
        )
        return r

    async def get_operation_class(self, operation: str) -> Dict[str, Any]:
        r: Dict[str, Any] = await self._drive(self._core.get_operation_class(operation))
        return r

    async def put_operation_class(self, operation: str, policy: Mapping[str, Any]) -> Dict[str, Any]:
        r: Dict[str, Any] = await self._drive(self._core.put_operation_class(operation, policy))
        return r

    async def delete_operation_class(self, operation: str) -> Dict[str, Any]:
        r: Dict[str, Any] = await self._drive(self._core.delete_operation_class(operation))
        return r
