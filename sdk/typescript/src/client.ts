import {
  AmbiguousEffectError,
  IdemkeyError,
  InProgressError,
  InProgressTimeoutError,
  LeaseLostError,
  NotFoundError,
  NothingDoneError,
  QuarantinedError,
  AlreadyCompletedError,
  TransportError,
  UnexpectedResponseError,
  errorFromProblem,
  type Problem,
} from "./errors.js";
import type {
  ClaimResult,
  CompletedClaim,
  EffectContext,
  InProgressClaim,
  KeyRecord,
  OnceOptions,
  OnceResult,
  Outcome,
  OutcomeInput,
  OwnedClaim,
  PreviousAttempt,
  Reconciliation,
  StepRecord,
} from "./types.js";

type FetchLike = (input: string, init: RequestInit) => Promise<Response>;

export interface ClientOptions {
  /** The server, such as `https://idemkey.internal` (no trailing `/v1`). */
  baseUrl: string;
  /** A bearer token, or a function giving one (called for every request). */
  token: string | (() => string | Promise<string>);
  /** A fetch implementation (default: the platform's `fetch`). */
  fetch?: FetchLike;
  /** How long one call keeps retrying transport errors, 503 and 429 (default 30 000 ms). */
  retryForMs?: number;
  /** Timeout of one HTTP request, on top of any `wait_ms` (default 15 000 ms). */
  requestTimeoutMs?: number;
  /** The longest `wait_ms` a claim asks for in once() (default 5 000 ms; the server caps it at max_wait). */
  maxWaitMs?: number;
  /** Heartbeat every lease × this (default 1/3). */
  heartbeatFraction?: number;
}

export interface ClaimOptions {
  request?: unknown;
  fingerprint?: string;
  waitMs?: number;
  leaseMs?: number;
}

interface Answer {
  status: number;
  body: unknown;
  headers: Headers;
  /** True when an earlier try of this call got no answer (it may have been applied). */
  retried: boolean;
}

interface CallOptions {
  timeoutMs?: number;
  retryUntil?: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, ms)));

/** `encodeURIComponent`, also encoding `!'()*`: only A–Z a–z 0–9 - . _ ~ stay. */
export function encodeSegment(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => "%" + c.charCodeAt(0).toString(16).toUpperCase());
}

function parseRetryAfter(value: string | null): number | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

function toWireOutcome(o: OutcomeInput): Record<string, unknown> {
  const src = o as Record<string, unknown>;
  const statusCode = src.statusCode ?? src.status_code;
  if (typeof statusCode !== "number") throw new TypeError("an outcome needs statusCode (an integer 100–599)");
  const wire: Record<string, unknown> = { status_code: statusCode };
  if (src.headers !== undefined) wire.headers = src.headers;
  if (src.body !== undefined) wire.body = src.body;
  const resourceId = src.resourceId ?? src.resource_id;
  if (resourceId !== undefined) wire.resource_id = resourceId;
  return wire;
}

function fromWireOutcome(w: unknown): Outcome {
  const o = (w ?? {}) as Record<string, unknown>;
  const out: Outcome = { statusCode: o.status_code as number };
  if ("body" in o) out.body = o.body;
  if (o.headers !== undefined) out.headers = o.headers as Record<string, string>;
  if (o.resource_id !== undefined) out.resourceId = o.resource_id as string;
  return out;
}

function fromWireSteps(w: unknown): Record<string, StepRecord> {
  const steps: Record<string, StepRecord> = {};
  for (const [name, s] of Object.entries((w ?? {}) as Record<string, Record<string, string>>)) {
    steps[name] = { effectId: s.effect_id ?? "", providerRef: s.provider_ref ?? "", doneAt: s.done_at ?? "" };
  }
  return steps;
}

function fromWirePrevious(w: unknown): PreviousAttempt | undefined {
  if (w === undefined || w === null) return undefined;
  const p = w as Record<string, unknown>;
  return { attempt: p.attempt as number, claimedAt: p.claimed_at as string, leaseExpiresAt: p.lease_expires_at as string };
}

