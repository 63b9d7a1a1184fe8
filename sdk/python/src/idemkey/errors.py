"""Typed errors.

Every problem ``code`` the server can answer (docs/protocol.md, "Errors") has
its own class; all extend :class:`IdemkeyError`, which carries the problem's
``code``, the HTTP ``status`` and the whole problem document. Match with
``except``/``isinstance`` or on ``code``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Type

Problem = Dict[str, Any]


def _describe(code: str, status: int, problem: Mapping[str, Any]) -> str:
    title = problem.get("title") if isinstance(problem.get("title"), str) else "idemkey error"
    detail = f": {problem['detail']}" if isinstance(problem.get("detail"), str) else ""
    rid = f" (request {problem['request_id']})" if isinstance(problem.get("request_id"), str) else ""
    return f"{code} ({status}) {title}{detail}{rid}"


class IdemkeyError(Exception):
    """A problem answered by the server, or an SDK-side failure.

    ``code`` is the problem ``code`` (or an SDK code such as ``transport`` or
    ``in_progress_timeout``), ``status`` the HTTP status (0 when no answer
    was received), ``problem`` the problem document as received (empty for
    SDK-side errors), ``request_id`` the server's request id when known, and
    ``retry_after_ms`` the server's ``Retry-After`` in milliseconds, if any.
    """

    code: str
    status: int
    problem: Problem
    request_id: Optional[str]
    retry_after_ms: Optional[int]

    def __init__(
        self,
        code: str,
        status: int,
        problem: Optional[Mapping[str, Any]] = None,
        message: Optional[str] = None,
        *,
        retry_after_ms: Optional[int] = None,
    ) -> None:
        p: Problem = dict(problem or {})
        super().__init__(message if message is not None else _describe(code, status, p))
        self.code = code
        self.status = status
        self.problem = p
        rid = p.get("request_id")
        self.request_id = rid if isinstance(rid, str) else None
        self.retry_after_ms = retry_after_ms


# 400s: caller bugs, never retried.
class InvalidJsonError(IdemkeyError):
    """400 ``invalid_json``: the body is not JSON."""


class InvalidBodyError(IdemkeyError):
    """400 ``invalid_body``: JSON of the wrong shape."""


class InvalidPolicyError(IdemkeyError):
    """400 ``invalid_policy``: an operation-class policy value is invalid (``detail`` names the field)."""


class InvalidKeyError(IdemkeyError):
    """400 ``invalid_key``: the key is not 1-255 visible ASCII characters."""


class InvalidOperationError(IdemkeyError):
    """400 ``invalid_operation``: the operation name does not match the pattern."""


class InvalidFingerprintError(IdemkeyError):
    """400 ``invalid_fingerprint``: not 64 lowercase hex characters."""


class NumberOutOfRangeError(IdemkeyError):
    """400 ``number_out_of_range``: a number a double cannot carry exactly; send it as a string."""


class InvalidRequestError(IdemkeyError):
    """400 ``invalid_request``: the request cannot be canonicalised."""


class InvalidLeaseError(IdemkeyError):
    """400 ``invalid_lease``: ``lease_ms`` out of range."""


class InvalidOutcomeError(IdemkeyError):
    """400 ``invalid_outcome``: the outcome is not of the documented shape."""


class InvalidStepError(IdemkeyError):
    """400 ``invalid_step``: the step name does not match the pattern."""


class InvalidQueryError(IdemkeyError):
    """400 ``invalid_query``: a list parameter is unknown or out of range."""


# 413
class PayloadTooLargeError(IdemkeyError):
    """413 ``payload_too_large``."""


class OutcomeTooLargeError(IdemkeyError):
    """413 ``outcome_too_large``: over the class's ``max_outcome_bytes``."""


# 401 / 403 / 404
class UnauthorizedError(IdemkeyError):
    """401 ``unauthorized``: missing or invalid bearer token."""


class ForbiddenError(IdemkeyError):
    """403 ``forbidden``: the token's roles do not allow this call."""


class NotFoundError(IdemkeyError):
    """404 ``not_found``: no live record for this tenant."""


class NoRouteError(IdemkeyError):
    """404 ``no_route``: no such endpoint or method."""


# 409
class InProgressError(IdemkeyError):
    """409 ``in_progress``: another attempt holds a live lease."""

    @property
    def attempt(self) -> Optional[int]:
        a = self.problem.get("attempt")
        return a if isinstance(a, int) else None

    @property
    def lease_expires_at(self) -> Optional[str]:
        v = self.problem.get("lease_expires_at")
        return v if isinstance(v, str) else None


class QuarantinedError(IdemkeyError):
    """409 ``quarantined``: the outcome is ambiguous; nobody retries until it is resolved."""


class LeaseLostError(IdemkeyError):
    """409 ``lease_lost``: another attempt owns the key now. Stop; claim again to see the state."""


class AlreadyCompletedError(IdemkeyError):
    """409 ``already_completed``."""


class StepConflictError(IdemkeyError):
    """409 ``step_conflict``: the step was recorded with another ``provider_ref``."""


class TooManyStepsError(IdemkeyError):
    """409 ``too_many_steps``."""


class NotQuarantinedError(IdemkeyError):
    """409 ``not_quarantined``."""


