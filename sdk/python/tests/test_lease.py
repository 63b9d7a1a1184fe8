"""Heartbeats through a long effect, and a lease lost under one."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import List

import httpx
import pytest
from conftest import AsyncForward, AsyncHookTransport, Forward, HookTransport, IdemkeyServer, Runner, fresh_tenant

import idemkey
from idemkey import AsyncEffectContext, EffectContext, LeaseLostError, Outcome, new_key

REQUEST = {"env": "env-7"}


def _heartbeat_threads() -> List[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "idemkey-heartbeat"]


def test_heartbeat_keeps_long_effect(server: IdemkeyServer) -> None:
    """A 1 s lease lives through a 3 s effect; heartbeats stop on completion."""
    tenant = fresh_tenant()
    beats: List[float] = []

    def hook(req: httpx.Request, forward: Forward) -> httpx.Response:
        r = forward(req)
        if req.url.path.endswith("/heartbeat"):
            beats.append(time.monotonic())
            statuses.append(r.status_code)
        return r

    statuses: List[int] = []
    client = server.client(tenant, transport=HookTransport(hook))
    other = server.client(tenant)
    key = new_key()
    other_answers: List[str] = []

    def effect(ctx: EffectContext) -> Outcome:
        assert len(_heartbeat_threads()) == 1
        # Another caller keeps trying to take the key over while we work (3 s, > 2 leases).
        until = time.monotonic() + 3.0
        while time.monotonic() < until:
            other_answers.append(other.claim("env.provision", key, REQUEST).status)
            time.sleep(0.2)  # the effect's own pace, not a synchronisation
        assert not ctx.lease_lost
        return Outcome(201)

    r = client.once("env.provision", key, REQUEST, effect, lease_ms=1000)
    assert r.attempt == 1
    assert len(other_answers) >= 5 and set(other_answers) == {"in_progress"}, other_answers
    assert len(beats) >= 4, beats
    assert set(statuses) == {200}, statuses
    rec = other.lookup("env.provision", key)
    assert rec is not None and rec.state == "completed" and rec.attempt == 1
    # Heartbeats stopped: the thread is gone when once() returns, and no beat follows.
    assert _heartbeat_threads() == []
    count = len(beats)
    time.sleep(0.7)  # two heartbeat intervals of observation: nothing may happen
    assert len(beats) == count


def test_heartbeat_keeps_long_effect__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        tenant = fresh_tenant()
        beats: List[float] = []

        async def hook(req: httpx.Request, forward: AsyncForward) -> httpx.Response:
            r = await forward(req)
            if req.url.path.endswith("/heartbeat"):
                beats.append(time.monotonic())
            return r

        async with server.async_client(tenant, transport=AsyncHookTransport(hook)) as client, server.async_client(
            tenant
        ) as other:
            key = new_key()
            answers: List[str] = []
            tasks_during: List[int] = []

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                tasks_during.append(len(asyncio.all_tasks()))
                until = time.monotonic() + 3.0
                while time.monotonic() < until:
                    answers.append((await other.claim("env.provision", key, REQUEST)).status)
                    await asyncio.sleep(0.2)
                return Outcome(201)

            r = await client.once("env.provision", key, REQUEST, effect, lease_ms=1000)
            assert r.attempt == 1 and set(answers) == {"in_progress"} and len(answers) >= 5
            assert len(beats) >= 4
            # The heartbeat task is gone: only this coroutine's task is left.
            assert tasks_during == [2] and len(asyncio.all_tasks()) == 1
            count = len(beats)
            await asyncio.sleep(0.7)
            assert len(beats) == count
            rec = await other.lookup("env.provision", key)
            assert rec is not None and rec.state == "completed"

    asyncio.run(main())


def test_lease_lost_during_long_effect(server: IdemkeyServer) -> None:
    """Another caller takes over; the effect sees lease_lost and once() raises LeaseLostError."""
    tenant = fresh_tenant()
    block_heartbeats = threading.Event()
    block_heartbeats.set()

    def hook(req: httpx.Request, forward: Forward) -> httpx.Response:
        # Heartbeats are lost on the way until the takeover happened.
        if req.url.path.endswith("/heartbeat") and block_heartbeats.is_set():
            raise httpx.ConnectError("simulated network failure", request=req)
        return forward(req)

    client = server.client(tenant, transport=HookTransport(hook))
    other = server.client(tenant)
    key = new_key()
    started = threading.Event()
    seen: List[object] = []

    def effect(ctx: EffectContext) -> Outcome:
        started.set()
        # The long effect: it takes until the lease is lost.
        assert ctx.wait_lease_lost(timeout=30)
        seen.append(ctx.lease_lost)
        seen.append(ctx.lease_lost_error)
        return Outcome(201, body={"from": "first owner"})

    first = Runner(lambda: client.once("env.provision", key, REQUEST, effect, lease_ms=1000))
    first.start()
    # Once the first caller owns the key (its effect runs), the other waits out the lease and takes over.
    assert started.wait(10)
    takeover = other.claim("env.provision", key, REQUEST, wait_ms=5_000)
    assert isinstance(takeover, idemkey.OwnedClaim) and takeover.status == "recovering"
    block_heartbeats.clear()
    with pytest.raises(LeaseLostError) as ei:
        first.outcome()
    assert ei.value.code == "lease_lost"
    assert seen[0] is True and isinstance(seen[1], LeaseLostError)
    rec = other.lookup("env.provision", key)
    assert rec is not None and rec.state == "in_progress" and rec.attempt == 2
    other.complete("env.provision", key, takeover.owner_token, Outcome(201, body={"from": "second owner"}))
    final = other.lookup("env.provision", key)
    assert final is not None and final.outcome is not None and final.outcome.body == {"from": "second owner"}


def test_lease_lost_during_long_effect__async(server: IdemkeyServer) -> None:
    async def main() -> None:
        tenant = fresh_tenant()
        blocked = [True]

        async def hook(req: httpx.Request, forward: AsyncForward) -> httpx.Response:
            if req.url.path.endswith("/heartbeat") and blocked[0]:
                raise httpx.ConnectError("simulated network failure", request=req)
            return await forward(req)

        async with server.async_client(tenant, transport=AsyncHookTransport(hook)) as client, server.async_client(
            tenant
        ) as other:
            key = new_key()
            started = asyncio.Event()
            seen: List[bool] = []

            async def effect(ctx: AsyncEffectContext) -> Outcome:
                started.set()
                await ctx.lease_lost_event.wait()
                seen.append(ctx.lease_lost)
                return Outcome(201, body={"from": "first owner"})

            first = asyncio.ensure_future(client.once("env.provision", key, REQUEST, effect, lease_ms=1000))
            await asyncio.wait_for(started.wait(), 10)
            takeover = await other.claim("env.provision", key, REQUEST, wait_ms=5_000)
            assert isinstance(takeover, idemkey.OwnedClaim) and takeover.status == "recovering"
            blocked[0] = False
            with pytest.raises(LeaseLostError):
                await asyncio.wait_for(first, 30)
            assert seen == [True]
            rec = await other.lookup("env.provision", key)
            assert rec is not None and rec.state == "in_progress" and rec.attempt == 2

    asyncio.run(main())
