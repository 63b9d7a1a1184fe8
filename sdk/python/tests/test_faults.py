"""Faults: the server killed mid-call, a lost complete answer, 503 and 429 answers."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Callable, List

import httpx
from conftest import (
    AsyncForward,
    AsyncHookTransport,
    Forward,
    HookTransport,
    IdemkeyServer,
    Runner,
    fresh_tenant,
    key_of,
)

import idemkey
from idemkey import AsyncEffectContext, EffectContext, Outcome, new_key

REQUEST = {"amount": "12.00", "currency": "EUR"}
UNAVAILABLE = {"code": "unavailable", "status": 503, "title": "The store cannot answer", "type": "about:blank"}


def test_server_killed_mid_call(own_server: Callable[..., IdemkeyServer]) -> None:
    """SIGKILL during a waiting claim and during the effect (so complete meets a dead server):
    every retry goes to the same key, and the effect runs once."""
    server = own_server()
    tenant = fresh_tenant()
    keys: List[str] = []
    claim_sent = threading.Event()

    failed: List[str] = []

    def hook(req: httpx.Request, forward: Forward) -> httpx.Response:
        keys.append(key_of(req))
        if req.url.path.endswith("/claim"):
            claim_sent.set()
        try:
            return forward(req)
        except httpx.TransportError:
            failed.append(req.url.path.rsplit("/", 1)[1])
            raise

    client = server.client(tenant, transport=HookTransport(hook))
    holder = server.client(tenant)
    key = new_key()
    # Another worker holds the key, so our claim waits on the server (wait_ms).
    held = holder.claim("charges.create", key, REQUEST, lease_ms=60_000)
    assert isinstance(held, idemkey.OwnedClaim)
    runs = 0
    restarts: List[threading.Thread] = []

    def effect(ctx: EffectContext) -> Outcome:
        nonlocal runs
        runs += 1
        # Kill the server again while the effect runs; the complete that follows
        # meets a dead server and is retried until it is back.
        server.kill()
        t = threading.Thread(target=server.start)
        t.start()
        restarts.append(t)
        return Outcome(201, body={"charge": "ch_k"})

    result = Runner(lambda: client.once("charges.create", key, REQUEST, effect, deadline_ms=30_000))
    result.start()
    # The claim is outstanding (waiting for the holder): kill the server under it.
    assert claim_sent.wait(10)
    server.kill()
    server.start()
    # The holder gives up without acting, so the waiting caller can own the key.
    holder.release("charges.create", key, held.owner_token)
    r = result.outcome()
    for t in restarts:
        t.join()
    assert runs == 1 and r.replayed is False and r.body == {"charge": "ch_k"}
    # Both kills cut a call: the waiting claim, and the complete after the effect.
    assert "claim" in failed and "complete" in failed, failed
    # Every call went to the one key: never a new key.
    assert len(keys) >= 3 and set(keys) == {key}
    rec = holder.lookup("charges.create", key)
    assert rec is not None and rec.state == "completed" and rec.attempt == 1
    again = client.once("charges.create", key, REQUEST, lambda ctx: Outcome(500))
    assert again.replayed is True and again.body == {"charge": "ch_k"}


def test_server_killed_mid_call__async(own_server: Callable[..., IdemkeyServer]) -> None:
    server = own_server()

    async def main() -> None:
        tenant = fresh_tenant()
        keys: List[str] = []
        claim_sent = asyncio.Event()

        failed: List[str] = []

        async def hook(req: httpx.Request, forward: AsyncForward) -> httpx.Response:
            keys.append(key_of(req))
            if req.url.path.endswith("/claim"):
                claim_sent.set()
            try:
                return await forward(req)
            except httpx.TransportError:
                failed.append(req.url.path.rsplit("/", 1)[1])
                raise

        holder = server.client(tenant)
        key = new_key()
        held = holder.claim("charges.create", key, REQUEST, lease_ms=60_000)
        assert isinstance(held, idemkey.OwnedClaim)
        runs = 0
        restarts: List[threading.Thread] = []

        async def effect(ctx: AsyncEffectContext) -> Outcome:
            nonlocal runs
            runs += 1
            await asyncio.get_running_loop().run_in_executor(None, server.kill)
            t = threading.Thread(target=server.start)
            t.start()
            restarts.append(t)
            return Outcome(201, body={"charge": "ch_ka"})

        async with server.async_client(tenant, transport=AsyncHookTransport(hook)) as client:
            task = asyncio.ensure_future(client.once("charges.create", key, REQUEST, effect, deadline_ms=30_000))
            await asyncio.wait_for(claim_sent.wait(), 10)
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(None, server.kill)
            await loop.run_in_executor(None, server.start)
            await loop.run_in_executor(None, holder.release, "charges.create", key, held.owner_token)
            r = await asyncio.wait_for(task, 60)
            for t in restarts:
                await loop.run_in_executor(None, t.join)
            assert runs == 1 and r.replayed is False and r.body == {"charge": "ch_ka"}
            assert "claim" in failed and "complete" in failed, failed
            assert len(keys) >= 3 and set(keys) == {key}
            rec = await client.lookup("charges.create", key)
            assert rec is not None and rec.state == "completed" and rec.attempt == 1

    asyncio.run(main())


def test_lost_complete_answer(server: IdemkeyServer) -> None:
    """The complete reaches the server but its answer is lost; the SDK retries and returns the stored outcome."""
    completes = 0

    def hook(req: httpx.Request, forward: Forward) -> httpx.Response:
        nonlocal completes
        if req.url.path.endswith("/complete"):
            completes += 1
            if completes == 1:
                r = forward(req)  # the server stores the outcome...
                assert r.status_code == 200
                r.close()
                raise httpx.ReadError("connection reset (simulated lost answer)", request=req)  # ...but we never hear
        return forward(req)

    client = server.client(transport=HookTransport(hook))
    key = new_key()
    runs = 0

    def effect(ctx: EffectContext) -> Outcome:
        nonlocal runs
        runs += 1
        return Outcome(201, body={"charge": "ch_lost"})

    r = client.once("charges.create", key, REQUEST, effect)
    assert runs == 1 and completes == 2
    assert r.status_code == 201 and r.body == {"charge": "ch_lost"} and r.replayed is False
    again = client.once("charges.create", key, REQUEST, effect)
    assert runs == 1 and again.replayed is True and again.body == {"charge": "ch_lost"}


def test_lost_complete_answer__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        completes = 0

        async def hook(req: httpx.Request, forward: AsyncForward) -> httpx.Response:
            nonlocal completes
            if req.url.path.endswith("/complete"):
                completes += 1
                if completes == 1:
                    r = await forward(req)
                    assert r.status_code == 200
                    raise httpx.ReadError("connection reset (simulated lost answer)", request=req)
            return await forward(req)

        async with server.async_client(transport=AsyncHookTransport(hook)) as client:
            key = new_key()
            runs = 0

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                nonlocal runs
                runs += 1
                return Outcome(201, body={"charge": "ch_lost"})

            r = await client.once("charges.create", key, REQUEST, effect)
            assert runs == 1 and completes == 2 and r.body == {"charge": "ch_lost"}
            again = await client.once("charges.create", key, REQUEST, effect)
            assert runs == 1 and again.replayed is True

    asyncio.run(main())


def test_unavailable_is_retried(server: IdemkeyServer) -> None:
    """A 503 with Retry-After is retried after it, with the same key."""
    claims: List[float] = []
    keys: List[str] = []

    def hook(req: httpx.Request, forward: Forward) -> httpx.Response:
        if req.url.path.endswith("/claim"):
            claims.append(time.monotonic())
            keys.append(key_of(req))
            if len(claims) == 1:
                return httpx.Response(
                    503, json=UNAVAILABLE, headers={"content-type": "application/problem+json", "retry-after": "1"}
                )
        return forward(req)

    client = server.client(transport=HookTransport(hook))
    key = new_key()
    runs = 0

    def effect(ctx: EffectContext) -> Outcome:
        nonlocal runs
        runs += 1
        return Outcome(201)

    r = client.once("charges.create", key, REQUEST, effect)
    assert runs == 1 and r.replayed is False and r.attempt == 1
    assert len(claims) == 2 and claims[1] - claims[0] >= 1.0, "retried before Retry-After"
    assert keys == [key, key]


def test_unavailable_is_retried__rate_limited(own_server: Callable[..., IdemkeyServer]) -> None:
    """A real server's 429 rate_limited is retried after Retry-After, with the same key."""
    limited = own_server({"IDEMKEY_TENANT_RATE_LIMIT": "2"})
    statuses: List[int] = []
    keys: List[str] = []

    def hook(req: httpx.Request, forward: Forward) -> httpx.Response:
        r = forward(req)
        statuses.append(r.status_code)
        keys.append(key_of(req))
        return r

    client = limited.client(transport=HookTransport(hook))
    key = new_key()
    runs = 0

    def effect(ctx: EffectContext) -> Outcome:
        nonlocal runs
        runs += 1
        # Several calls in one second: the limiter must refuse some of them.
        ctx.record_step("charge", "ch_1")
        ctx.record_step("charge", "ch_1")
        return Outcome(201)

    r = client.once("charges.create", key, REQUEST, effect)
    again = client.once("charges.create", key, REQUEST, lambda ctx: Outcome(500))
    assert runs == 1 and r.replayed is False and again.replayed is True
    assert 429 in statuses, statuses
    assert set(keys) == {key}


