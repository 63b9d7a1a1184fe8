"""The sync client: drives the sans-IO core with an ``httpx.Client`` and a heartbeat thread."""

from __future__ import annotations

import inspect
import threading
import time
from typing import Any, Callable, Dict, Generator, Mapping, Optional, Union

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

TokenSource = Union[str, Callable[[], str]]
Effect = Callable[["EffectContext"], OutcomeInput]
Reconciler = Callable[[str, Mapping[str, StepRecord], ReconcileInfo], Optional[Reconciliation]]

_ACCEPT = "application/json, application/problem+json"


class EffectContext(_core.ContextBase):
    """Given to the effect of :meth:`Client.once`.

    ``effect_id`` (pass it to your provider), ``attempt``, ``recovering``,
    ``steps``, ``lease_lost`` (bool), ``lease_lost_event`` (a
    ``threading.Event``, set when the lease is lost: stop, do not act further).
    """

    _driver: "Client"

    def record_step(self, name: str, provider_ref: str) -> None:
        """Records that a named step finished at its provider (a repeat with the same ref is safe)."""
        self._driver._drive(self._core.ctx_record_step(self, name, provider_ref))

    def step(self, name: str, run: Callable[[str], str]) -> str:
        """Runs a named step unless it is already done.

        ``run(step_effect_id)`` must perform the step and return the
        provider's reference, which is then recorded. Returns the provider
        reference (the recorded one when the step was skipped).
        """
        result: str = self._driver._drive(self._core.ctx_step(self, name, run))
        return result

    def wait_lease_lost(self, timeout: Optional[float] = None) -> bool:
        """Blocks until the lease is lost (True) or ``timeout`` seconds pass (False)."""
        return bool(self.lease_lost_event.wait(timeout))


