"""New keys, replays, business failures, key reuse, quarantine, the key helper."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any, List

import pytest
from conftest import IdemkeyServer, fresh_tenant

import idemkey
from idemkey import (
    AsyncEffectContext,
    EffectContext,
    KeyReusedError,
    Outcome,
    QuarantinedError,
    is_uuid_v7,
    key_timestamp,
    new_key,
)

REQUEST = {"amount": "25.00", "currency": "EUR", "customer": "cus_42"}
EFFECT_ID = re.compile(r"^eff_[0-9a-f]{32}$")


def test_claimed_runs_effect_once(server: IdemkeyServer) -> None:
    client = server.client()
    key = new_key()
    seen: List[EffectContext] = []

    def effect(ctx: EffectContext) -> Outcome:
        seen.append(ctx)
        return Outcome(201, body={"charge": "ch_1"}, headers={"Location": "/charges/ch_1"}, resource_id="ch_1")

    r = client.once("charges.create", key, REQUEST, effect)
    assert len(seen) == 1
    assert EFFECT_ID.match(seen[0].effect_id)
    assert seen[0].attempt == 1 and seen[0].recovering is False
    assert r.replayed is False and r.via == "effect"
    assert r.status_code == 201
    assert r.body == {"charge": "ch_1"}
    assert r.headers == {"Location": "/charges/ch_1"}
    assert r.resource_id == "ch_1"
    assert r.effect_id == seen[0].effect_id and r.attempt == 1 and r.expires_at
    rec = client.lookup("charges.create", key)
    assert rec is not None and rec.state == "completed"
    assert rec.outcome is not None and rec.outcome.status_code == 201


def test_claimed_runs_effect_once__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        async with server.async_client() as client:
            key = new_key()
            seen: List[AsyncEffectContext] = []

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                seen.append(ctx)
                await asyncio.sleep(0)
                return Outcome(201, body={"charge": "ch_1"}, resource_id="ch_1")

            r = await client.once("charges.create", key, REQUEST, effect)
            assert len(seen) == 1 and EFFECT_ID.match(seen[0].effect_id)
            assert r.replayed is False and r.via == "effect" and r.attempt == 1
            assert r.body == {"charge": "ch_1"} and r.resource_id == "ch_1"
            rec = await client.lookup("charges.create", key)
            assert rec is not None and rec.state == "completed"

    asyncio.run(main())


def test_completed_replays_without_effect(server: IdemkeyServer) -> None:
    client = server.client()
    key = new_key()
    runs = 0

    def effect(ctx: EffectContext) -> Any:
        nonlocal runs
        runs += 1
        return {"status_code": 201, "body": {"charge": "ch_2"}}

    first = client.once("charges.create", key, REQUEST, effect)
    second = client.once("charges.create", key, {"customer": "cus_42", "currency": "EUR", "amount": "25.00"}, effect)
    assert runs == 1
    assert first.replayed is False
    assert second.replayed is True and second.via == "replay"
    assert second.expires_at and idemkey._core.parse_rfc3339(second.expires_at) is not None
    assert second.status_code == 201 and second.body == {"charge": "ch_2"}
    assert second.effect_id == first.effect_id and second.attempt == 1


def test_completed_replays_without_effect__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        async with server.async_client() as client:
            key = new_key()
            runs = 0

            async def effect(ctx: AsyncEffectContext) -> Any:
                nonlocal runs
                runs += 1
                return {"status_code": 201, "body": {"charge": "ch_2"}}

            first = await client.once("charges.create", key, REQUEST, effect)
            second = await client.once("charges.create", key, REQUEST, effect)
            assert runs == 1 and first.replayed is False
            assert second.replayed is True and second.via == "replay" and second.expires_at
            assert second.body == {"charge": "ch_2"}

    asyncio.run(main())


def test_business_failure_is_final(server: IdemkeyServer) -> None:
    client = server.client()
    key = new_key()
    runs = 0

    def effect(ctx: EffectContext) -> Outcome:
        nonlocal runs
        runs += 1
        return Outcome(402, body={"error": "card_declined"})

    first = client.once("charges.create", key, REQUEST, effect)
    assert first.status_code == 402 and first.replayed is False
    second = client.once("charges.create", key, REQUEST, effect)
    assert runs == 1
    assert second.replayed is True and second.status_code == 402
    assert second.body == {"error": "card_declined"}


def test_business_failure_is_final__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        async with server.async_client() as client:
            key = new_key()
            runs = 0

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                nonlocal runs
                runs += 1
                return Outcome(402, body={"error": "card_declined"})

            first = await client.once("charges.create", key, REQUEST, effect)
            second = await client.once("charges.create", key, REQUEST, effect)
            assert runs == 1 and first.status_code == 402 and first.replayed is False
            assert second.replayed is True and second.status_code == 402

    asyncio.run(main())


def test_key_reused_raises(server: IdemkeyServer) -> None:
    client = server.client()
    key = new_key()
    runs = 0

    def effect(ctx: EffectContext) -> Outcome:
        nonlocal runs
        runs += 1
        return Outcome(201)

    client.once("charges.create", key, REQUEST, effect)
    with pytest.raises(KeyReusedError) as ei:
        client.once("charges.create", key, {**REQUEST, "amount": "30.00"}, effect)
    err = ei.value
    assert err.code == "key_reused" and err.status == 422
    assert err.mismatched == ["/amount"] and err.mismatched_truncated is False
    assert err.problem["code"] == "key_reused" and err.request_id
    assert runs == 1


def test_key_reused_raises__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        async with server.async_client() as client:
            key = new_key()
            runs = 0

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                nonlocal runs
                runs += 1
                return Outcome(201)

            await client.once("charges.create", key, REQUEST, effect)
            with pytest.raises(KeyReusedError) as ei:
                await client.once("charges.create", key, {**REQUEST, "currency": "USD"}, effect)
            assert ei.value.mismatched == ["/currency"]
            assert runs == 1

    asyncio.run(main())


def test_quarantined_raises(server: IdemkeyServer) -> None:
    client = server.client()
    key = new_key()
    claim = client.claim("charges.create", key, REQUEST)
    assert isinstance(claim, idemkey.OwnedClaim) and claim.status == "claimed"
    rec = client.quarantine("charges.create", key, claim.owner_token, "provider timed out")
    assert rec.state == "quarantined" and rec.quarantine_reason == "provider timed out"
    runs = 0

    def effect(ctx: EffectContext) -> Outcome:
        nonlocal runs
        runs += 1
        return Outcome(201)

    with pytest.raises(QuarantinedError) as ei:
        client.once("charges.create", key, REQUEST, effect)
    assert ei.value.code == "quarantined" and ei.value.status == 409
    assert runs == 0


def test_quarantined_raises__lease_expiry_policy(server: IdemkeyServer) -> None:
    """A class with on_lease_expiry quarantine quarantines an abandoned key; once() raises."""
    client = server.client()
    policy = client.put_operation_class("payouts.send", {"on_lease_expiry": "quarantine"})
    assert policy["on_lease_expiry"] == "quarantine" and policy["default"] is False
    key = new_key()
    # An owner that dies after claiming.
    assert client.claim("payouts.send", key, REQUEST, lease_ms=1000).status == "claimed"
    runs = 0

    def effect(ctx: EffectContext) -> Outcome:
        nonlocal runs
        runs += 1
        return Outcome(201)

    with pytest.raises(QuarantinedError):
        client.once("payouts.send", key, REQUEST, effect, deadline_ms=10_000)
    assert runs == 0
    rec = client.lookup("payouts.send", key)
    assert rec is not None and rec.state == "quarantined"


def test_quarantined_raises__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        async with server.async_client() as client:
            key = new_key()
            claim = await client.claim("charges.create", key, REQUEST)
            assert isinstance(claim, idemkey.OwnedClaim)
            await client.quarantine("charges.create", key, claim.owner_token, "provider timed out")
            runs = 0

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                nonlocal runs
                runs += 1
                return Outcome(201)

            with pytest.raises(QuarantinedError):
                await client.once("charges.create", key, REQUEST, effect)
            assert runs == 0

    asyncio.run(main())


def test_key_helper_uuidv7(server: IdemkeyServer) -> None:
    before = time.time_ns() // 1_000_000
    keys = [new_key() for _ in range(2000)]
    after = time.time_ns() // 1_000_000
    for k in keys:
        assert is_uuid_v7(k), k
        assert k[14] == "7"  # version
        assert k[19] in "89ab"  # variant 10
        assert before <= key_timestamp(k) <= after + 1
    # strictly increasing, so sorting keeps the order they were made in
    assert sorted(keys) == keys
    assert len(set(keys)) == len(keys)
    # and the server takes one as a key
    client = server.client()
    r = client.once("charges.create", keys[0], REQUEST, lambda ctx: Outcome(201))
    assert r.replayed is False
    assert client.lookup("charges.create", keys[0]) is not None


def test_fresh_tenants_are_isolated(server: IdemkeyServer) -> None:
    """A key of another tenant looks like a key that never existed."""
    a = server.client(fresh_tenant())
    b = server.client(fresh_tenant())
    key = new_key()
    a.once("charges.create", key, REQUEST, lambda ctx: Outcome(201))
    assert b.lookup("charges.create", key) is None
