import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { InProgressTimeoutError, IdemkeyError, newKey } from "../src/index.js";
import { TestServer, freshTenant } from "./server.js";
import { clientFor, deferred, waitFor } from "./util.js";

let server: TestServer;
before(async () => {
  server = await TestServer.start();
});
after(async () => {
  await server?.stop();
});

const request = { sku: "book-1", qty: 1 };

test("in_progress_waits_then_replays: two concurrent once() calls run the effect once and return the same outcome", async () => {
  const client = clientFor(server);
  const key = newKey();
  let runs = 0;
  const started = deferred();
  const release = deferred();
  const effect = async () => {
    runs++;
    started.resolve();
    await release.promise;
    return { statusCode: 201, body: { order: "o-1" } };
  };
  const a = client.once({ operation: "orders.create", key, request, effect });
  await started.promise;
  // The second caller arrives while the first holds the key; it must wait.
  const b = client.once({ operation: "orders.create", key, request, effect, deadlineMs: 20_000 });
  // Let b reach the server and be told in_progress / wait there.
  const rec = await client.lookup("orders.create", key);
  assert.equal(rec?.state, "in_progress");
  setTimeout(() => release.resolve(), 700);
  const [ra, rb] = await Promise.all([a, b]);
  assert.equal(runs, 1);
  assert.equal(ra.replayed, false);
  assert.equal(rb.replayed, true);
  assert.deepEqual(rb.body, ra.body);
  assert.equal(rb.statusCode, 201);
  assert.equal(rb.effectId, ra.effectId);
});

test("in_progress_waits_then_replays: without wait_ms the waiter sleeps Retry-After (with jitter) and then replays", async () => {
  const tenant = freshTenant();
  const owner = clientFor(server, tenant);
  const claimTimes: number[] = [];
  // maxWaitMs 0: the SDK claims without wait_ms and sleeps the server's Retry-After itself.
  const client = clientFor(server, tenant, {
    maxWaitMs: 0,
    fetch: (url, init) => {
      if (url.endsWith("/claim")) claimTimes.push(Date.now());
      return fetch(url, init);
    },
  });
  const key = newKey();
  const held = await owner.claim("orders.create", key, { request, leaseMs: 2_000 });
  assert.equal(held.status, "claimed");
  if (held.status !== "claimed") return;
  let runs = 0;
  const waiter = client.once({ operation: "orders.create", key, request, deadlineMs: 15_000, effect: async () => (runs++, { statusCode: 500 }) });
  await waitFor("the first claim", () => claimTimes.length >= 1);
  await owner.complete("orders.create", key, held.ownerToken, { statusCode: 201, body: { order: "o-2" } });
  const r = await waiter;
  assert.equal(runs, 0);
  assert.equal(r.replayed, true);
  assert.deepEqual(r.body, { order: "o-2" });
  // One in_progress answer (Retry-After: 2), then the replay: no busy polling, and not before Retry-After.
  assert.equal(claimTimes.length, 2);
  assert.ok(claimTimes[1]! - claimTimes[0]! >= 1_900, `retried after ${claimTimes[1]! - claimTimes[0]!} ms`);
});

test("in_progress_deadline: once() gives up with InProgressTimeoutError at its deadline and never runs the effect", async () => {
  const client = clientFor(server);
  const key = newKey();
  const owner = await client.claim("orders.create", key, { request, leaseMs: 60_000 });
  assert.equal(owner.status, "claimed");
  let runs = 0;
  const t0 = Date.now();
  await assert.rejects(
    client.once({ operation: "orders.create", key, request, deadlineMs: 1_500, effect: async () => (runs++, { statusCode: 201 }) }),
    (err: unknown) => {
      assert.ok(err instanceof InProgressTimeoutError);
      assert.ok(err instanceof IdemkeyError);
      assert.equal(err.code, "in_progress_timeout");
      assert.equal(err.attempt, 1);
      return true;
    },
  );
  const took = Date.now() - t0;
  assert.ok(took >= 1_400 && took < 6_000, `took ${took} ms`);
  assert.equal(runs, 0);
});