class Client:
    """A sync idemkey client.

    ``base_url`` is the server (no ``/v1``); ``token`` a bearer token or a
    function giving one (called for every request). ``transport`` or
    ``http_client`` replace httpx's defaults. ``retry_for_ms`` bounds how
    long one call retries transport errors, 503 and 429;
    ``request_timeout_ms`` is one request's timeout (on top of any
    ``wait_ms``); ``max_wait_ms`` the longest ``wait_ms`` once() asks for
    (the server caps it at the class's ``max_wait``); heartbeats run every
    lease x ``heartbeat_fraction``.
    """

    def __init__(
        self,
        base_url: str,
        token: TokenSource,
        *,
        transport: Optional[httpx.BaseTransport] = None,
        http_client: Optional[httpx.Client] = None,
        retry_for_ms: int = 30_000,
        request_timeout_ms: int = 15_000,
        max_wait_ms: int = 5_000,
        heartbeat_fraction: float = 1 / 3,
    ) -> None:
        self._token_source = token
        self._owns_http = http_client is None
        self._http = http_client if http_client is not None else httpx.Client(transport=transport)
        self._core = _core.Core(
            base_url,
            context_factory=self._new_context,
            retry_for_ms=retry_for_ms,
            request_timeout_ms=request_timeout_ms,
            max_wait_ms=max_wait_ms,
            heartbeat_fraction=heartbeat_fraction,
        )

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ driver

    def _new_context(self, **kw: Any) -> EffectContext:
        ctx = EffectContext(lease_lost_event=threading.Event(), **kw)
        ctx._driver = self
        return ctx

    def _token(self) -> str:
        t = self._token_source() if callable(self._token_source) else self._token_source
        return t

    def _send(self, a: _core.Send) -> Union[_core.Response, _core.NoAnswer]:
        headers = {"authorization": f"Bearer {self._token()}", "accept": _ACCEPT}
        if a.content is not None:
            headers["content-type"] = "application/json"
        try:
            r = self._http.request(a.method, a.url, content=a.content, headers=headers, timeout=a.timeout_s)
        except httpx.TransportError as e:
            return _core.NoAnswer(e)
        return _core.Response(r.status_code, r.headers, r.content)

    @staticmethod
    def _call_user(fn: Callable[..., Any], args: tuple) -> Any:  # type: ignore[type-arg]
        r = fn(*args)
        if inspect.isawaitable(r):
            if inspect.iscoroutine(r):
                r.close()
            raise TypeError(f"{fn!r} returned an awaitable: the sync Client needs sync functions (use AsyncClient)")
        return r

    def _drive(self, gen: Generator[Any, Any, Any], stop: Optional[threading.Event] = None) -> Any:
        value: Any = None
        exc: Optional[BaseException] = None
        while True:
            try:
                action = gen.throw(exc) if exc is not None else gen.send(value)
            except StopIteration as s:
                return s.value
            value, exc = None, None
            try:
                value = self._perform(action, stop)
            except BaseException as e:  # thrown back into the core, which decides
                exc = e

    def _perform(self, action: Any, stop: Optional[threading.Event]) -> Any:
        if isinstance(action, _core.Send):
            return self._send(action)
        if isinstance(action, _core.Sleep):
            time.sleep(max(0.0, action.seconds))
            return None
        if isinstance(action, _core.WaitStop):
            assert stop is not None
            return stop.wait(max(0.0, action.seconds))
        if isinstance(action, _core.CallUser):
            return self._call_user(action.fn, action.args)
        if isinstance(action, _core.RunEffect):
            halt = threading.Event()
            beats = threading.Thread(
                target=self._drive, args=(action.heartbeats, halt), name="idemkey-heartbeat", daemon=True
            )
            beats.start()
            try:
                return self._call_user(action.effect, (action.ctx,))
            finally:
                halt.set()
                beats.join()
        raise TypeError(f"unknown action {action!r}")

    # ------------------------------------------------------------ once()

    def once(
        self,
        operation: str,
        key: str,
        request: Any,
        effect: Effect,
        reconcile: Optional[Reconciler] = None,
        *,
        fingerprint: Optional[str] = None,
        deadline_ms: int = 30_000,
        lease_ms: Optional[int] = None,
    ) -> OnceResult:
        """Runs ``effect`` at most once for (operation, key), however often it is called, and returns the one outcome.

        * ``claimed``: runs ``effect(ctx)`` (heartbeating in a background
          thread) and completes with the outcome it returns (an
          :class:`~idemkey.Outcome` or a mapping with ``status_code``);
        * ``completed``: returns the stored outcome (``replayed=True``), runs nothing;
        * ``recovering``: calls ``reconcile(effect_id, steps, info)`` first;
          :class:`~idemkey.Done` completes with its outcome, :class:`~idemkey.NotDone`
          (or None) runs the effect, skipping the steps it names;
        * ``in_progress``: waits (server ``wait_ms``, then ``Retry-After``
          with backoff and jitter) until ``deadline_ms``, then raises
          :class:`~idemkey.InProgressTimeoutError`;
        * ``key_reused`` / ``quarantined``: raises
          :class:`~idemkey.KeyReusedError` / :class:`~idemkey.QuarantinedError`.

        The effect raising :class:`~idemkey.NothingDoneError` releases the key
        (and re-raises); any other exception raises
        :class:`~idemkey.AmbiguousEffectError` (the key is left to the lease
        rules). A lease lost while the effect runs raises
        :class:`~idemkey.LeaseLostError` instead of completing. Pass
        ``fingerprint`` (and ``request=None``) to send a precomputed fingerprint.
        """
        for name, fn in (("effect", effect), ("reconcile", reconcile)):
            if fn is not None and inspect.iscoroutinefunction(fn):
                raise TypeError(f"{name} is a coroutine function: the sync Client needs sync functions (use AsyncClient)")
        result: OnceResult = self._drive(
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

    def claim(
        self,
        operation: str,
        key: str,
        request: Any = None,
        *,
        fingerprint: Optional[str] = None,
        wait_ms: Optional[int] = None,
        lease_ms: Optional[int] = None,
    ) -> ClaimResult:
        """Claims the key: :class:`~idemkey.OwnedClaim` (``claimed``/``recovering``: you own it),
        :class:`~idemkey.CompletedClaim` or :class:`~idemkey.InProgressClaim`; raises
        KeyReusedError, QuarantinedError and the other typed errors."""
        r: ClaimResult = self._drive(
            self._core.claim(operation, key, request, fingerprint=fingerprint, wait_ms=wait_ms, lease_ms=lease_ms)
        )
        return r

    def complete(self, operation: str, key: str, owner_token: str, outcome: OutcomeInput) -> KeyRecord:
        """Stores the final outcome (owner call). A retry with the same token and outcome is safe."""
        r: KeyRecord = self._drive(self._core.complete(operation, key, owner_token, outcome))
        return r

    def release(self, operation: str, key: str, owner_token: str) -> None:
        """Gives the key back because no effect happened (owner call)."""
        self._drive(self._core.release(operation, key, owner_token))

    def heartbeat(self, operation: str, key: str, owner_token: str, lease_ms: Optional[int] = None) -> KeyRecord:
        """Extends the lease (owner call): it ends at now + ``lease_ms`` (or the claim's lease)."""
        r: KeyRecord = self._drive(self._core.heartbeat(operation, key, owner_token, lease_ms))
        return r

    def record_step(self, operation: str, key: str, owner_token: str, step: str, provider_ref: str) -> KeyRecord:
        """Records that a named step finished at its provider (owner call; a repeat with the same ref is safe)."""
        r: KeyRecord = self._drive(self._core.record_step(operation, key, owner_token, step, provider_ref))
        return r

    def quarantine(self, operation: str, key: str, owner_token: str, reason: str) -> KeyRecord:
        """Marks the key's outcome ambiguous (owner call): claims answer ``quarantined`` until resolved."""
        r: KeyRecord = self._drive(self._core.quarantine(operation, key, owner_token, reason))
        return r

    def resolve(
        self,
        operation: str,
        key: str,
        *,
        outcome: Optional[OutcomeInput] = None,
        release: bool = False,
        reason: Optional[str] = None,
        owner_token: Optional[str] = None,
    ) -> Optional[KeyRecord]:
        """Finishes a quarantined (or, for an admin, stuck) key: with ``outcome`` it is
        completed (returns the record); with ``release=True`` it is released (returns None)."""
        r: Optional[KeyRecord] = self._drive(
            self._core.resolve(operation, key, outcome=outcome, release=release, reason=reason, owner_token=owner_token)
        )
        return r

    def lookup(self, operation: str, key: str) -> Optional[KeyRecord]:
        """Reads the key's record; None when there is none (404)."""
        r: Optional[KeyRecord] = self._drive(self._core.lookup(operation, key))
        return r

    def list_keys(
        self,
        *,
        state: Optional[str] = None,
        operation: Optional[str] = None,
        older_than: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> KeyPage:
        """One page of the tenant's live keys, newest first (pass ``next_cursor`` as ``cursor`` for the next)."""
        r: KeyPage = self._drive(
            self._core.list_keys(state=state, operation=operation, older_than=older_than, limit=limit, cursor=cursor)
        )
        return r

    def get_operation_class(self, operation: str) -> Dict[str, Any]:
        """The class's policy (admin)."""
        r: Dict[str, Any] = self._drive(self._core.get_operation_class(operation))
        return r

    def put_operation_class(self, operation: str, policy: Mapping[str, Any]) -> Dict[str, Any]:
        """Sets the whole policy of the class (admin); returns it in canonical form."""
        r: Dict[str, Any] = self._drive(self._core.put_operation_class(operation, policy))
        return r

    def delete_operation_class(self, operation: str) -> Dict[str, Any]:
        """Returns the class to the defaults (admin); returns them."""
        r: Dict[str, Any] = self._drive(self._core.delete_operation_class(operation))
        return r


__all__ = ["Client", "EffectContext"]