def test_unavailable_is_retried__async(own_server: Callable[..., IdemkeyServer]) -> None:
    limited = own_server({"IDEMKEY_TENANT_RATE_LIMIT": "2"})

    async def main() -> None:
        statuses: List[int] = []
        claims: List[float] = []
        keys: List[str] = []

        async def hook(req: httpx.Request, forward: AsyncForward) -> httpx.Response:
            keys.append(key_of(req))
            if req.url.path.endswith("/claim"):
                claims.append(time.monotonic())
                if len(claims) == 1:
                    return httpx.Response(503, json=UNAVAILABLE, headers={"retry-after": "1"})
            r = await forward(req)
            statuses.append(r.status_code)
            return r

        async with limited.async_client(transport=AsyncHookTransport(hook)) as client:
            key = new_key()
            runs = 0

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                nonlocal runs
                runs += 1
                await ctx.record_step("charge", "ch_1")
                await ctx.record_step("charge", "ch_1")
                return Outcome(201)

            r = await client.once("charges.create", key, REQUEST, effect)
            again = await client.once("charges.create", key, REQUEST, effect)
            assert runs == 1 and r.replayed is False and again.replayed is True
            assert claims[1] - claims[0] >= 1.0
            assert 429 in statuses, statuses
            assert set(keys) == {key}

    asyncio.run(main())


def test_transport_error_gives_up_after_retry_budget() -> None:
    """No server at all: the call retries within retry_for_ms and then raises TransportError."""
    from conftest import free_port

    client = idemkey.Client(f"http://127.0.0.1:{free_port()}", "t", retry_for_ms=600)
    t0 = time.monotonic()
    try:
        client.lookup("charges.create", "k")
    except idemkey.TransportError as e:
        assert e.code == "transport" and e.status == 0
    else:
        raise AssertionError("no TransportError")
    assert 0.3 <= time.monotonic() - t0 < 5