function fromWireRecord(w: unknown): KeyRecord {
  const r = w as Record<string, unknown>;
  const rec: KeyRecord = {
    operation: r.operation as string,
    key: r.key as string,
    state: r.state as KeyRecord["state"],
    fingerprint: r.fingerprint as string,
    attempt: r.attempt as number,
    effectId: r.effect_id as string,
    tier: r.tier as string,
    createdAt: r.created_at as string,
    claimedAt: r.claimed_at as string,
    expiresAt: r.expires_at as string,
    steps: fromWireSteps(r.steps),
    history: (r.history ?? []) as Array<Record<string, unknown>>,
  };
  if (typeof r.lease_expires_at === "string") rec.leaseExpiresAt = r.lease_expires_at;
  if (typeof r.completed_at === "string") rec.completedAt = r.completed_at;
  if (typeof r.quarantine_reason === "string") rec.quarantineReason = r.quarantine_reason;
  if (r.outcome !== undefined) rec.outcome = fromWireOutcome(r.outcome);
  return rec;
}

function isRetryableStatus(status: number): boolean {
  return status === 503 || status === 429 || status === 502 || status === 504;
}

function jitter(ms: number): number {
  return ms + Math.random() * Math.min(250, ms * 0.25 + 50);
}

export class IdemkeyClient {
  private readonly baseUrl: string;
  private readonly tokenSource: ClientOptions["token"];
  private readonly fetchImpl: FetchLike;
  private readonly retryForMs: number;
  private readonly requestTimeoutMs: number;
  private readonly maxWaitMs: number;
  private readonly heartbeatFraction: number;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, "");
    this.tokenSource = options.token;
    const f = options.fetch ?? (globalThis.fetch as FetchLike | undefined);
    if (f === undefined) throw new TypeError("no fetch: pass one in the client options");
    this.fetchImpl = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.retryForMs = options.retryForMs ?? 30_000;
    this.requestTimeoutMs = options.requestTimeoutMs ?? 15_000;
    this.maxWaitMs = options.maxWaitMs ?? 5_000;
    this.heartbeatFraction = options.heartbeatFraction ?? 1 / 3;
  }

  // ---------------------------------------------------------------- transport

  private keyPath(operation: string, key: string): string {
    return `${this.baseUrl}/v1/keys/${encodeSegment(operation)}/${encodeSegment(key)}`;
  }

  private async token(): Promise<string> {
    return typeof this.tokenSource === "function" ? await this.tokenSource() : this.tokenSource;
  }

  /**
   * One API call. Retries transport errors, 503 and 429 (after Retry-After,
   * with jitter) with the very same request until `retryUntil`; throws the
   * typed error of any other problem answer.
   */
  private async call(method: string, url: string, body: unknown, opts: CallOptions = {}): Promise<Answer> {
    const retryUntil = opts.retryUntil ?? Date.now() + this.retryForMs;
    const timeoutMs = opts.timeoutMs ?? this.requestTimeoutMs;
    const payload = body === undefined ? undefined : JSON.stringify(body);
    let retried = false;
    for (let n = 0; ; n++) {
      let res: Response;
      let text: string;
      try {
        const headers: Record<string, string> = {
          authorization: `Bearer ${await this.token()}`,
          accept: "application/json, application/problem+json",
        };
        if (payload !== undefined) headers["content-type"] = "application/json";
        const init: RequestInit = { method, headers, signal: AbortSignal.timeout(timeoutMs) };
        if (payload !== undefined) init.body = payload;
        res = await this.fetchImpl(url, init);
        text = await res.text();
      } catch (err) {
        retried = true;
        const delay = jitter(Math.min(2_000, 50 * 2 ** n));
        if (Date.now() + delay > retryUntil) {
          throw new TransportError(`${method} ${url}: no answer (${err instanceof Error ? err.message : String(err)})`, { cause: err });
        }
        await sleep(delay);
        continue;
      }
      let parsed: unknown = undefined;
      if (text.length > 0) {
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = undefined;
        }
      }
      if (res.ok) {
        if (parsed === undefined) throw new UnexpectedResponseError("unexpected_response", res.status, {}, `${method} ${url}: answer is not JSON`);
        return { status: res.status, body: parsed, headers: res.headers, retried };
      }
      const retryAfterMs = parseRetryAfter(res.headers.get("retry-after"));
      const problem: Problem =
        parsed !== null && typeof parsed === "object" && !Array.isArray(parsed) ? (parsed as Problem) : { status: res.status };
      const error = errorFromProblem(res.status, problem, retryAfterMs);
      if (isRetryableStatus(res.status)) {
        const delay = jitter(retryAfterMs ?? Math.min(2_000, 100 * 2 ** n));
        if (Date.now() + delay <= retryUntil) {
          await sleep(delay);
          continue;
        }
      }
      throw error;
    }
  }

  // ---------------------------------------------------------------- low level

  /**
   * Claims the key. Answers `claimed`/`recovering` (you own it), `completed`
   * (the stored outcome) or `in_progress` (someone else holds it); throws
   * KeyReusedError, QuarantinedError and the other typed errors.
   */
  async claim(operation: string, key: string, options: ClaimOptions, call: CallOptions = {}): Promise<ClaimResult> {
    const body: Record<string, unknown> = {};
    if (options.fingerprint !== undefined) body.fingerprint = options.fingerprint;
    else body.request = options.request ?? null;
    if (options.waitMs !== undefined) body.wait_ms = Math.max(0, Math.floor(options.waitMs));
    if (options.leaseMs !== undefined) body.lease_ms = options.leaseMs;
    const timeoutMs = (options.waitMs ?? 0) + (call.timeoutMs ?? this.requestTimeoutMs);
    let answer: Answer;
    try {
      answer = await this.call("POST", `${this.keyPath(operation, key)}/claim`, body, { ...call, timeoutMs });
    } catch (err) {
      if (err instanceof InProgressError) {
        const p = err.problem;
        const result: InProgressClaim = {
          status: "in_progress",
          attempt: err.attempt,
          leaseExpiresAt: err.leaseExpiresAt,
          expiresAt: typeof p.expires_at === "string" ? p.expires_at : undefined,
          retryAfterMs: err.retryAfterMs,
          problem: p,
        };
        return result;
      }
      throw err;
    }
    const b = answer.body as Record<string, unknown>;
    if (b.status === "claimed" || b.status === "recovering") {
      const owned: OwnedClaim = {
        status: b.status,
        ownerToken: b.owner_token as string,
        attempt: b.attempt as number,
        leaseExpiresAt: b.lease_expires_at as string,
        expiresAt: b.expires_at as string,
        effectId: b.effect_id as string,
        steps: fromWireSteps(b.steps),
      };
      const prev = fromWirePrevious(b.previous_attempt);
      if (prev !== undefined) owned.previousAttempt = prev;
      return owned;
    }
    if (b.status === "completed") {
      const done: CompletedClaim = {
        status: "completed",
        replayed: b.replayed === true,
        attempt: b.attempt as number,
        effectId: b.effect_id as string,
        completedAt: b.completed_at as string,
        expiresAt: b.expires_at as string,
        outcome: fromWireOutcome(b.outcome),
      };
      return done;
    }
    throw new UnexpectedResponseError("unexpected_response", answer.status, b as Problem, `claim answered an unknown status ${String(b.status)}`);
  }

  /** Stores the final outcome (owner call). A retry with the same token and outcome is safe. */
  async complete(operation: string, key: string, ownerToken: string, outcome: OutcomeInput, call: CallOptions = {}): Promise<KeyRecord> {
    const answer = await this.call("POST", `${this.keyPath(operation, key)}/complete`, { owner_token: ownerToken, outcome: toWireOutcome(outcome) }, call);
    return fromWireRecord(answer.body);
  }

  /** Gives the key back because no effect happened (owner call). */
  async release(operation: string, key: string, ownerToken: string, call: CallOptions = {}): Promise<void> {
    try {
      await this.call("POST", `${this.keyPath(operation, key)}/release`, { owner_token: ownerToken }, call);
    } catch (err) {
      // An earlier try may have released it and its answer was lost: the key is gone either way.
      if (err instanceof NotFoundError) return;
      throw err;
    }
  }

  /** Extends the lease (owner call): it ends at now + leaseMs (or the claim's lease). */
  async heartbeat(operation: string, key: string, ownerToken: string, leaseMs?: number, call: CallOptions = {}): Promise<KeyRecord> {
    const body: Record<string, unknown> = { owner_token: ownerToken };
    if (leaseMs !== undefined) body.lease_ms = leaseMs;
    const answer = await this.call("POST", `${this.keyPath(operation, key)}/heartbeat`, body, call);
    return fromWireRecord(answer.body);
  }

  /** Records that a named step finished at its provider (owner call; a repeat with the same ref is safe). */
  async recordStep(operation: string, key: string, ownerToken: string, step: string, providerRef: string, call: CallOptions = {}): Promise<KeyRecord> {
    const answer = await this.call(
      "PUT",
      `${this.keyPath(operation, key)}/steps/${encodeSegment(step)}`,
      { owner_token: ownerToken, provider_ref: providerRef },
      call,
    );
    return fromWireRecord(answer.body);
  }

  /** Marks the key's outcome ambiguous (owner call): claims answer `quarantined` until resolved. */
  async quarantine(operation: string, key: string, ownerToken: string, reason: string, call: CallOptions = {}): Promise<KeyRecord> {
    try {
      const answer = await this.call("POST", `${this.keyPath(operation, key)}/quarantine`, { owner_token: ownerToken, reason }, call);
      return fromWireRecord(answer.body);
    } catch (err) {
      // A retry after a lost answer finds the key quarantined already.
      if (err instanceof QuarantinedError) {
        const rec = await this.lookup(operation, key, call);
        if (rec !== undefined && rec.state === "quarantined") return rec;
      }
      throw err;
    }
  }

  /** Reads the key's record; undefined when there is none (404). */
  async lookup(operation: string, key: string, call: CallOptions = {}): Promise<KeyRecord | undefined> {
    try {
      const answer = await this.call("GET", this.keyPath(operation, key), undefined, call);
      return fromWireRecord(answer.body);
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  // ---------------------------------------------------------------- once()

  /**
   * Runs `effect` at most once for (operation, key), however often it is
   * called, and returns the one outcome. See the README for every case.
   */
  async once(options: OnceOptions): Promise<OnceResult> {
    const { operation, key } = options;
    const deadline = Date.now() + (options.deadlineMs ?? 30_000);
    const claimOptions: ClaimOptions = {};
    if (options.fingerprint !== undefined) claimOptions.fingerprint = options.fingerprint;
    else claimOptions.request = options.request;
    if (options.leaseMs !== undefined) claimOptions.leaseMs = options.leaseMs;

    for (let n = 0; ; n++) {
      const remaining = deadline - Date.now();
      const waitMs = Math.max(0, Math.min(this.maxWaitMs, remaining));
      const claim = await this.claim(operation, key, { ...claimOptions, waitMs });
      if (claim.status === "completed") {
        return {
          ...claim.outcome,
          outcome: claim.outcome,
          replayed: true,
          expiresAt: claim.expiresAt,
          effectId: claim.effectId,
          attempt: claim.attempt,
          via: "replay",
        };
      }
      if (claim.status === "in_progress") {
        const left = deadline - Date.now();
        if (left <= 0) {
          throw new InProgressTimeoutError(
            claim.problem,
            `${operation}/${key}: still in progress (attempt ${String(claim.attempt)}, lease until ${String(claim.leaseExpiresAt)}) at the deadline; the effect was not run by this call`,
          );
        }
        // The server already waited wait_ms when we asked it to; otherwise honour
        // Retry-After. Back off with jitter, never past the deadline.
        const backoff = Math.min(2_000, 100 * 2 ** n);
        const base = waitMs > 0 ? Math.min(backoff, claim.retryAfterMs ?? backoff) : (claim.retryAfterMs ?? backoff);
        await sleep(Math.min(jitter(base), left));
        continue;
      }
      return this.own(options, claim);
    }
  }

  private async own(options: OnceOptions, claim: OwnedClaim): Promise<OnceResult> {
    const { operation, key } = options;
    const token = claim.ownerToken;
    const steps: Record<string, StepRecord> = { ...claim.steps };

    const finish = async (outcome: OutcomeInput, via: OnceResult["via"]): Promise<OnceResult> => {
      // The effect has happened: try hard to store its outcome. A retry after a
      // lost answer sends the same token and outcome, which the server accepts.
      // lease_lost here means another attempt took over: it propagates.
      const record = await this.complete(operation, key, token, outcome, { retryUntil: Date.now() + Math.max(this.retryForMs, 60_000) });
      const stored = record.outcome ?? fromWireOutcome(toWireOutcome(outcome));
      return {
        ...stored,
        outcome: stored,
        replayed: false,
        expiresAt: record.expiresAt,
        effectId: record.effectId,
        attempt: record.attempt,
        via,
      };
    };

    // On recovering, ask first.
    if (claim.status === "recovering" && options.reconcile !== undefined) {
      const info = { operation, key, attempt: claim.attempt, ...(claim.previousAttempt ? { previousAttempt: claim.previousAttempt } : {}) };
      let verdict: Reconciliation;
      try {
        verdict = await options.reconcile(claim.effectId, { ...steps }, info);
      } catch (err) {
        // Could not tell what happened: leave the key to the lease rules.
        throw new AmbiguousEffectError(operation, key, claim.effectId, err);
      }
      if (verdict.done) return finish(verdict.outcome, "reconcile");
      if (verdict.stepsDone !== undefined) {
        for (const [name, ref] of Object.entries(verdict.stepsDone)) {
          if (steps[name] === undefined) {
            const rec = await this.recordStep(operation, key, token, name, ref);
            const s = rec.steps[name];
            if (s !== undefined) steps[name] = s;
          }
        }
      }
    }

    // Heartbeats while the effect runs.
    const controller = new AbortController();
    let leaseLost: LeaseLostError | undefined;
    const leaseMs = options.leaseMs ?? Math.max(1_000, Date.parse(claim.leaseExpiresAt) - Date.now());
    const interval = Math.max(200, Math.floor(leaseMs * this.heartbeatFraction));
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const loseLease = (err: unknown) => {
      if (leaseLost !== undefined) return;
      leaseLost =
        err instanceof LeaseLostError
          ? err
          : new LeaseLostError("lease_lost", 409, err instanceof IdemkeyError ? err.problem : {}, `${operation}/${key}: the lease was lost (${err instanceof Error ? err.message : String(err)})`, { cause: err });
      controller.abort(leaseLost);
    };
    const beat = async () => {
      timer = undefined;
      if (stopped) return;
      try {
        await this.heartbeat(operation, key, token, options.leaseMs, {
          timeoutMs: Math.max(500, interval),
          retryUntil: Date.now() + Math.max(500, interval),
        });
      } catch (err) {
        if (err instanceof LeaseLostError || err instanceof QuarantinedError || err instanceof NotFoundError || err instanceof AlreadyCompletedError) {
          loseLease(err);
          return;
        }
        // Transport trouble: try again at the next tick.
      }
      schedule();
    };
    const schedule = () => {
      if (stopped || leaseLost !== undefined) return;
      timer = setTimeout(() => void beat(), interval);
      (timer as { unref?: () => void }).unref?.();
    };
    const stop = () => {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
    };

    const client = this;
    const ctx: EffectContext = {
      operation,
      key,
      effectId: claim.effectId,
      attempt: claim.attempt,
      recovering: claim.status === "recovering",
      steps,
      signal: controller.signal,
      get leaseLost() {
        return leaseLost !== undefined;
      },
      stepEffectId: (name) => `${claim.effectId}.${name}`,
      isStepDone: (name) => steps[name] !== undefined,
      async recordStep(name, providerRef) {
        if (leaseLost !== undefined) throw leaseLost;
        try {
          const rec = await client.recordStep(operation, key, token, name, providerRef);
          const s = rec.steps[name];
          if (s !== undefined) steps[name] = s;
        } catch (err) {
          if (err instanceof LeaseLostError || err instanceof QuarantinedError) loseLease(err);
          throw err;
        }
      },
      async step(name, run) {
        const done = steps[name];
        if (done !== undefined) return done.providerRef;
        if (leaseLost !== undefined) throw leaseLost;
        const ref = await run(`${claim.effectId}.${name}`);
        await ctx.recordStep(name, ref);
        return ref;
      },
    };

    schedule();
    let outcome: OutcomeInput;
    try {
      outcome = await options.effect(ctx);
    } catch (err) {
      stop();
      if (leaseLost !== undefined) throw leaseLost;
      if (err instanceof NothingDoneError) {
        await this.release(operation, key, token);
        throw err;
      }
      throw new AmbiguousEffectError(operation, key, claim.effectId, err);
    }
    stop();
    if (leaseLost !== undefined) throw leaseLost;
    return finish(outcome, "effect");
  }
}
