"""The low-level calls against a real server: claim, complete, release, heartbeat, steps,
quarantine, resolve, lookup, list, operation classes, typed errors."""

from __future__ import annotations

import asyncio

import pytest
from conftest import IdemkeyServer, fresh_tenant

import idemkey
from idemkey import Outcome, new_key

REQUEST = {"amount": "5.00", "currency": "EUR"}


def _owned(c: idemkey.ClaimResult) -> idemkey.OwnedClaim:
    assert isinstance(c, idemkey.OwnedClaim), c
    return c


def test_owner_calls_and_fencing(server: IdemkeyServer) -> None:
    client = server.client()
    key = f"order/42?x=1#%+{new_key()}"  # percent-encoded as one path segment
    c = _owned(client.claim("charges.create", key, REQUEST, lease_ms=5_000))
    assert c.status == "claimed" and c.attempt == 1 and c.effect_id.startswith("eff_")
    rec = client.heartbeat("charges.create", key, c.owner_token, lease_ms=20_000)
    assert rec.state == "in_progress" and rec.key == key and rec.lease_expires_at
    rec = client.record_step("charges.create", key, c.owner_token, "charge", "ch_9")
    assert rec.steps["charge"].effect_id == f"{c.effect_id}.charge"
    # a repeat with the same ref is safe; another ref conflicts
    client.record_step("charges.create", key, c.owner_token, "charge", "ch_9")
    with pytest.raises(idemkey.StepConflictError):
        client.record_step("charges.create", key, c.owner_token, "charge", "ch_other")
    with pytest.raises(idemkey.InvalidStepError):
        client.record_step("charges.create", key, c.owner_token, "Bad Step", "x")
    with pytest.raises(idemkey.LeaseLostError):
        client.complete("charges.create", key, "not-the-token", Outcome(201))
    rec = client.complete("charges.create", key, c.owner_token, {"status_code": 201, "body": {"n": 1}})
    assert rec.state == "completed" and rec.outcome == Outcome(201, body={"n": 1})
    # same outcome again: 200; another: already_completed
    client.complete("charges.create", key, c.owner_token, Outcome(201, body={"n": 1}))
    with pytest.raises(idemkey.AlreadyCompletedError):
        client.complete("charges.create", key, c.owner_token, Outcome(500))
    replay = client.claim("charges.create", key, REQUEST)
    assert isinstance(replay, idemkey.CompletedClaim) and replay.replayed and replay.outcome.body == {"n": 1}
    looked = client.lookup("charges.create", key)
    assert looked is not None and [e["event"] for e in looked.history][:2] == ["claimed", "step"]


def test_release_resolve_and_list(server: IdemkeyServer) -> None:
    client = server.client(fresh_tenant())
    k1, k2, k3 = new_key(), new_key(), new_key()
    c1 = _owned(client.claim("env.provision", k1, REQUEST))
    client.release("env.provision", k1, c1.owner_token)
    client.release("env.provision", k1, c1.owner_token)  # a retried release finds nothing: fine
    assert client.lookup("env.provision", k1) is None
    c2 = _owned(client.claim("env.provision", k2, REQUEST))
    q = client.quarantine("env.provision", k2, c2.owner_token, "dns timed out")
    assert q.state == "quarantined"
    # a retry after a lost answer finds it quarantined already: the record
    assert client.quarantine("env.provision", k2, c2.owner_token, "dns timed out").state == "quarantined"
    page = client.list_keys(state="quarantined", operation="env.provision")
    assert [i.key for i in page.items] == [k2] and page.next_cursor is None
    resolved = client.resolve("env.provision", k2, outcome=Outcome(201, body={"env": "ok"}))
    assert resolved is not None and resolved.state == "completed" and resolved.quarantine_reason == "dns timed out"
    c3 = _owned(client.claim("env.provision", k3, REQUEST))
    client.quarantine("env.provision", k3, c3.owner_token, "unsure")
    assert client.resolve("env.provision", k3, release=True, reason="provider has no record") is None
    assert client.lookup("env.provision", k3) is None
    c4 = _owned(client.claim("env.provision", k1, REQUEST))
    with pytest.raises(idemkey.NotQuarantinedError):
        client.resolve("env.provision", k1, release=True, owner_token=c4.owner_token)
    with pytest.raises(ValueError):
        client.resolve("env.provision", k1)
    first = client.list_keys(limit=1)
    assert len(first.items) == 1 and first.next_cursor is not None
    second = client.list_keys(limit=1, cursor=first.next_cursor)
    assert second.items[0].key != first.items[0].key
    with pytest.raises(idemkey.InvalidQueryError):
        client.list_keys(state="bogus")


