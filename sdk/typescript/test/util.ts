import { IdemkeyClient, type ClientOptions } from "../src/index.js";
import { freshTenant, type TestServer } from "./server.js";

export function clientFor(server: TestServer, tenant = freshTenant(), extra: Partial<ClientOptions> = {}): IdemkeyClient {
  return new IdemkeyClient({ baseUrl: server.baseUrl, token: server.token(tenant), ...extra });
}

/** Polls `cond` until it is true (or throws after `timeoutMs`). */
export async function waitFor(what: string, cond: () => Promise<boolean> | boolean, timeoutMs = 10_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** A deferred promise. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
