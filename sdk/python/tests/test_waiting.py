"""Another attempt holds the key: wait (wait_ms / Retry-After) and replay, or give up at the deadline."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, List

import httpx
import pytest
from conftest import AsyncForward, Forward, HookTransport, AsyncHookTransport, IdemkeyServer, Runner, fresh_tenant

import idemkey
from idemkey import AsyncEffectContext, EffectContext, IdemkeyError, InProgressTimeoutError, Outcome, new_key

REQUEST = {"sku": "book-1", "qty": 1}


def test_in_progress_waits_then_replays(server: IdemkeyServer) -> None:
    """Two concurrent once() calls: one runs the effect, the other waits on the server (wait_ms) and replays."""
    tenant = fresh_tenant()
    key = new_key()
    started, release, b_claim_sent = threading.Event(), threading.Event(), threading.Event()
    runs = 0
    log: List[str] = []

    def effect(ctx: EffectContext) -> Outcome:
        nonlocal runs
        runs += 1
        started.set()
        assert release.wait(20)
        log.append("a completes")
        return Outcome(201, body={"order": "o-1"})

    def hook_b(req: httpx.Request, forward: Forward) -> httpx.Response:
        if req.url.path.endswith("/claim"):
            log.append("b claims")
            b_claim_sent.set()
        r = forward(req)
        if req.url.path.endswith("/claim"):
            log.append(f"b answered {r.status_code}")
        return r

    a_client = server.client(tenant)
    b_client = server.client(tenant, transport=HookTransport(hook_b))
    a = Runner(lambda: a_client.once("orders.create", key, REQUEST, effect))
    a.start()
    assert started.wait(10)
    b = Runner(lambda: b_client.once("orders.create", key, REQUEST, effect, deadline_ms=20_000))
    b.start()
    # b's claim is on its way while a holds the key; only then may a finish.
    assert b_claim_sent.wait(10)
    release.set()
    ra, rb = a.outcome(), b.outcome()
    assert runs == 1
    assert ra.replayed is False and rb.replayed is True
    assert rb.body == ra.body == {"order": "o-1"} and rb.status_code == 201
    assert rb.effect_id == ra.effect_id
    # b's first claim was sent before a completed, and its answer came after: it waited.
    assert log.index("b claims") < log.index("a completes") < log.index("b answered 200")


def test_in_progress_waits_then_replays__retry_after(server: IdemkeyServer) -> None:
    """Without wait_ms (max_wait_ms=0) the waiter sleeps the server's Retry-After (with jitter), then replays."""
    tenant = fresh_tenant()
    owner = server.client(tenant)
    claim_times: List[float] = []
    first_claim = threading.Event()

    def hook(req: httpx.Request, forward: Forward) -> httpx.Response:
        if req.url.path.endswith("/claim"):
            claim_times.append(time.monotonic())
            r = forward(req)
            first_claim.set()
            return r
        return forward(req)

    client = server.client(tenant, max_wait_ms=0, transport=HookTransport(hook))
    key = new_key()
    held = owner.claim("orders.create", key, REQUEST, lease_ms=2_000)
    assert isinstance(held, idemkey.OwnedClaim)
    runs = 0

    def effect(ctx: EffectContext) -> Outcome:
        nonlocal runs
        runs += 1
        return Outcome(500)

    waiter = Runner(lambda: client.once("orders.create", key, REQUEST, effect, deadline_ms=15_000))
    waiter.start()
    assert first_claim.wait(10)
    owner.complete("orders.create", key, held.owner_token, Outcome(201, body={"order": "o-2"}))
    r = waiter.outcome()
    assert runs == 0 and r.replayed is True and r.body == {"order": "o-2"}
    # One in_progress answer (Retry-After: 2), then the replay: no busy polling, and not before Retry-After.
    assert len(claim_times) == 2
    assert claim_times[1] - claim_times[0] >= 1.9, claim_times


def test_in_progress_waits_then_replays__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        tenant = fresh_tenant()
        key = new_key()
        started, release, b_claim_sent = asyncio.Event(), asyncio.Event(), asyncio.Event()
        runs = 0
        log: List[str] = []

        async def effect(ctx: AsyncEffectContext) -> Outcome:
            nonlocal runs
            runs += 1
            started.set()
            await release.wait()
            log.append("a completes")
            return Outcome(201, body={"order": "o-1"})

        async def hook_b(req: httpx.Request, forward: AsyncForward) -> httpx.Response:
            if req.url.path.endswith("/claim"):
                log.append("b claims")
                b_claim_sent.set()
            r = await forward(req)
            if req.url.path.endswith("/claim"):
                log.append(f"b answered {r.status_code}")
            return r

        async with server.async_client(tenant) as a_client, server.async_client(
            tenant, transport=AsyncHookTransport(hook_b)
        ) as b_client:
            a = asyncio.ensure_future(a_client.once("orders.create", key, REQUEST, effect))
            await asyncio.wait_for(started.wait(), 10)
            b = asyncio.ensure_future(b_client.once("orders.create", key, REQUEST, effect, deadline_ms=20_000))
            await asyncio.wait_for(b_claim_sent.wait(), 10)
            release.set()
            ra, rb = await asyncio.gather(a, b)
        assert runs == 1 and ra.replayed is False and rb.replayed is True
        assert rb.body == ra.body and rb.effect_id == ra.effect_id
        assert log.index("b claims") < log.index("a completes") < log.index("b answered 200")

    asyncio.run(main())


def test_in_progress_deadline(server: IdemkeyServer) -> None:
    client = server.client()
    key = new_key()
    assert client.claim("orders.create", key, REQUEST, lease_ms=60_000).status == "claimed"
    runs = 0

    def effect(ctx: EffectContext) -> Outcome:
        nonlocal runs
        runs += 1
        return Outcome(201)

    t0 = time.monotonic()
    with pytest.raises(InProgressTimeoutError) as ei:
        client.once("orders.create", key, REQUEST, effect, deadline_ms=1_500)
    took = time.monotonic() - t0
    assert isinstance(ei.value, IdemkeyError)
    assert ei.value.code == "in_progress_timeout" and ei.value.attempt == 1
    assert 1.4 <= took < 6, took
    assert runs == 0


def test_in_progress_deadline__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        async with server.async_client() as client:
            key = new_key()
            assert (await client.claim("orders.create", key, REQUEST, lease_ms=60_000)).status == "claimed"
            runs = 0

            async def effect(ctx: AsyncEffectContext) -> Any:
                nonlocal runs
                runs += 1
                return Outcome(201)

            t0 = time.monotonic()
            with pytest.raises(InProgressTimeoutError):
                await client.once("orders.create", key, REQUEST, effect, deadline_ms=1_500)
            assert 1.4 <= time.monotonic() - t0 < 6
            assert runs == 0

    asyncio.run(main())
