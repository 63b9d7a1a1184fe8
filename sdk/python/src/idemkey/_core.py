"""The sans-IO core of the SDK: every protocol decision, no I/O.

Each API call and once() itself is a generator that *yields actions*
(send this HTTP request, sleep this long, call this user function, run the
effect with these heartbeats) and receives their results; it returns the
call's result or raises its typed error. The sync :class:`idemkey.Client`
and the asyncio :class:`idemkey.AsyncClient` are thin drivers that perform
the actions with httpx (and threads or tasks), so the protocol logic exists
once.
"""

from __future__ import annotations

import json
import random
import time
import types
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import (
    Any,
    Callable,
    Dict,
    Generator,
    Mapping,
    Optional,
    TypeVar,
    Union,
)
from urllib.parse import quote, urlencode

from .errors import (
    AlreadyCompletedError,
    AmbiguousEffectError,
    IdemkeyError,
    InProgressError,
    InProgressTimeoutError,
    LeaseLostError,
    NotFoundError,
    NothingDoneError,
    QuarantinedError,
    TransportError,
    UnexpectedResponseError,
    error_from_problem,
)
from .types import (
    ClaimResult,
    CompletedClaim,
    Done,
    InProgressClaim,
    KeyPage,
    KeyRecord,
    KeySummary,
    NotDone,
    OnceResult,
    Outcome,
    OutcomeInput,
    OwnedClaim,
    PreviousAttempt,
    ReconcileInfo,
    StepRecord,
    Via,
    steps_from_wire,
    to_outcome,
)

T = TypeVar("T")

# ---------------------------------------------------------------- actions


@dataclass(frozen=True)
class Send:
    """Send one HTTP request; answered with :class:`Response` or :class:`NoAnswer`."""

    method: str
    url: str
    content: Optional[bytes]
    timeout_s: float


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]  # case-insensitive lookups by lower-case name
    content: bytes


@dataclass(frozen=True)
class NoAnswer:
    """The request got no answer (connection error, reset, timeout): it may or may not have been applied."""

    error: BaseException


@dataclass(frozen=True)
class Sleep:
    seconds: float


@dataclass(frozen=True)
class WaitStop:
    """(Heartbeats only.) Wait up to ``seconds`` for the stop signal; answered True when stopped."""

    seconds: float


@dataclass(frozen=True)
class CallUser:
    """Call a user function (reconcile, a step's run); the async driver awaits what it returns."""

    fn: Callable[..., Any]
    args: tuple  # type: ignore[type-arg]


@dataclass(frozen=True)
class RunEffect:
    """Run the effect with ``ctx`` while the driver runs ``heartbeats`` concurrently
    (a thread or a task), stopped when the effect returns or raises. Answered
    with the effect's outcome, or its exception is thrown back."""

    effect: Callable[..., Any]
    ctx: "ContextBase"
    heartbeats: Generator[Any, Any, None]


Action = Union[Send, Sleep, WaitStop, CallUser, RunEffect]
Op = Generator[Action, Any, T]

# ---------------------------------------------------------------- helpers

_UNSET: Any = object()
RETRYABLE_STATUSES = frozenset({429, 502, 503, 504})


def encode_segment(s: str) -> str:
    """Percent-encodes one path segment: only ``A-Z a-z 0-9 - . _ ~`` stay."""
    return quote(s, safe="")


def parse_retry_after(value: Optional[str]) -> Optional[int]:
    """``Retry-After`` (seconds or an HTTP date) in ms."""
    if value is None:
        return None
    v = value.strip()
    if v.isdigit():
        return int(v) * 1000
    try:
        at = parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError):
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=timezone.utc)
    return max(0, int((at - datetime.now(timezone.utc)).total_seconds() * 1000))


def parse_rfc3339(value: str) -> Optional[datetime]:
    try:
        v = value.strip()
        if v.endswith("Z") or v.endswith("z"):
            v = v[:-1] + "+00:00"
        return datetime.fromisoformat(v)
    except (ValueError, AttributeError):
        return None


def _jitter_ms(ms: float) -> float:
    """Never earlier than ``ms``; up to 250 ms (or a quarter) later."""
    return ms + random.random() * min(250.0, ms * 0.25 + 50.0)


