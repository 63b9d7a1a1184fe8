import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { AmbiguousEffectError, NothingDoneError, newKey, type StepRecord } from "../src/index.js";
import { TestServer } from "./server.js";
import { clientFor } from "./util.js";

let server: TestServer;
before(async () => {
  server = await TestServer.start();
});
after(async () => {
  await server?.stop();
});

const request = { amount: "9.99", currency: "EUR" };

/** A fake provider that never deduplicates: remembers what it did by reference. */
class Provider {
  readonly charges = new Map<string, string>();
  calls = 0;
  charge(ref: string): string {
    this.calls++;
    const id = `ch_${this.charges.size + 1}`;
    this.charges.set(ref, id);
    return id;
  }
}

test("recovering_finds_effect_done: reconcile reports the effect done; once() completes with it without running the effect", async () => {
  const client = clientFor(server);
  const key = newKey();
  const provider = new Provider();
  // Worker A claims, charges with the effect id, and dies before complete.
  const a = await client.claim("charges.create", key, { request, leaseMs: 1000 });
  assert.equal(a.status, "claimed");
  if (a.status !== "claimed") return;
  provider.charge(a.effectId);

  let runs = 0;
  const reconciled: string[] = [];
  const r = await client.once({
    operation: "charges.create",
    key,
    request,
    deadlineMs: 10_000,
    effect: async (ctx) => {
      runs++;
      return { statusCode: 201, body: { charge: provider.charge(ctx.effectId) } };
    },
    reconcile: async (effectId) => {
      reconciled.push(effectId);
      const found = provider.charges.get(effectId);
      return found ? { done: true, outcome: { statusCode: 201, body: { charge: found }, resourceId: found } } : { done: false };
    },
  });
  assert.deepEqual(reconciled, [a.effectId]);
  assert.equal(runs, 0);
  assert.equal(provider.calls, 1);
  assert.equal(r.via, "reconcile");
  assert.equal(r.attempt, 2);
  assert.deepEqual(r.body, { charge: "ch_1" });
  const rec = await client.lookup("charges.create", key);
  assert.equal(rec?.state, "completed");
  assert.equal(rec?.outcome?.resourceId, "ch_1");
});

test("recovering_finds_nothing_done: reconcile reports nothing done; once() runs the effect with the same effect id", async () => {
  const client = clientFor(server);
  const key = newKey();
  const a = await client.claim("charges.create", key, { request, leaseMs: 1000 });
  assert.equal(a.status, "claimed");
  if (a.status !== "claimed") return;
  // A dies before acting.
  const seen: Array<{ effectId: string; attempt: number; recovering: boolean }> = [];
  const r = await client.once({
    operation: "charges.create",
    key,
    request,
    deadlineMs: 10_000,
    reconcile: async () => ({ done: false }),
    effect: async (ctx) => {
      seen.push({ effectId: ctx.effectId, attempt: ctx.attempt, recovering: ctx.recovering });
      return { statusCode: 201 };
    },
  });
  assert.deepEqual(seen, [{ effectId: a.effectId, attempt: 2, recovering: true }]);
  assert.equal(r.replayed, false);
  assert.equal(r.effectId, a.effectId);
  const rec = await client.lookup("charges.create", key);
  assert.equal(rec?.state, "completed");
});

test("steps_resume_after_last: charge was recorded, the owner died; on recovering only the ship step runs", async () => {
  const client = clientFor(server);
  const key = newKey();
  const a = await client.claim("orders.fulfil", key, { request, leaseMs: 1000 });
  assert.equal(a.status, "claimed");
  if (a.status !== "claimed") return;
  await client.recordStep("orders.fulfil", key, a.ownerToken, "charge", "ch_77");
  // A dies before shipping.
  const ran: string[] = [];
  let reconcileSteps: Readonly<Record<string, StepRecord>> = {};
  const r = await client.once({
    operation: "orders.fulfil",
    key,
    request,
    deadlineMs: 10_000,
    reconcile: async (_effectId, steps) => {
      reconcileSteps = steps;
      // The recorded step is done; nothing else happened at the providers.
      return { done: false, stepsDone: Object.fromEntries(Object.entries(steps).map(([n, s]) => [n, s.providerRef])) };
    },
    effect: async (ctx) => {
      const charge = await ctx.step("charge", async (ref) => (ran.push(`charge:${ref}`), "ch_new"));
      const ship = await ctx.step("ship", async (ref) => (ran.push(`ship:${ref}`), "sh_1"));
      return { statusCode: 201, body: { charge, ship } };
    },
  });
  assert.deepEqual(Object.keys(reconcileSteps), ["charge"]);
  assert.equal(reconcileSteps.charge?.effectId, `${a.effectId}.charge`);
  assert.deepEqual(ran, [`ship:${a.effectId}.ship`]);
  assert.deepEqual(r.body, { charge: "ch_77", ship: "sh_1" });
  const rec = await client.lookup("orders.fulfil", key);
  assert.equal(rec?.state, "completed");
  assert.deepEqual(Object.keys(rec?.steps ?? {}).sort(), ["charge", "ship"]);
  assert.equal(rec?.steps.ship?.providerRef, "sh_1");
});

test("effect_fails_before_acting_releases: NothingDoneError releases the key; the next once() runs afresh", async () => {
  const client = clientFor(server);
  const key = newKey();
  await assert.rejects(
    client.once({
      operation: "charges.create",
      key,
      request,
      effect: async () => {
        throw new NothingDoneError("card number invalid, provider not called");
      },
    }),
    (err: unknown) => err instanceof NothingDoneError,
  );
  assert.equal(await client.lookup("charges.create", key), undefined);
  let attempt = 0;
  const r = await client.once({
    operation: "charges.create",
    key,
    request,
    effect: async (ctx) => {
      attempt = ctx.attempt;
      return { statusCode: 201 };
    },
  });
  assert.equal(attempt, 1);
  assert.equal(r.replayed, false);
});

test("effect_fails_ambiguously_keeps_key: an ambiguous failure keeps the key; after the lease the next once() recovers", async () => {
  const client = clientFor(server);
  const key = newKey();
  let effectId = "";
  await assert.rejects(
    client.once({
      operation: "charges.create",
      key,
      request,
      leaseMs: 1000,
      effect: async (ctx) => {
        effectId = ctx.effectId;
        throw new Error("provider timed out after the request was sent");
      },
    }),
    (err: unknown) => {
      assert.ok(err instanceof AmbiguousEffectError);
      assert.equal(err.code, "effect_ambiguous");
      assert.match(err.message, /not released/);
      assert.match(err.message, /lease rules/);
      assert.ok(err.cause instanceof Error);
      return true;
    },
  );
  const rec = await client.lookup("charges.create", key);
  assert.equal(rec?.state, "in_progress");
  let reconciledWith = "";
  let recovering = false;
  const r = await client.once({
    operation: "charges.create",
    key,
    request,
    deadlineMs: 10_000,
    reconcile: async (id) => {
      reconciledWith = id;
      return { done: false };
    },
    effect: async (ctx) => {
      recovering = ctx.recovering;
      return { statusCode: 201 };
    },
  });
  assert.equal(reconciledWith, effectId);
  assert.equal(recovering, true);
  assert.equal(r.attempt, 2);
});
