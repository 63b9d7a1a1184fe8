"""Takeovers (recovering + reconcile), steps, and effects that fail."""

from __future__ import annotations

import asyncio
from typing import Any, Dict, List, Mapping, Optional

import pytest
from conftest import IdemkeyServer

import idemkey
from idemkey import (
    AmbiguousEffectError,
    AsyncEffectContext,
    Done,
    EffectContext,
    NotDone,
    NothingDoneError,
    Outcome,
    ReconcileInfo,
    StepRecord,
    new_key,
)

REQUEST = {"amount": "9.99", "currency": "EUR"}


class Provider:
    """A fake provider that never deduplicates: remembers what it did by reference."""

    def __init__(self) -> None:
        self.charges: Dict[str, str] = {}
        self.calls = 0

    def charge(self, ref: str) -> str:
        self.calls += 1
        cid = f"ch_{len(self.charges) + 1}"
        self.charges[ref] = cid
        return cid


def test_recovering_finds_effect_done(server: IdemkeyServer) -> None:
    client = server.client()
    key = new_key()
    provider = Provider()
    # Worker A claims, charges with the effect id, and dies before complete.
    a = client.claim("charges.create", key, REQUEST, lease_ms=1000)
    assert isinstance(a, idemkey.OwnedClaim)
    provider.charge(a.effect_id)
    runs = 0
    reconciled: List[str] = []
    infos: List[ReconcileInfo] = []

    def effect(ctx: EffectContext) -> Outcome:
        nonlocal runs
        runs += 1
        return Outcome(201, body={"charge": provider.charge(ctx.effect_id)})

    def reconcile(effect_id: str, steps: Mapping[str, StepRecord], info: ReconcileInfo) -> Any:
        reconciled.append(effect_id)
        infos.append(info)
        found = provider.charges.get(effect_id)
        return Done(Outcome(201, body={"charge": found}, resource_id=found)) if found else NotDone()

    r = client.once("charges.create", key, REQUEST, effect, reconcile, deadline_ms=10_000)
    assert reconciled == [a.effect_id]
    assert infos[0].attempt == 2 and infos[0].previous_attempt is not None and infos[0].previous_attempt.attempt == 1
    assert runs == 0 and provider.calls == 1
    assert r.via == "reconcile" and r.attempt == 2 and r.replayed is False
    assert r.body == {"charge": "ch_1"}
    rec = client.lookup("charges.create", key)
    assert rec is not None and rec.state == "completed"
    assert rec.outcome is not None and rec.outcome.resource_id == "ch_1"


def test_recovering_finds_effect_done__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        async with server.async_client() as client:
            key = new_key()
            provider = Provider()
            a = await client.claim("charges.create", key, REQUEST, lease_ms=1000)
            assert isinstance(a, idemkey.OwnedClaim)
            provider.charge(a.effect_id)
            runs = 0

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                nonlocal runs
                runs += 1
                return Outcome(201, body={"charge": provider.charge(ctx.effect_id)})

            async def reconcile(effect_id: str, steps: Mapping[str, StepRecord], info: ReconcileInfo) -> Any:
                await asyncio.sleep(0)
                found = provider.charges.get(effect_id)
                return Done({"status_code": 201, "body": {"charge": found}}) if found else NotDone()

            r = await client.once("charges.create", key, REQUEST, effect, reconcile, deadline_ms=10_000)
            assert runs == 0 and provider.calls == 1
            assert r.via == "reconcile" and r.attempt == 2 and r.body == {"charge": "ch_1"}

    asyncio.run(main())


def test_recovering_finds_nothing_done(server: IdemkeyServer) -> None:
    client = server.client()
    key = new_key()
    a = client.claim("charges.create", key, REQUEST, lease_ms=1000)
    assert isinstance(a, idemkey.OwnedClaim)
    # A dies before acting.
    seen: List[Any] = []

    def effect(ctx: EffectContext) -> Outcome:
        seen.append((ctx.effect_id, ctx.attempt, ctx.recovering))
        return Outcome(201)

    r = client.once("charges.create", key, REQUEST, effect, lambda eid, steps, info: NotDone(), deadline_ms=10_000)
    assert seen == [(a.effect_id, 2, True)]
    assert r.replayed is False and r.effect_id == a.effect_id and r.via == "effect"
    rec = client.lookup("charges.create", key)
    assert rec is not None and rec.state == "completed"


