"""Typed results of the API and of once()."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Mapping, Optional, Union

KeyState = Literal["in_progress", "completed", "quarantined"]


@dataclass(frozen=True)
class Outcome:
    """What an effect produced: stored by complete and replayed as stored.

    ``body`` None is sent as no body.
    """

    status_code: int
    body: Any = None
    headers: Optional[Dict[str, str]] = None
    resource_id: Optional[str] = None

    def to_wire(self) -> Dict[str, Any]:
        if not isinstance(self.status_code, int) or isinstance(self.status_code, bool):
            raise TypeError("an outcome needs status_code (an integer 100-599)")
        wire: Dict[str, Any] = {"status_code": self.status_code}
        if self.headers is not None:
            wire["headers"] = dict(self.headers)
        if self.body is not None:
            wire["body"] = self.body
        if self.resource_id is not None:
            wire["resource_id"] = self.resource_id
        return wire

    @classmethod
    def from_wire(cls, w: Any) -> "Outcome":
        o = w if isinstance(w, Mapping) else {}
        headers = o.get("headers")
        rid = o.get("resource_id")
        return cls(
            status_code=int(o.get("status_code", 0)),
            body=o.get("body"),
            headers=dict(headers) if isinstance(headers, Mapping) else None,
            resource_id=rid if isinstance(rid, str) else None,
        )


#: An outcome as the caller may give it: an :class:`Outcome`, or a mapping
#: in the wire's shape (``{"status_code": 201, "body": ..., "headers": ..., "resource_id": ...}``).
OutcomeInput = Union[Outcome, Mapping[str, Any]]


def to_outcome(o: OutcomeInput) -> Outcome:
    if isinstance(o, Outcome):
        return o
    if isinstance(o, Mapping):
        unknown = set(o) - {"status_code", "body", "headers", "resource_id"}
        if unknown:
            raise TypeError(f"an outcome has status_code, body, headers, resource_id; not {sorted(unknown)}")
        if "status_code" not in o:
            raise TypeError("an outcome needs status_code (an integer 100-599)")
        return Outcome(
            status_code=o["status_code"],
            body=o.get("body"),
            headers=o.get("headers"),
            resource_id=o.get("resource_id"),
        )
    raise TypeError(f"an effect must return an Outcome or a mapping with status_code, not {type(o).__name__}")


@dataclass(frozen=True)
class StepRecord:
    """A step recorded on the key (docs/recovery.md)."""

    effect_id: str
    provider_ref: str
    done_at: str


def steps_from_wire(w: Any) -> Dict[str, StepRecord]:
    steps: Dict[str, StepRecord] = {}
    if isinstance(w, Mapping):
        for name, s in w.items():
            s = s if isinstance(s, Mapping) else {}
            steps[str(name)] = StepRecord(
                effect_id=str(s.get("effect_id", "")),
                provider_ref=str(s.get("provider_ref", "")),
                done_at=str(s.get("done_at", "")),
            )
    return steps


@dataclass(frozen=True)
class PreviousAttempt:
    attempt: int
    claimed_at: str
    lease_expires_at: str


@dataclass(frozen=True)
class OwnedClaim:
    """You own the key: ``claimed`` (new) or ``recovering`` (you took over after the previous owner's lease ran out)."""

    status: Literal["claimed", "recovering"]
    owner_token: str
    attempt: int
    lease_expires_at: str
    expires_at: str
    effect_id: str
    steps: Dict[str, StepRecord] = field(default_factory=dict)
    previous_attempt: Optional[PreviousAttempt] = None
    #: The answer's ``Date`` header (the server's clock), when it had one.
    server_date: Optional[str] = None


@dataclass(frozen=True)
class CompletedClaim:
    """The key was completed: its stored outcome."""

    status: Literal["completed"]
    replayed: bool
    attempt: int
    effect_id: str
    completed_at: str
    expires_at: str
    outcome: Outcome


@dataclass(frozen=True)
class InProgressClaim:
    """Another attempt holds a live lease."""

    status: Literal["in_progress"]
    attempt: Optional[int]
    lease_expires_at: Optional[str]
    expires_at: Optional[str]
    #: The server's Retry-After, in ms.
    retry_after_ms: Optional[int]
    problem: Dict[str, Any]


ClaimResult = Union[OwnedClaim, CompletedClaim, InProgressClaim]


@dataclass(frozen=True)
class KeyRecord:
    """A key's record, as lookup and the owner calls answer it."""

    operation: str
    key: str
    state: KeyState
    fingerprint: str
    attempt: int
    effect_id: str
    tier: str
    created_at: str
    claimed_at: str
    expires_at: str
    steps: Dict[str, StepRecord]
    history: List[Dict[str, Any]]
    lease_expires_at: Optional[str] = None
    completed_at: Optional[str] = None
    quarantine_reason: Optional[str] = None
    outcome: Optional[Outcome] = None

    @classmethod
    def from_wire(cls, w: Any) -> "KeyRecord":
        r: Mapping[str, Any] = w if isinstance(w, Mapping) else {}

        def opt(name: str) -> Optional[str]:
            v = r.get(name)
            return v if isinstance(v, str) else None

        return cls(
            operation=str(r.get("operation", "")),
            key=str(r.get("key", "")),
            state=r.get("state", "in_progress"),
            fingerprint=str(r.get("fingerprint", "")),
            attempt=int(r.get("attempt", 0)),
            effect_id=str(r.get("effect_id", "")),
            tier=str(r.get("tier", "")),
            created_at=str(r.get("created_at", "")),
            claimed_at=str(r.get("claimed_at", "")),
            expires_at=str(r.get("expires_at", "")),
            steps=steps_from_wire(r.get("steps")),
            history=[dict(e) for e in r.get("history", []) if isinstance(e, Mapping)],
            lease_expires_at=opt("lease_expires_at"),
            completed_at=opt("completed_at"),
            quarantine_reason=opt("quarantine_reason"),
            outcome=Outcome.from_wire(r["outcome"]) if "outcome" in r and r["outcome"] is not None else None,
        )


@dataclass(frozen=True)
class KeySummary:
    """One item of ``GET /v1/keys`` (no outcome, no history)."""

    operation: str
    key: str
    state: KeyState
    attempt: int
    effect_id: str
    created_at: str
    claimed_at: str
    expires_at: str
    lease_expires_at: Optional[str] = None
    completed_at: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_wire(cls, w: Any) -> "KeySummary":
        r: Mapping[str, Any] = w if isinstance(w, Mapping) else {}
        lea = r.get("lease_expires_at")
        comp = r.get("completed_at")
        return cls(
            operation=str(r.get("operation", "")),
            key=str(r.get("key", "")),
            state=r.get("state", "in_progress"),
            attempt=int(r.get("attempt", 0)),
            effect_id=str(r.get("effect_id", "")),
            created_at=str(r.get("created_at", "")),
            claimed_at=str(r.get("claimed_at", "")),
            expires_at=str(r.get("expires_at", "")),
            lease_expires_at=lea if isinstance(lea, str) else None,
            completed_at=comp if isinstance(comp, str) else None,
            raw=dict(r),
        )


@dataclass(frozen=True)
class KeyPage:
    """A page of ``GET /v1/keys``: ``next_cursor`` is None on the last page."""

    items: List[KeySummary]
    next_cursor: Optional[str]


Via = Literal["effect", "replay", "reconcile"]


@dataclass(frozen=True)
class OnceResult:
    """What once() returns: the outcome plus where it came from."""

    outcome: Outcome
    #: True when the outcome was stored earlier and this call ran nothing.
    replayed: bool
    #: When the key's replay protection ends (RFC 3339).
    expires_at: str
    effect_id: str
    attempt: int
    #: How this call obtained the outcome.
    via: Via

    @property
    def status_code(self) -> int:
        return self.outcome.status_code

    @property
    def body(self) -> Any:
        return self.outcome.body

    @property
    def headers(self) -> Optional[Dict[str, str]]:
        return self.outcome.headers

    @property
    def resource_id(self) -> Optional[str]:
        return self.outcome.resource_id


@dataclass(frozen=True)
class Done:
    """reconcile's answer: the effect happened; complete with this outcome and run nothing."""

    outcome: OutcomeInput


@dataclass(frozen=True)
class NotDone:
    """reconcile's answer: the effect did not happen (run it, same effect id).

    ``steps_done`` maps the names of steps that did happen to their provider
    references: they are recorded, and the effect runs only the rest.
    """

    steps_done: Optional[Mapping[str, str]] = None


Reconciliation = Union[Done, NotDone]


@dataclass(frozen=True)
class ReconcileInfo:
    operation: str
    key: str
    attempt: int
    previous_attempt: Optional[PreviousAttempt]