def _backoff_ms(base: int, n: int, cap: int = 2_000) -> int:
    return int(min(cap, base * (2 ** min(n, 16))))


# ---------------------------------------------------------------- the effect's context


class ContextBase:
    """What the effect is given (the sync and async clients add ``record_step``/``step``)."""

    def __init__(
        self,
        core: "Core",
        operation: str,
        key: str,
        owner_token: str,
        claim: OwnedClaim,
        steps: Dict[str, StepRecord],
        lease_lost_event: Any,
    ) -> None:
        self._core = core
        self._owner_token = owner_token
        self._steps = steps
        self._lease_lost: Optional[LeaseLostError] = None
        #: The operation class and key of this call.
        self.operation = operation
        self.key = key
        #: Pass it to your provider as its idempotency key / reference.
        self.effect_id = claim.effect_id
        self.attempt = claim.attempt
        #: True when this attempt took over from an owner whose lease ran out.
        self.recovering = claim.status == "recovering"
        self.previous_attempt = claim.previous_attempt
        #: Set once the lease is lost (a ``threading.Event`` for the sync
        #: client, an ``asyncio.Event`` for the async one).
        self.lease_lost_event = lease_lost_event

    @property
    def steps(self) -> Mapping[str, StepRecord]:
        """Steps already done (recorded on the key, or reported by reconcile), by name."""
        return types.MappingProxyType(self._steps)

    @property
    def lease_lost(self) -> bool:
        """True once the lease is lost: stop, do not act further."""
        return self._lease_lost is not None

    @property
    def lease_lost_error(self) -> Optional[LeaseLostError]:
        return self._lease_lost

    def step_effect_id(self, name: str) -> str:
        """The effect id of a named step: ``effect_id + "." + name``."""
        return f"{self.effect_id}.{name}"

    def is_step_done(self, name: str) -> bool:
        return name in self._steps

    def _lose(self, err: LeaseLostError) -> None:
        if self._lease_lost is None:
            self._lease_lost = err
            self.lease_lost_event.set()


ContextFactory = Callable[..., ContextBase]

# ---------------------------------------------------------------- the core


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    headers: Mapping[str, str]