def test_recovering_finds_nothing_done__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        async with server.async_client() as client:
            key = new_key()
            a = await client.claim("charges.create", key, REQUEST, lease_ms=1000)
            assert isinstance(a, idemkey.OwnedClaim)
            seen: List[Any] = []

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                seen.append((ctx.effect_id, ctx.attempt, ctx.recovering))
                return Outcome(201)

            async def reconcile(effect_id: str, steps: Mapping[str, StepRecord], info: ReconcileInfo) -> None:
                return None  # nothing found: same as NotDone()

            r = await client.once("charges.create", key, REQUEST, effect, reconcile, deadline_ms=10_000)
            assert seen == [(a.effect_id, 2, True)]
            assert r.replayed is False and r.effect_id == a.effect_id

    asyncio.run(main())


def test_steps_resume_after_last(server: IdemkeyServer) -> None:
    client = server.client()
    key = new_key()
    a = client.claim("orders.fulfil", key, REQUEST, lease_ms=1000)
    assert isinstance(a, idemkey.OwnedClaim)
    rec = client.record_step("orders.fulfil", key, a.owner_token, "charge", "ch_77")
    assert rec.steps["charge"].provider_ref == "ch_77"
    # A dies before shipping.
    ran: List[str] = []
    reconcile_steps: Dict[str, StepRecord] = {}

    def reconcile(effect_id: str, steps: Mapping[str, StepRecord], info: ReconcileInfo) -> NotDone:
        reconcile_steps.update(steps)
        # The recorded step is done; nothing else happened at the providers.
        return NotDone(steps_done={n: s.provider_ref for n, s in steps.items()})

    def effect(ctx: EffectContext) -> Outcome:
        assert ctx.is_step_done("charge") and not ctx.is_step_done("ship")
        charge = ctx.step("charge", lambda ref: (ran.append(f"charge:{ref}"), "ch_new")[1])
        ship = ctx.step("ship", lambda ref: (ran.append(f"ship:{ref}"), "sh_1")[1])
        return Outcome(201, body={"charge": charge, "ship": ship})

    r = client.once("orders.fulfil", key, REQUEST, effect, reconcile, deadline_ms=10_000)
    assert list(reconcile_steps) == ["charge"]
    assert reconcile_steps["charge"].effect_id == f"{a.effect_id}.charge"
    assert ran == [f"ship:{a.effect_id}.ship"]
    assert r.body == {"charge": "ch_77", "ship": "sh_1"}
    rec2 = client.lookup("orders.fulfil", key)
    assert rec2 is not None and rec2.state == "completed"
    assert sorted(rec2.steps) == ["charge", "ship"] and rec2.steps["ship"].provider_ref == "sh_1"


def test_steps_resume_after_last__reconcile_reports_unrecorded_step(server: IdemkeyServer) -> None:
    """The owner died between the provider's answer and the step's PUT: reconcile finds it at the provider,
    once() records it, and only the rest runs."""
    client = server.client()
    key = new_key()
    a = client.claim("orders.fulfil", key, REQUEST, lease_ms=1000)
    assert isinstance(a, idemkey.OwnedClaim)
    ran: List[str] = []

    def reconcile(effect_id: str, steps: Mapping[str, StepRecord], info: ReconcileInfo) -> NotDone:
        assert dict(steps) == {}
        return NotDone(steps_done={"charge": "ch_found"})

    def effect(ctx: EffectContext) -> Outcome:
        charge = ctx.step("charge", lambda ref: (ran.append("charge"), "ch_new")[1])
        ship = ctx.step("ship", lambda ref: (ran.append("ship"), "sh_2")[1])
        return Outcome(201, body={"charge": charge, "ship": ship})

    r = client.once("orders.fulfil", key, REQUEST, effect, reconcile, deadline_ms=10_000)
    assert ran == ["ship"] and r.body == {"charge": "ch_found", "ship": "sh_2"}


def test_steps_resume_after_last__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        async with server.async_client() as client:
            key = new_key()
            a = await client.claim("orders.fulfil", key, REQUEST, lease_ms=1000)
            assert isinstance(a, idemkey.OwnedClaim)
            await client.record_step("orders.fulfil", key, a.owner_token, "charge", "ch_77")
            ran: List[str] = []

            async def reconcile(effect_id: str, steps: Mapping[str, StepRecord], info: ReconcileInfo) -> NotDone:
                return NotDone(steps_done={n: s.provider_ref for n, s in steps.items()})

            async def run_charge(ref: str) -> str:
                ran.append(f"charge:{ref}")
                return "ch_new"

            async def run_ship(ref: str) -> str:
                ran.append(f"ship:{ref}")
                return "sh_1"

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                charge = await ctx.step("charge", run_charge)
                ship = await ctx.step("ship", run_ship)
                return Outcome(201, body={"charge": charge, "ship": ship})

            r = await client.once("orders.fulfil", key, REQUEST, effect, reconcile, deadline_ms=10_000)
            assert ran == [f"ship:{a.effect_id}.ship"]
            assert r.body == {"charge": "ch_77", "ship": "sh_1"}
            rec = await client.lookup("orders.fulfil", key)
            assert rec is not None and sorted(rec.steps) == ["charge", "ship"]

    asyncio.run(main())


