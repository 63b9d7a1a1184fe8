import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { LeaseLostError, newKey } from "../src/index.js";
import { TestServer, freshTenant } from "./server.js";
import { clientFor, deferred, sleep, waitFor } from "./util.js";

let server: TestServer;
before(async () => {
  server = await TestServer.start();
});
after(async () => {
  await server?.stop();
});

const request = { env: "env-7" };

test("heartbeat_keeps_long_effect: heartbeats keep a 1 s lease alive through a 3 s effect, and stop on completion", async () => {
  const tenant = freshTenant();
  let heartbeats = 0;
  const client = clientFor(server, tenant, {
    fetch: (url, init) => {
      if (url.endsWith("/heartbeat")) heartbeats++;
      return fetch(url, init);
    },
  });
  const other = clientFor(server, tenant);
  const key = newKey();
  const done = deferred();
  const otherAnswers: string[] = [];
  const r = client.once({
    operation: "env.provision",
    key,
    request,
    leaseMs: 1000,
    effect: async () => {
      // Another caller keeps trying to take the key over while we work.
      const until = Date.now() + 3_000;
      while (Date.now() < until) {
        const c = await other.claim("env.provision", key, { request });
        otherAnswers.push(c.status);
        await sleep(200);
      }
      done.resolve();
      return { statusCode: 201 };
    },
  });
  const result = await r;
  await done.promise;
  assert.equal(result.attempt, 1);
  assert.ok(otherAnswers.length >= 5);
  assert.ok(otherAnswers.every((s) => s === "in_progress"), otherAnswers.join(","));
  assert.ok(heartbeats >= 4, `only ${heartbeats} heartbeats`);
  const rec = await other.lookup("env.provision", key);
  assert.equal(rec?.state, "completed");
  assert.equal(rec?.attempt, 1);
  // Heartbeats stopped: none is sent over more than two heartbeat intervals after completion.
  const count = heartbeats;
  await sleep(800);
  assert.equal(heartbeats, count);
});

test("lease_lost_during_long_effect: another caller takes over; the effect sees lease_lost and once() raises LeaseLostError", async () => {
  const tenant = freshTenant();
  let blockHeartbeats = true;
  const client = clientFor(server, tenant, {
    fetch: async (url, init) => {
      // Heartbeats are lost on the way until the takeover happened.
      if (url.endsWith("/heartbeat") && blockHeartbeats) throw new TypeError("simulated network failure");
      return fetch(url, init);
    },
  });
  const other = clientFor(server, tenant);
  const key = newKey();
  let sawLeaseLost = false;
  let abortReason: unknown;
  const started = deferred();
  const r = client.once({
    operation: "env.provision",
    key,
    request,
    leaseMs: 1000,
    effect: async (ctx) => {
      started.resolve();
      // The long effect: it takes until the lease is lost.
      await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve(), { once: true }));
      sawLeaseLost = ctx.leaseLost;
      abortReason = ctx.signal.reason;
      return { statusCode: 201, body: { from: "first owner" } };
    },
  });
  // Once the first caller owns the key (its effect runs), the other caller
  // waits for the lease to run out and takes over.
  await started.promise;
  const takeover = await other.claim("env.provision", key, { request, waitMs: 5_000 });
  assert.equal(takeover.status, "recovering");
  blockHeartbeats = false;
  await assert.rejects(r, (err: unknown) => {
    assert.ok(err instanceof LeaseLostError);
    assert.equal(err.code, "lease_lost");
    return true;
  });
  assert.equal(sawLeaseLost, true);
  assert.ok(abortReason instanceof LeaseLostError);
  const rec = await other.lookup("env.provision", key);
  assert.equal(rec?.state, "in_progress");
  assert.equal(rec?.attempt, 2);
  if (takeover.status === "recovering") {
    await other.complete("env.provision", key, takeover.ownerToken, { statusCode: 201, body: { from: "second owner" } });
  }
  await waitFor("completed", async () => (await other.lookup("env.provision", key))?.state === "completed");
  const final = await other.lookup("env.provision", key);
  assert.deepEqual(final?.outcome?.body, { from: "second owner" });
});