def test_operation_classes_and_typed_errors(server: IdemkeyServer) -> None:
    tenant = fresh_tenant()
    admin = server.client(tenant)
    p = admin.put_operation_class("refunds.create", {"replay_window": "48h", "lease": "90s"})
    assert p["replay_window"] == "2d" and p["lease"] == "90s" and p["default"] is False
    assert admin.get_operation_class("refunds.create")["lease"] == "90s"
    assert admin.delete_operation_class("refunds.create")["default"] is True
    with pytest.raises(idemkey.InvalidPolicyError) as ei:
        admin.put_operation_class("refunds.create", {"replay_windw": "1h"})
    assert ei.value.status == 400 and "replay_windw" in (ei.value.problem.get("detail") or "")
    viewer = idemkey.Client(server.base_url, server.token(tenant, "viewer"))
    with pytest.raises(idemkey.ForbiddenError):
        viewer.claim("charges.create", new_key(), REQUEST)
    with pytest.raises(idemkey.UnauthorizedError):
        idemkey.Client(server.base_url, "not-a-jwt").lookup("charges.create", "k")
    with pytest.raises(idemkey.InvalidOperationError):
        admin.claim("Not An Op", new_key(), REQUEST)
    with pytest.raises(idemkey.NumberOutOfRangeError):
        admin.claim("charges.create", new_key(), {"id": 9007199254740993})
    with pytest.raises(idemkey.InvalidLeaseError):
        admin.claim("charges.create", new_key(), REQUEST, lease_ms=10)
    with pytest.raises(idemkey.InvalidFingerprintError):
        admin.claim("charges.create", new_key(), fingerprint="XYZ")
    fp = "a" * 64
    c = admin.claim("charges.create", new_key(), fingerprint=fp)
    assert c.status == "claimed"
    # a token function is called for every request
    calls = []

    def token() -> str:
        calls.append(1)
        return server.token(tenant)

    idemkey.Client(server.base_url, token).lookup("charges.create", "nothing")
    assert calls == [1]


def test_low_level_async(server: IdemkeyServer) -> None:
    async def main() -> None:
        tenant = fresh_tenant()

        async def token() -> str:
            return server.token(tenant)

        async with idemkey.AsyncClient(server.base_url, token) as client:
            key = new_key()
            c = await client.claim("charges.create", key, REQUEST)
            assert isinstance(c, idemkey.OwnedClaim)
            await client.heartbeat("charges.create", key, c.owner_token)
            await client.record_step("charges.create", key, c.owner_token, "charge", "ch_1")
            await client.quarantine("charges.create", key, c.owner_token, "unsure")
            page = await client.list_keys(state="quarantined")
            assert [i.key for i in page.items] == [key]
            rec = await client.resolve("charges.create", key, outcome=Outcome(201))
            assert rec is not None and rec.state == "completed"
            k2 = new_key()
            c2 = await client.claim("charges.create", k2, REQUEST)
            assert isinstance(c2, idemkey.OwnedClaim)
            await client.release("charges.create", k2, c2.owner_token)
            assert await client.lookup("charges.create", k2) is None
            pol = await client.put_operation_class("x.y", {"lease": "5s"})
            assert pol["lease"] == "5s"
            assert (await client.get_operation_class("x.y"))["lease"] == "5s"
            assert (await client.delete_operation_class("x.y"))["default"] is True
            with pytest.raises(idemkey.NotFoundError):
                await client.complete("charges.create", k2, c2.owner_token, Outcome(201))

    asyncio.run(main())