def test_effect_fails_before_acting_releases(server: IdemkeyServer) -> None:
    client = server.client()
    key = new_key()

    def failing(ctx: EffectContext) -> Outcome:
        raise NothingDoneError("card number invalid, provider not called")

    with pytest.raises(NothingDoneError):
        client.once("charges.create", key, REQUEST, failing)
    assert client.lookup("charges.create", key) is None
    attempts: List[int] = []

    def effect(ctx: EffectContext) -> Outcome:
        attempts.append(ctx.attempt)
        return Outcome(201)

    r = client.once("charges.create", key, REQUEST, effect)
    assert attempts == [1] and r.replayed is False


def test_effect_fails_before_acting_releases__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        async with server.async_client() as client:
            key = new_key()

            async def failing(ctx: AsyncEffectContext) -> Outcome:
                raise NothingDoneError("validation failed")

            with pytest.raises(NothingDoneError):
                await client.once("charges.create", key, REQUEST, failing)
            assert await client.lookup("charges.create", key) is None

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                assert ctx.attempt == 1
                return Outcome(201)

            r = await client.once("charges.create", key, REQUEST, effect)
            assert r.replayed is False and r.attempt == 1

    asyncio.run(main())


def test_effect_fails_ambiguously_keeps_key(server: IdemkeyServer) -> None:
    client = server.client()
    key = new_key()
    effect_ids: List[str] = []

    def failing(ctx: EffectContext) -> Outcome:
        effect_ids.append(ctx.effect_id)
        raise TimeoutError("provider timed out after the request was sent")

    with pytest.raises(AmbiguousEffectError) as ei:
        client.once("charges.create", key, REQUEST, failing, lease_ms=1000)
    err = ei.value
    assert err.code == "effect_ambiguous"
    assert "not released" in str(err) and "lease rules" in str(err)
    assert isinstance(err.__cause__, TimeoutError) and err.cause is err.__cause__
    rec = client.lookup("charges.create", key)
    assert rec is not None and rec.state == "in_progress"
    reconciled: List[str] = []
    recovering: List[bool] = []

    def reconcile(effect_id: str, steps: Mapping[str, StepRecord], info: ReconcileInfo) -> NotDone:
        reconciled.append(effect_id)
        return NotDone()

    def effect(ctx: EffectContext) -> Outcome:
        recovering.append(ctx.recovering)
        return Outcome(201)

    r = client.once("charges.create", key, REQUEST, effect, reconcile, deadline_ms=10_000)
    assert reconciled == effect_ids and recovering == [True] and r.attempt == 2


def test_effect_fails_ambiguously_keeps_key__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        async with server.async_client() as client:
            key = new_key()

            async def failing(ctx: AsyncEffectContext) -> Outcome:
                raise ConnectionResetError("reset after the request was sent")

            with pytest.raises(AmbiguousEffectError) as ei:
                await client.once("charges.create", key, REQUEST, failing, lease_ms=1000)
            assert isinstance(ei.value.__cause__, ConnectionResetError)
            rec = await client.lookup("charges.create", key)
            assert rec is not None and rec.state == "in_progress"
            seen: List[Optional[str]] = []

            async def reconcile(effect_id: str, steps: Mapping[str, StepRecord], info: ReconcileInfo) -> NotDone:
                seen.append(effect_id)
                return NotDone()

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                assert ctx.recovering
                return Outcome(201)

            r = await client.once("charges.create", key, REQUEST, effect, reconcile, deadline_ms=10_000)
            assert seen == [ei.value.effect_id] and r.attempt == 2

    asyncio.run(main())


def test_reconcile_that_fails_is_ambiguous(server: IdemkeyServer) -> None:
    client = server.client()
    key = new_key()
    assert client.claim("charges.create", key, REQUEST, lease_ms=1000).status == "claimed"

    def reconcile(effect_id: str, steps: Mapping[str, StepRecord], info: ReconcileInfo) -> NotDone:
        raise RuntimeError("provider lookup failed")

    with pytest.raises(AmbiguousEffectError):
        client.once("charges.create", key, REQUEST, lambda ctx: Outcome(201), reconcile, deadline_ms=10_000)
    rec = client.lookup("charges.create", key)
    assert rec is not None and rec.state == "in_progress" and rec.attempt == 2
