"""Pure parts of the sans-IO core (no server needed): encoding, Retry-After, the lease estimate."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import pytest

import idemkey
from idemkey import Outcome, _core


def test_encode_segment_leaves_only_unreserved() -> None:
    assert _core.encode_segment("order/42?x=1#%+ é") == "order%2F42%3Fx%3D1%23%25%2B%20%C3%A9"
    assert _core.encode_segment("A-z_0.9~") == "A-z_0.9~"


def test_parse_retry_after() -> None:
    assert _core.parse_retry_after(None) is None
    assert _core.parse_retry_after("2") == 2000
    assert _core.parse_retry_after(" 0 ") == 0
    assert _core.parse_retry_after("soon") is None
    later = datetime.now(timezone.utc) + timedelta(seconds=30)
    ms = _core.parse_retry_after(format_datetime(later, usegmt=True))
    assert ms is not None and 28_000 <= ms <= 30_000


def _claim(lease_end: datetime, server_date: "datetime | None") -> idemkey.OwnedClaim:
    return idemkey.OwnedClaim(
        status="claimed",
        owner_token="t",
        attempt=1,
        lease_expires_at=lease_end.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        expires_at="",
        effect_id="eff_x",
        server_date=None if server_date is None else format_datetime(server_date, usegmt=True),
    )


def test_lease_estimate_takes_the_shorter_clock() -> None:
    now = datetime.now(timezone.utc).replace(microsecond=0)
    # our clock agrees with the server's
    assert 9_000 <= _core.Core._lease_estimate_ms(_claim(now + timedelta(seconds=10), now)) <= 10_000
    # our clock lags the server's by a minute: the server's Date keeps heartbeats within the lease
    lagging = _claim(now + timedelta(seconds=70), now + timedelta(seconds=60))
    assert _core.Core._lease_estimate_ms(lagging) <= 10_000
    # never below the protocol's minimum lease
    assert _core.Core._lease_estimate_ms(_claim(now - timedelta(seconds=5), None)) == 1_000


def test_outcome_shapes() -> None:
    assert Outcome(201, body={"a": 1}, resource_id="r").to_wire() == {
        "status_code": 201,
        "body": {"a": 1},
        "resource_id": "r",
    }
    with pytest.raises(TypeError):
        idemkey.types.to_outcome({"status": 201})
    with pytest.raises(TypeError):
        idemkey.types.to_outcome("201")  # type: ignore[arg-type]


def test_sync_client_refuses_coroutine_effects() -> None:
    client = idemkey.Client("http://127.0.0.1:9", "t")

    async def effect(ctx: object) -> Outcome:
        return Outcome(201)

    with pytest.raises(TypeError, match="AsyncClient"):
        client.once("charges.create", "k", {}, effect)  # type: ignore[arg-type]
