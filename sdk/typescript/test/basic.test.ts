import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import {
  KeyReusedError,
  QuarantinedError,
  newKey,
  isUuidV7,
  keyTimestamp,
  type EffectContext,
} from "../src/index.js";
import { TestServer, freshTenant } from "./server.js";
import { clientFor } from "./util.js";

let server: TestServer;
before(async () => {
  server = await TestServer.start();
});
after(async () => {
  await server?.stop();
});

const request = { amount: "25.00", currency: "EUR", customer: "cus_42" };

test("claimed_runs_effect_once: a new key runs the effect once with its effect id and completes", async () => {
  const client = clientFor(server);
  const key = newKey();
  const seen: EffectContext[] = [];
  const result = await client.once({
    operation: "charges.create",
    key,
    request,
    effect: async (ctx) => {
      seen.push(ctx);
      return { statusCode: 201, body: { charge: "ch_1" }, headers: { Location: "/charges/ch_1" }, resourceId: "ch_1" };
    },
  });
  assert.equal(seen.length, 1);
  assert.match(seen[0]!.effectId, /^eff_[0-9a-f]{32}$/);
  assert.equal(seen[0]!.attempt, 1);
  assert.equal(seen[0]!.recovering, false);
  assert.equal(result.replayed, false);
  assert.equal(result.via, "effect");
  assert.equal(result.statusCode, 201);
  assert.deepEqual(result.body, { charge: "ch_1" });
  assert.deepEqual(result.headers, { Location: "/charges/ch_1" });
  assert.equal(result.resourceId, "ch_1");
  assert.equal(result.effectId, seen[0]!.effectId);
  assert.equal(result.attempt, 1);
  assert.ok(result.expiresAt);
  const rec = await client.lookup("charges.create", key);
  assert.equal(rec?.state, "completed");
  assert.equal(rec?.outcome?.statusCode, 201);
});

test("completed_replays_without_effect: a completed key replays its outcome without running the effect", async () => {
  const client = clientFor(server);
  const key = newKey();
  let runs = 0;
  const effect = async () => {
    runs++;
    return { status_code: 201, body: { charge: "ch_2" } };
  };
  const first = await client.once({ operation: "charges.create", key, request, effect });
  const second = await client.once({ operation: "charges.create", key, request: { customer: "cus_42", currency: "EUR", amount: "25.00" }, effect });
  assert.equal(runs, 1);
  assert.equal(first.replayed, false);
  assert.equal(second.replayed, true);
  assert.equal(second.via, "replay");
  assert.ok(second.expiresAt && !Number.isNaN(Date.parse(second.expiresAt)));
  assert.equal(second.statusCode, 201);
  assert.deepEqual(second.body, { charge: "ch_2" });
  assert.equal(second.effectId, first.effectId);
  assert.equal(second.attempt, 1);
});

test("business_failure_is_final: a 402 outcome is completed and replayed without the effect", async () => {
  const client = clientFor(server);
  const key = newKey();
  let runs = 0;
  const effect = async () => {
    runs++;
    return { statusCode: 402, body: { error: "card_declined" } };
  };
  const first = await client.once({ operation: "charges.create", key, request, effect });
  assert.equal(first.statusCode, 402);
  assert.equal(first.replayed, false);
  const second = await client.once({ operation: "charges.create", key, request, effect });
  assert.equal(runs, 1);
  assert.equal(second.replayed, true);
  assert.equal(second.statusCode, 402);
  assert.deepEqual(second.body, { error: "card_declined" });
});

test("key_reused_raises: the same key with another request raises KeyReusedError with the mismatched pointers", async () => {
  const client = clientFor(server);
  const key = newKey();
  let runs = 0;
  const effect = async () => {
    runs++;
    return { statusCode: 201 };
  };
  await client.once({ operation: "charges.create", key, request, effect });
  await assert.rejects(
    client.once({ operation: "charges.create", key, request: { ...request, amount: "30.00" }, effect }),
    (err: unknown) => {
      assert.ok(err instanceof KeyReusedError);
      assert.equal(err.code, "key_reused");
      assert.equal(err.status, 422);
      assert.deepEqual(err.mismatched, ["/amount"]);
      assert.equal(err.problem.code, "key_reused");
      return true;
    },
  );
  assert.equal(runs, 1);
});

test("quarantined_raises: a key its owner quarantined raises QuarantinedError without running the effect", async () => {
  const client = clientFor(server);
  const key = newKey();
  const claim = await client.claim("charges.create", key, { request });
  assert.equal(claim.status, "claimed");
  if (claim.status !== "claimed") return;
  const rec = await client.quarantine("charges.create", key, claim.ownerToken, "provider timed out");
  assert.equal(rec.state, "quarantined");
  let runs = 0;
  await assert.rejects(
    client.once({ operation: "charges.create", key, request, effect: async () => (runs++, { statusCode: 201 }) }),
    (err: unknown) => err instanceof QuarantinedError && err.code === "quarantined" && err.status === 409,
  );
  assert.equal(runs, 0);
});

test("quarantined_raises: a class with on_lease_expiry quarantine quarantines an abandoned key; once() raises", async () => {
  const tenant = freshTenant();
  const client = clientFor(server, tenant);
  const res = await fetch(`${server.baseUrl}/v1/operation-classes/payouts.send`, {
    method: "PUT",
    headers: { authorization: `Bearer ${server.token(tenant)}`, "content-type": "application/json" },
    body: JSON.stringify({ on_lease_expiry: "quarantine" }),
  });
  assert.equal(res.status, 200, await res.text());
  const key = newKey();
  // An owner that dies after claiming.
  const claim = await client.claim("payouts.send", key, { request, leaseMs: 1000 });
  assert.equal(claim.status, "claimed");
  let runs = 0;
  await assert.rejects(
    client.once({ operation: "payouts.send", key, request, deadlineMs: 10_000, effect: async () => (runs++, { statusCode: 201 }) }),
    (err: unknown) => err instanceof QuarantinedError,
  );
  assert.equal(runs, 0);
  const rec = await client.lookup("payouts.send", key);
  assert.equal(rec?.state, "quarantined");
});

test("key_helper_uuidv7: newKey() makes time-ordered UUIDv7 keys", () => {
  const before = Date.now();
  const keys = Array.from({ length: 2000 }, () => newKey());
  const afterMs = Date.now();
  for (const k of keys) {
    assert.ok(isUuidV7(k), k);
    assert.match(k, /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(k[14], "7"); // version
    const ts = keyTimestamp(k);
    assert.ok(ts >= before && ts <= afterMs + 1, `timestamp ${ts} not in [${before}, ${afterMs}]`);
  }
  // strictly increasing, so sorting keeps the order they were made in
  const sorted = [...keys].sort();
  assert.deepEqual(sorted, keys);
  assert.equal(new Set(keys).size, keys.length);
  // and accepted by the server as a key
});
