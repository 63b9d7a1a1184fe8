import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { newKey } from "../src/index.js";
import { TestServer, freshTenant } from "./server.js";
import { clientFor, deferred, waitFor } from "./util.js";

let server: TestServer;
before(async () => {
  server = await TestServer.start();
});
after(async () => {
  await server?.stop();
});

const request = { amount: "12.00", currency: "EUR" };

/** The key segment of a /v1/keys/{op}/{key}/... URL. */
const keyOf = (url: string) => url.split("/v1/keys/")[1]?.split("/")[1];

test("server_killed_mid_call: SIGKILL during a waiting claim and during the effect; retries use the same key, the effect runs once", async () => {
  const tenant = freshTenant();
  const calls: string[] = [];
  const claimSent = deferred();
  const client = clientFor(server, tenant, {
    fetch: (url, init) => {
      calls.push(url);
      if (url.endsWith("/claim")) claimSent.resolve();
      return fetch(url, init);
    },
  });
  const holder = clientFor(server, tenant);
  const key = newKey();
  // Another worker holds the key, so our claim waits on the server (wait_ms).
  const held = await holder.claim("charges.create", key, { request, leaseMs: 60_000 });
  assert.equal(held.status, "claimed");
  if (held.status !== "claimed") return;

  let runs = 0;
  let restarted: Promise<void> = Promise.resolve();
  const result = client.once({
    operation: "charges.create",
    key,
    request,
    deadlineMs: 30_000,
    effect: async () => {
      runs++;
      // Kill the server again while the effect runs; the complete that follows
      // meets a dead server and is retried until it is back.
      await server.kill();
      restarted = server.start();
      return { statusCode: 201, body: { charge: "ch_k" } };
    },
  });
  await claimSent.promise;
  // The claim is outstanding (waiting for the holder): kill the server under it.
  await waitFor("the waiting claim to reach the server", async () => {
    const rec = await holder.lookup("charges.create", key);
    return rec?.state === "in_progress";
  });
  await server.kill();
  await server.start();
  // The holder gives up without acting, so the waiting caller can own the key.
  await holder.release("charges.create", key, held.ownerToken);
  const r = await result;
  await restarted;
  assert.equal(runs, 1);
  assert.equal(r.replayed, false);
  assert.deepEqual(r.body, { charge: "ch_k" });
  // Every call went to the one key: never a new key.
  assert.ok(calls.length >= 3);
  assert.deepEqual(new Set(calls.map(keyOf)), new Set([key]));
  const rec = await holder.lookup("charges.create", key);
  assert.equal(rec?.state, "completed");
  assert.equal(rec?.attempt, 1);
  // And a later call replays.
  const again = await client.once({ operation: "charges.create", key, request, effect: async () => (runs++, { statusCode: 500 }) });
  assert.equal(runs, 1);
  assert.equal(again.replayed, true);
});

test("lost_complete_answer: the complete reaches the server but its answer is lost; the SDK retries and returns the stored outcome", async () => {
  let completes = 0;
  const client = clientFor(server, freshTenant(), {
    fetch: async (url, init) => {
      if (url.endsWith("/complete")) {
        completes++;
        if (completes === 1) {
          const res = await fetch(url, init); // the server stores the outcome…
          await res.text();
          throw new TypeError("fetch failed: connection reset (simulated lost answer)"); // …but we never hear
        }
      }
      return fetch(url, init);
    },
  });
  const key = newKey();
  let runs = 0;
  const r = await client.once({
    operation: "charges.create",
    key,
    request,
    effect: async () => {
      runs++;
      return { statusCode: 201, body: { charge: "ch_lost" } };
    },
  });
  assert.equal(runs, 1);
  assert.equal(completes, 2);
  assert.equal(r.statusCode, 201);
  assert.deepEqual(r.body, { charge: "ch_lost" });
  const again = await client.once({ operation: "charges.create", key, request, effect: async () => (runs++, { statusCode: 500 }) });
  assert.equal(runs, 1);
  assert.equal(again.replayed, true);
  assert.deepEqual(again.body, { charge: "ch_lost" });
});

test("unavailable_is_retried: a 503 with Retry-After is retried after it with the same key", async () => {
  const claimTimes: number[] = [];
  const claimKeys: Array<string | undefined> = [];
  let served503 = 0;
  const client = clientFor(server, freshTenant(), {
    fetch: async (url, init) => {
      if (url.endsWith("/claim")) {
        claimTimes.push(Date.now());
        claimKeys.push(keyOf(url));
        if (served503 < 1) {
          served503++;
          const problem = { code: "unavailable", status: 503, title: "The store cannot answer", type: "about:blank" };
          return new Response(JSON.stringify(problem), {
            status: 503,
            headers: { "content-type": "application/problem+json", "retry-after": "1" },
          });
        }
      }
      return fetch(url, init);
    },
  });
  const key = newKey();
  let runs = 0;
  const r = await client.once({ operation: "charges.create", key, request, effect: async () => (runs++, { statusCode: 201 }) });
  assert.equal(runs, 1);
  assert.equal(r.replayed, false);
  assert.equal(r.attempt, 1);
  assert.equal(claimTimes.length, 2);
  assert.ok(claimTimes[1]! - claimTimes[0]! >= 1_000, "retried before Retry-After");
  assert.deepEqual(claimKeys, [key, key]);
});

test("unavailable_is_retried: a real server's 429 rate_limited is retried after Retry-After with the same key", async () => {
  const limited = await TestServer.start({ IDEMKEY_TENANT_RATE_LIMIT: "2" });
  try {
    const statuses: number[] = [];
    const urls: string[] = [];
    const client = clientFor(limited, freshTenant(), {
      fetch: async (url, init) => {
        const res = await fetch(url, init);
        statuses.push(res.status);
        urls.push(url);
        return res;
      },
    });
    const key = newKey();
    let runs = 0;
    // Several calls in one second: the limiter must refuse some of them.
    const r = await client.once({ operation: "charges.create", key, request, effect: async (ctx) => {
      runs++;
      await ctx.recordStep("charge", "ch_1");
      await ctx.recordStep("charge", "ch_1");
      return { statusCode: 201 };
    } });
    const again = await client.once({ operation: "charges.create", key, request, effect: async () => (runs++, { statusCode: 500 }) });
    assert.equal(runs, 1);
    assert.equal(r.replayed, false);
    assert.equal(again.replayed, true);
    assert.ok(statuses.includes(429), `no 429 seen: ${statuses.join(",")}`);
    assert.deepEqual(new Set(urls.map(keyOf)), new Set([key]));
  } finally {
    await limited.stop();
  }
});