# 422
class KeyReusedError(IdemkeyError):
    """422 ``key_reused``: the same key with a different request. A caller bug: do not retry.

    ``mismatched`` lists the JSON pointers (RFC 6901) of the fields that
    differ, when the server could tell (None otherwise);
    ``mismatched_truncated`` is True when there may be more.
    """

    @property
    def mismatched(self) -> Optional[List[str]]:
        m = self.problem.get("mismatched")
        if not isinstance(m, list):
            return None
        return [p for p in m if isinstance(p, str)]

    @property
    def mismatched_truncated(self) -> bool:
        return self.problem.get("mismatched_truncated") is True


class InvalidWebhookError(IdemkeyError):
    """400 ``invalid_webhook``: a webhook endpoint's settings are invalid."""


class WebhookNotFoundError(IdemkeyError):
    """404 ``webhook_not_found``: no such webhook endpoint for this tenant."""


class QuotaExceededError(IdemkeyError):
    """507 ``quota_exceeded``: the tenant reached its quota of stored keys or outcome bytes; not retried."""


# 429 / 503: retried by the SDK after Retry-After.
class RateLimitedError(IdemkeyError):
    """429 ``rate_limited``: retried by the SDK after ``Retry-After`` until its retry budget is spent."""


class UnavailableError(IdemkeyError):
    """503 ``unavailable``: never "new"; retried by the SDK after ``Retry-After``."""


# SDK-side errors.
class TransportError(IdemkeyError):
    """No answer from the server (connection error, timeout) within the retry budget. ``code`` is ``transport``."""

    def __init__(self, message: str) -> None:
        super().__init__("transport", 0, {}, message)


class UnexpectedResponseError(IdemkeyError):
    """The server answered something the SDK does not understand."""


class InProgressTimeoutError(IdemkeyError):
    """once() waited for another attempt (``in_progress``) until its deadline and gave up.

    The effect was not run by this call. ``code`` is ``in_progress_timeout``.
    """

    def __init__(self, problem: Mapping[str, Any], message: str) -> None:
        super().__init__("in_progress_timeout", 409, problem, message)

    @property
    def attempt(self) -> Optional[int]:
        a = self.problem.get("attempt")
        return a if isinstance(a, int) else None

    @property
    def lease_expires_at(self) -> Optional[str]:
        v = self.problem.get("lease_expires_at")
        return v if isinstance(v, str) else None


class AmbiguousEffectError(IdemkeyError):
    """The effect (or reconcile) failed in a way that may have left an effect behind.

    Anything the effect raises but :class:`NothingDoneError`. The key was NOT
    released: it is left to the lease rules, so a later call after the lease
    ends gets ``recovering`` and reconciles. ``code`` is ``effect_ambiguous``;
    ``__cause__`` (and ``cause``) is the effect's exception.
    """

    def __init__(self, operation: str, key: str, effect_id: str, cause: BaseException) -> None:
        super().__init__(
            "effect_ambiguous",
            0,
            {},
            f"the effect for {operation}/{key} ({effect_id}) failed ambiguously ({cause!r}); "
            'the key was not released and is left to the lease rules: after the lease ends the next call gets '
            '"recovering" and must reconcile',
        )
        self.operation = operation
        self.key = key
        self.effect_id = effect_id
        self.cause = cause


class NothingDoneError(Exception):
    """Raise this from an effect when you KNOW nothing was done.

    (Validation failed, the provider refused before acting.) once() releases
    the key, so the next call runs afresh, and re-raises this error.
    """

    def __init__(self, message: str = "nothing was done") -> None:
        super().__init__(message)


#: Every problem code of docs/protocol.md's Errors table, with its class.
ERROR_CLASSES: Mapping[str, Type[IdemkeyError]] = {
    "invalid_json": InvalidJsonError,
    "invalid_body": InvalidBodyError,
    "invalid_policy": InvalidPolicyError,
    "invalid_key": InvalidKeyError,
    "invalid_operation": InvalidOperationError,
    "invalid_fingerprint": InvalidFingerprintError,
    "number_out_of_range": NumberOutOfRangeError,
    "invalid_request": InvalidRequestError,
    "invalid_lease": InvalidLeaseError,
    "invalid_outcome": InvalidOutcomeError,
    "payload_too_large": PayloadTooLargeError,
    "outcome_too_large": OutcomeTooLargeError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "not_found": NotFoundError,
    "no_route": NoRouteError,
    "in_progress": InProgressError,
    "quarantined": QuarantinedError,
    "lease_lost": LeaseLostError,
    "already_completed": AlreadyCompletedError,
    "key_reused": KeyReusedError,
    "invalid_step": InvalidStepError,
    "invalid_query": InvalidQueryError,
    "step_conflict": StepConflictError,
    "too_many_steps": TooManyStepsError,
    "not_quarantined": NotQuarantinedError,
    "invalid_webhook": InvalidWebhookError,
    "webhook_not_found": WebhookNotFoundError,
    "quota_exceeded": QuotaExceededError,
    "rate_limited": RateLimitedError,
    "unavailable": UnavailableError,
}


def error_from_problem(status: int, problem: Mapping[str, Any], retry_after_ms: Optional[int] = None) -> IdemkeyError:
    """Builds the typed error for a problem answer."""
    code_v = problem.get("code")
    code = code_v if isinstance(code_v, str) else f"http_{status}"
    cls = ERROR_CLASSES.get(code, UnexpectedResponseError)
    return cls(code, status, problem, retry_after_ms=retry_after_ms)