class Core:
    """The protocol: builds requests, reads answers, decides retries and what once() does next."""

    def __init__(
        self,
        base_url: str,
        *,
        context_factory: ContextFactory,
        retry_for_ms: int = 30_000,
        request_timeout_ms: int = 15_000,
        max_wait_ms: int = 5_000,
        heartbeat_fraction: float = 1 / 3,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.context_factory = context_factory
        self.retry_for_ms = retry_for_ms
        self.request_timeout_ms = request_timeout_ms
        self.max_wait_ms = max_wait_ms
        self.heartbeat_fraction = heartbeat_fraction
        self.now = clock

    # ------------------------------------------------------------ transport

    def key_path(self, operation: str, key: str) -> str:
        return f"/v1/keys/{encode_segment(operation)}/{encode_segment(key)}"

    def call(
        self,
        method: str,
        path: str,
        body: Any = _UNSET,
        *,
        timeout_ms: Optional[int] = None,
        retry_until: Optional[float] = None,
    ) -> Op[Answer]:
        """One API call. Retries transport errors, 429, 502, 503 and 504 (after
        Retry-After, with jitter) with the very same request until
        ``retry_until``; raises the typed error of any other problem answer."""
        until = retry_until if retry_until is not None else self.now() + self.retry_for_ms / 1000
        timeout_s = (timeout_ms if timeout_ms is not None else self.request_timeout_ms) / 1000
        content = (
            None
            if body is _UNSET
            else json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
        )
        url = self.base_url + path
        n = 0
        while True:
            answer = yield Send(method, url, content, timeout_s)
            if isinstance(answer, NoAnswer):
                delay = _jitter_ms(_backoff_ms(50, n)) / 1000
                if self.now() + delay > until:
                    raise TransportError(f"{method} {url}: no answer ({answer.error!r})") from answer.error
                yield Sleep(delay)
                n += 1
                continue
            parsed: Any = _UNSET
            if answer.content:
                try:
                    parsed = json.loads(answer.content)
                except ValueError:
                    parsed = _UNSET
            if 200 <= answer.status < 300:
                if parsed is _UNSET:
                    raise UnexpectedResponseError(
                        "unexpected_response", answer.status, {}, f"{method} {url}: the answer is not JSON"
                    )
                return Answer(answer.status, parsed, answer.headers)
            retry_after_ms = parse_retry_after(answer.headers.get("retry-after"))
            problem = parsed if isinstance(parsed, dict) else {"status": answer.status}
            error = error_from_problem(answer.status, problem, retry_after_ms)
            if answer.status in RETRYABLE_STATUSES:
                base = retry_after_ms if retry_after_ms is not None else _backoff_ms(100, n)
                delay = _jitter_ms(base) / 1000
                if self.now() + delay <= until:
                    yield Sleep(delay)
                    n += 1
                    continue
            raise error

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
        timeout_ms: Optional[int] = None,
    ) -> Op[ClaimResult]:
        body: Dict[str, Any] = {}
        if fingerprint is not None:
            if request is not None:
                raise ValueError("give exactly one of request and fingerprint")
            body["fingerprint"] = fingerprint
        else:
            body["request"] = request
        if wait_ms is not None:
            body["wait_ms"] = max(0, int(wait_ms))
        if lease_ms is not None:
            body["lease_ms"] = int(lease_ms)
        t = (wait_ms or 0) + (timeout_ms if timeout_ms is not None else self.request_timeout_ms)
        try:
            answer = yield from self.call("POST", self.key_path(operation, key) + "/claim", body, timeout_ms=t)
        except InProgressError as e:
            p = e.problem
            exp = p.get("expires_at")
            return InProgressClaim(
                status="in_progress",
                attempt=e.attempt,
                lease_expires_at=e.lease_expires_at,
                expires_at=exp if isinstance(exp, str) else None,
                retry_after_ms=e.retry_after_ms,
                problem=p,
            )
        b = answer.body if isinstance(answer.body, dict) else {}
        status = b.get("status")
        if status in ("claimed", "recovering"):
            prev = b.get("previous_attempt")
            return OwnedClaim(
                status=status,
                owner_token=str(b.get("owner_token", "")),
                attempt=int(b.get("attempt", 0)),
                lease_expires_at=str(b.get("lease_expires_at", "")),
                expires_at=str(b.get("expires_at", "")),
                effect_id=str(b.get("effect_id", "")),
                steps=steps_from_wire(b.get("steps")),
                previous_attempt=PreviousAttempt(
                    attempt=int(prev.get("attempt", 0)),
                    claimed_at=str(prev.get("claimed_at", "")),
                    lease_expires_at=str(prev.get("lease_expires_at", "")),
                )
                if isinstance(prev, dict)
                else None,
                server_date=answer.headers.get("date"),
            )
        if status == "completed":
            return CompletedClaim(
                status="completed",
                replayed=b.get("replayed") is True,
                attempt=int(b.get("attempt", 0)),
                effect_id=str(b.get("effect_id", "")),
                completed_at=str(b.get("completed_at", "")),
                expires_at=str(b.get("expires_at", "")),
                outcome=Outcome.from_wire(b.get("outcome")),
            )
        raise UnexpectedResponseError(
            "unexpected_response", answer.status, b, f"claim answered an unknown status {status!r}"
        )

    def complete(
        self,
        operation: str,
        key: str,
        owner_token: str,
        outcome: OutcomeInput,
        *,
        retry_until: Optional[float] = None,
    ) -> Op[KeyRecord]:
        wire = to_outcome(outcome).to_wire()
        answer = yield from self.call(
            "POST",
            self.key_path(operation, key) + "/complete",
            {"owner_token": owner_token, "outcome": wire},
            retry_until=retry_until,
        )
        return KeyRecord.from_wire(answer.body)

    def release(self, operation: str, key: str, owner_token: str) -> Op[None]:
        try:
            yield from self.call("POST", self.key_path(operation, key) + "/release", {"owner_token": owner_token})
        except NotFoundError:
            # An earlier try may have released it and its answer was lost: the key is gone either way.
            return None
        return None

    def heartbeat(
        self,
        operation: str,
        key: str,
        owner_token: str,
        lease_ms: Optional[int] = None,
        *,
        timeout_ms: Optional[int] = None,
        retry_until: Optional[float] = None,
    ) -> Op[KeyRecord]:
        body: Dict[str, Any] = {"owner_token": owner_token}
        if lease_ms is not None:
            body["lease_ms"] = int(lease_ms)
        answer = yield from self.call(
            "POST",
            self.key_path(operation, key) + "/heartbeat",
            body,
            timeout_ms=timeout_ms,
            retry_until=retry_until,
        )
        return KeyRecord.from_wire(answer.body)

    def record_step(self, operation: str, key: str, owner_token: str, step: str, provider_ref: str) -> Op[KeyRecord]:
        answer = yield from self.call(
            "PUT",
            f"{self.key_path(operation, key)}/steps/{encode_segment(step)}",
            {"owner_token": owner_token, "provider_ref": provider_ref},
        )
        return KeyRecord.from_wire(answer.body)

    def quarantine(self, operation: str, key: str, owner_token: str, reason: str) -> Op[KeyRecord]:
        try:
            answer = yield from self.call(
                "POST",
                self.key_path(operation, key) + "/quarantine",
                {"owner_token": owner_token, "reason": reason},
            )
        except QuarantinedError:
            # A retry after a lost answer finds the key quarantined already.
            rec = yield from self.lookup(operation, key)
            if rec is not None and rec.state == "quarantined":
                return rec
            raise
        return KeyRecord.from_wire(answer.body)

    def resolve(
        self,
        operation: str,
        key: str,
        *,
        outcome: Optional[OutcomeInput] = None,
        release: bool = False,
        reason: Optional[str] = None,
        owner_token: Optional[str] = None,
    ) -> Op[Optional[KeyRecord]]:
        if (outcome is None) == (not release):
            raise ValueError("give exactly one of outcome=... and release=True")
        body: Dict[str, Any] = {}
        if outcome is not None:
            body["outcome"] = to_outcome(outcome).to_wire()
        else:
            body["release"] = True
        if reason is not None:
            body["reason"] = reason
        if owner_token is not None:
            body["owner_token"] = owner_token
        try:
            answer = yield from self.call("POST", self.key_path(operation, key) + "/resolve", body)
        except NotFoundError:
            if release:
                # An earlier try released it and its answer was lost.
                return None
            raise
        b = answer.body
        if isinstance(b, dict) and b.get("status") == "released":
            return None
        return KeyRecord.from_wire(b)

    def lookup(self, operation: str, key: str) -> Op[Optional[KeyRecord]]:
        try:
            answer = yield from self.call("GET", self.key_path(operation, key))
        except NotFoundError:
            return None
        return KeyRecord.from_wire(answer.body)

    def list_keys(
        self,
        *,
        state: Optional[str] = None,
        operation: Optional[str] = None,
        older_than: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> Op[KeyPage]:
        params = {
            k: v
            for k, v in (
                ("state", state),
                ("operation", operation),
                ("older_than", older_than),
                ("limit", None if limit is None else str(limit)),
                ("cursor", cursor),
            )
            if v is not None
        }
        path = "/v1/keys" + ("?" + urlencode(params) if params else "")
        answer = yield from self.call("GET", path)
        b = answer.body if isinstance(answer.body, dict) else {}
        nc = b.get("next_cursor")
        return KeyPage(
            items=[KeySummary.from_wire(i) for i in b.get("items", []) if isinstance(i, dict)],
            next_cursor=nc if isinstance(nc, str) else None,
        )

    def get_operation_class(self, operation: str) -> Op[Dict[str, Any]]:
        answer = yield from self.call("GET", f"/v1/operation-classes/{encode_segment(operation)}")
        return dict(answer.body)

    def put_operation_class(self, operation: str, policy: Mapping[str, Any]) -> Op[Dict[str, Any]]:
        answer = yield from self.call("PUT", f"/v1/operation-classes/{encode_segment(operation)}", dict(policy))
        return dict(answer.body)

    def delete_operation_class(self, operation: str) -> Op[Dict[str, Any]]:
        answer = yield from self.call("DELETE", f"/v1/operation-classes/{encode_segment(operation)}")
        return dict(answer.body)

    # ------------------------------------------------------------ once()

    def once(
        self,
        operation: str,
        key: str,
        request: Any,
        effect: Callable[..., Any],
        reconcile: Optional[Callable[..., Any]] = None,
        *,
        fingerprint: Optional[str] = None,
        deadline_ms: int = 30_000,
        lease_ms: Optional[int] = None,
    ) -> Op[OnceResult]:
        deadline = self.now() + deadline_ms / 1000
        n = 0
        while True:
            remaining_ms = (deadline - self.now()) * 1000
            wait_ms = int(max(0, min(self.max_wait_ms, remaining_ms)))
            claim = yield from self.claim(
                operation, key, request, fingerprint=fingerprint, wait_ms=wait_ms, lease_ms=lease_ms
            )
            if isinstance(claim, CompletedClaim):
                return OnceResult(
                    outcome=claim.outcome,
                    replayed=True,
                    expires_at=claim.expires_at,
                    effect_id=claim.effect_id,
                    attempt=claim.attempt,
                    via="replay",
                )
            if isinstance(claim, InProgressClaim):
                left = deadline - self.now()
                if left <= 0:
                    raise InProgressTimeoutError(
                        claim.problem,
                        f"{operation}/{key}: still in progress (attempt {claim.attempt}, lease until "
                        f"{claim.lease_expires_at}) at the deadline; the effect was not run by this call",
                    )
                # The server already waited wait_ms when we asked it to; otherwise
                # honour Retry-After. Back off with jitter, never past the deadline.
                backoff = _backoff_ms(100, n)
                ra = claim.retry_after_ms
                if wait_ms > 0:
                    base = min(backoff, ra) if ra is not None else backoff
                else:
                    base = ra if ra is not None else backoff
                yield Sleep(min(_jitter_ms(base) / 1000, left))
                n += 1
                continue
            result = yield from self._own(operation, key, claim, effect, reconcile, lease_ms)
            return result

    def _finish(
        self, operation: str, key: str, token: str, outcome_input: OutcomeInput, via: Via
    ) -> Op[OnceResult]:
        # The effect has happened: try hard to store its outcome. A retry after a
        # lost answer sends the same token and outcome, which the server accepts.
        # lease_lost here means another attempt took over: it propagates.
        outcome = to_outcome(outcome_input)
        record = yield from self.complete(
            operation,
            key,
            token,
            outcome,
            retry_until=self.now() + max(self.retry_for_ms, 60_000) / 1000,
        )
        return OnceResult(
            outcome=record.outcome if record.outcome is not None else outcome,
            replayed=False,
            expires_at=record.expires_at,
            effect_id=record.effect_id,
            attempt=record.attempt,
            via=via,
        )

    def _own(
        self,
        operation: str,
        key: str,
        claim: OwnedClaim,
        effect: Callable[..., Any],
        reconcile: Optional[Callable[..., Any]],
        lease_ms: Optional[int],
    ) -> Op[OnceResult]:
        token = claim.owner_token
        steps: Dict[str, StepRecord] = dict(claim.steps)

        # On recovering, ask first.
        if claim.status == "recovering" and reconcile is not None:
            info = ReconcileInfo(operation, key, claim.attempt, claim.previous_attempt)
            try:
                verdict = yield CallUser(reconcile, (claim.effect_id, types.MappingProxyType(dict(steps)), info))
            except Exception as e:
                # Could not tell what happened: leave the key to the lease rules.
                raise AmbiguousEffectError(operation, key, claim.effect_id, e) from e
            if verdict is None:
                verdict = NotDone()
            if isinstance(verdict, Done):
                result = yield from self._finish(operation, key, token, verdict.outcome, "reconcile")
                return result
            if not isinstance(verdict, NotDone):
                raise TypeError(f"reconcile must return Done(outcome) or NotDone(...), not {verdict!r}")
            for name, ref in (verdict.steps_done or {}).items():
                if name not in steps:
                    rec = yield from self.record_step(operation, key, token, name, ref)
                    if name in rec.steps:
                        steps[name] = rec.steps[name]

        # Heartbeats while the effect runs, every lease x fraction.
        lease = lease_ms if lease_ms is not None else self._lease_estimate_ms(claim)
        interval_ms = max(200, int(lease * self.heartbeat_fraction))
        ctx = self.context_factory(
            core=self, operation=operation, key=key, owner_token=token, claim=claim, steps=steps
        )
        beats = self._heartbeats(ctx, lease_ms, interval_ms)
        try:
            outcome = yield RunEffect(effect, ctx, beats)
        except NothingDoneError as e:
            if ctx.lease_lost_error is not None:
                raise ctx.lease_lost_error from e
            yield from self.release(operation, key, token)
            raise
        except Exception as e:
            if ctx.lease_lost_error is not None:
                raise ctx.lease_lost_error from e
            raise AmbiguousEffectError(operation, key, claim.effect_id, e) from e
        if ctx.lease_lost_error is not None:
            raise ctx.lease_lost_error
        result = yield from self._finish(operation, key, token, outcome, "effect")
        return result

    @staticmethod
    def _lease_estimate_ms(claim: OwnedClaim) -> int:
        """The lease the server gave (the class's, when the claim sent no ``lease_ms``): its end
        less the time now, by our clock and by the server's ``Date``; the shorter, so a clock
        that lags never spaces heartbeats past the lease (more frequent ones are harmless)."""
        end = parse_rfc3339(claim.lease_expires_at)
        if end is None:
            return 30_000
        if end.tzinfo is None:
            end = end.replace(tzinfo=timezone.utc)
        estimates = [(end - datetime.now(timezone.utc)).total_seconds() * 1000]
        if claim.server_date is not None:
            try:
                server_now = parsedate_to_datetime(claim.server_date)
                if server_now.tzinfo is None:
                    server_now = server_now.replace(tzinfo=timezone.utc)
                estimates.append((end - server_now).total_seconds() * 1000)
            except (TypeError, ValueError, IndexError):
                pass
        return int(max(1_000, min(estimates)))

    def _as_lease_lost(self, ctx: ContextBase, err: IdemkeyError) -> LeaseLostError:
        if isinstance(err, LeaseLostError):
            return err
        return LeaseLostError(
            "lease_lost",
            err.status,
            err.problem,
            f"{ctx.operation}/{ctx.key}: the lease was lost ({err})",
        )

    def _heartbeats(self, ctx: ContextBase, lease_ms: Optional[int], interval_ms: int) -> Generator[Any, Any, None]:
        interval = interval_ms / 1000
        budget_ms = max(500, interval_ms)
        while True:
            stopped = yield WaitStop(interval)
            if stopped:
                return
            try:
                yield from self.heartbeat(
                    ctx.operation,
                    ctx.key,
                    ctx._owner_token,
                    lease_ms,
                    timeout_ms=budget_ms,
                    retry_until=self.now() + budget_ms / 1000,
                )
            except (LeaseLostError, QuarantinedError, NotFoundError, AlreadyCompletedError) as e:
                ctx._lose(self._as_lease_lost(ctx, e))
                return
            except Exception:
                # Transport trouble, or a 503: try again at the next tick.
                pass

    def ctx_record_step(self, ctx: ContextBase, name: str, provider_ref: str) -> Op[None]:
        if ctx.lease_lost_error is not None:
            raise ctx.lease_lost_error
        try:
            rec = yield from self.record_step(ctx.operation, ctx.key, ctx._owner_token, name, provider_ref)
        except (LeaseLostError, QuarantinedError) as e:
            ctx._lose(self._as_lease_lost(ctx, e))
            raise
        if name in rec.steps:
            ctx._steps[name] = rec.steps[name]

    def ctx_step(self, ctx: ContextBase, name: str, run: Callable[[str], Any]) -> Op[str]:
        done = ctx._steps.get(name)
        if done is not None:
            return done.provider_ref
        if ctx.lease_lost_error is not None:
            raise ctx.lease_lost_error
        ref = yield CallUser(run, (ctx.step_effect_id(name),))
        if not isinstance(ref, str):
            raise TypeError(f"a step's run must return the provider reference (a str), not {type(ref).__name__}")
        yield from self.ctx_record_step(ctx, name, ref)
        return ref
