/**
 * Typed errors. Every problem the server can answer (docs/protocol.md, "Errors")
 * has its own class; all extend {@link IdemkeyError}, which carries the
 * problem's `code`, the HTTP `status` and the whole problem document.
 * Match with `instanceof` or on `code`.
 */

/** An RFC 9457 problem document as idemkey sends it. */
export interface Problem {
  code?: string;
  title?: string;
  status?: number;
  detail?: string;
  type?: string;
  request_id?: string;
  [member: string]: unknown;
}

export class IdemkeyError extends Error {
  /** The problem `code` (or an SDK code such as `transport`, `in_progress_timeout`). */
  readonly code: string;
  /** The HTTP status, or 0 when no answer was received. */
  readonly status: number;
  /** The problem document as received (empty for SDK-side errors). */
  readonly problem: Problem;
  /** The server's request id, when the answer had one. */
  readonly requestId: string | undefined;

  constructor(code: string, status: number, problem: Problem = {}, message?: string, options?: { cause?: unknown; retryAfterMs?: number }) {
    super(message ?? describe(code, status, problem), options !== undefined && "cause" in options ? { cause: options.cause } : undefined);
    this.name = new.target.name;
    this.code = code;
    this.status = status;
    this.problem = problem;
    this.requestId = typeof problem.request_id === "string" ? problem.request_id : undefined;
  }
}

function describe(code: string, status: number, problem: Problem): string {
  const title = typeof problem.title === "string" ? problem.title : "idemkey error";
  const detail = typeof problem.detail === "string" ? `: ${problem.detail}` : "";
  const rid = typeof problem.request_id === "string" ? ` (request ${problem.request_id})` : "";
  return `${code} (${status}) ${title}${detail}${rid}`;
}

/** Time in ms the server asked us to wait (Retry-After), when it said. */
interface HasRetryAfter {
  readonly retryAfterMs: number | undefined;
}

// 400s: caller bugs, never retried.
export class InvalidJsonError extends IdemkeyError {}
export class InvalidBodyError extends IdemkeyError {}
export class InvalidPolicyError extends IdemkeyError {}
export class InvalidKeyError extends IdemkeyError {}
export class InvalidOperationError extends IdemkeyError {}
export class InvalidFingerprintError extends IdemkeyError {}
export class NumberOutOfRangeError extends IdemkeyError {}
export class InvalidRequestError extends IdemkeyError {}
export class InvalidLeaseError extends IdemkeyError {}
export class InvalidOutcomeError extends IdemkeyError {}
export class InvalidStepError extends IdemkeyError {}
export class InvalidQueryError extends IdemkeyError {}
// 413
export class PayloadTooLargeError extends IdemkeyError {}
export class OutcomeTooLargeError extends IdemkeyError {}
// 401 / 403 / 404
export class UnauthorizedError extends IdemkeyError {}
export class ForbiddenError extends IdemkeyError {}
export class NotFoundError extends IdemkeyError {}
export class NoRouteError extends IdemkeyError {}

/** 409 `in_progress`: another attempt holds a live lease. */
export class InProgressError extends IdemkeyError implements HasRetryAfter {
  readonly retryAfterMs: number | undefined;
  /** The attempt holding the key. */
  readonly attempt: number | undefined;
  readonly leaseExpiresAt: string | undefined;
  constructor(code: string, status: number, problem: Problem = {}, message?: string, options?: { cause?: unknown; retryAfterMs?: number }) {
    super(code, status, problem, message, options);
    this.retryAfterMs = options?.retryAfterMs;
    this.attempt = typeof problem.attempt === "number" ? problem.attempt : undefined;
    this.leaseExpiresAt = typeof problem.lease_expires_at === "string" ? problem.lease_expires_at : undefined;
  }
}
/** 409 `quarantined`: the outcome is ambiguous; nobody retries until it is resolved. */
export class QuarantinedError extends IdemkeyError {}
/** 409 `lease_lost`: another attempt owns the key now. Stop; claim again to see the state. */
export class LeaseLostError extends IdemkeyError {}
/** 409 `already_completed`. */
export class AlreadyCompletedError extends IdemkeyError {}
/** 409 `step_conflict`: the step was recorded with another provider_ref. */
export class StepConflictError extends IdemkeyError {}
/** 409 `too_many_steps`. */
export class TooManyStepsError extends IdemkeyError {}
/** 409 `not_quarantined`. */
export class NotQuarantinedError extends IdemkeyError {}
/** 400 `invalid_webhook`: a webhook endpoint's settings are invalid. */
export class InvalidWebhookError extends IdemkeyError {}
/** 404 `webhook_not_found`: no such webhook endpoint for this tenant. */
export class WebhookNotFoundError extends IdemkeyError {}
/** 507 `quota_exceeded`: the tenant reached its quota of stored keys or outcome bytes; not retried. */
export class QuotaExceededError extends IdemkeyError {}

/** 422 `key_reused`: the same key with a different request. A caller bug: do not retry. */
export class KeyReusedError extends IdemkeyError {
  /** JSON pointers (RFC 6901) of the fields that differ, when the server could tell. */
  readonly mismatched: string[] | undefined;
  /** True when there may be more differences than `mismatched` names. */
  readonly mismatchedTruncated: boolean;
  constructor(code: string, status: number, problem: Problem = {}, message?: string, options?: { cause?: unknown }) {
    super(code, status, problem, message, options);
    this.mismatched = Array.isArray(problem.mismatched) ? problem.mismatched.filter((p): p is string => typeof p === "string") : undefined;
    this.mismatchedTruncated = problem.mismatched_truncated === true;
  }
}

/** 429 `rate_limited`: retried by the SDK after Retry-After. */
export class RateLimitedError extends IdemkeyError implements HasRetryAfter {
  readonly retryAfterMs: number | undefined;
  constructor(code: string, status: number, problem: Problem = {}, message?: string, options?: { cause?: unknown; retryAfterMs?: number }) {
    super(code, status, problem, message, options);
    this.retryAfterMs = options?.retryAfterMs;
  }
}
/** 503 `unavailable`: never "new"; retried by the SDK after Retry-After. */
export class UnavailableError extends IdemkeyError implements HasRetryAfter {
  readonly retryAfterMs: number | undefined;
  constructor(code: string, status: number, problem: Problem = {}, message?: string, options?: { cause?: unknown; retryAfterMs?: number }) {
    super(code, status, problem, message, options);
    this.retryAfterMs = options?.retryAfterMs;
  }
}

// SDK-side errors.

/** No answer from the server (network error, timeout) within the retry budget. `code` is `transport`. */
export class TransportError extends IdemkeyError {
  constructor(message: string, options?: { cause?: unknown }) {
    super("transport", 0, {}, message, options);
  }
}

/** The server answered something the SDK does not understand. `code` is `unexpected_response` or the unknown problem code. */
export class UnexpectedResponseError extends IdemkeyError {}

/**
 * once() waited for another attempt (`in_progress`) until its deadline and gave
 * up. The effect was not run by this call. `code` is `in_progress_timeout`.
 */
export class InProgressTimeoutError extends IdemkeyError {
  readonly attempt: number | undefined;
  readonly leaseExpiresAt: string | undefined;
  constructor(problem: Problem, message: string) {
    super("in_progress_timeout", 409, problem, message);
    this.attempt = typeof problem.attempt === "number" ? problem.attempt : undefined;
    this.leaseExpiresAt = typeof problem.lease_expires_at === "string" ? problem.lease_expires_at : undefined;
  }
}

/**
 * The effect failed in a way that may have left an effect behind (anything but
 * {@link NothingDoneError}). The key was NOT released: it is left to the lease
 * rules, so a later call after the lease ends gets `recovering` and reconciles.
 * `code` is `effect_ambiguous`; `cause` is the effect's error.
 */
export class AmbiguousEffectError extends IdemkeyError {
  readonly operation: string;
  readonly key: string;
  readonly effectId: string;
  constructor(operation: string, key: string, effectId: string, cause: unknown) {
    const why = cause instanceof Error ? cause.message : String(cause);
    super(
      "effect_ambiguous",
      0,
      {},
      `the effect for ${operation}/${key} (${effectId}) failed ambiguously (${why}); the key was not released and is left to the lease rules: after the lease ends the next call gets "recovering" and must reconcile`,
      { cause },
    );
    this.operation = operation;
    this.key = key;
    this.effectId = effectId;
  }
}

/**
 * Throw this from an effect when you KNOW nothing was done (validation failed,
 * the provider refused before acting). once() releases the key, so the next
 * call runs afresh, and rethrows this error.
 */
export class NothingDoneError extends Error {
  constructor(message = "nothing was done", options?: { cause?: unknown }) {
    super(message, options);
    this.name = "NothingDoneError";
  }
}

type ProblemErrorClass = new (
  code: string,
  status: number,
  problem?: Problem,
  message?: string,
  options?: { cause?: unknown; retryAfterMs?: number },
) => IdemkeyError;

/** Every problem code of docs/protocol.md's Errors table, with its class. */
export const ERROR_CLASSES: Readonly<Record<string, ProblemErrorClass>> = Object.freeze({
  invalid_json: InvalidJsonError,
  invalid_body: InvalidBodyError,
  invalid_policy: InvalidPolicyError,
  invalid_key: InvalidKeyError,
  invalid_operation: InvalidOperationError,
  invalid_fingerprint: InvalidFingerprintError,
  number_out_of_range: NumberOutOfRangeError,
  invalid_request: InvalidRequestError,
  invalid_lease: InvalidLeaseError,
  invalid_outcome: InvalidOutcomeError,
  payload_too_large: PayloadTooLargeError,
  outcome_too_large: OutcomeTooLargeError,
  unauthorized: UnauthorizedError,
  forbidden: ForbiddenError,
  not_found: NotFoundError,
  no_route: NoRouteError,
  in_progress: InProgressError,
  quarantined: QuarantinedError,
  lease_lost: LeaseLostError,
  already_completed: AlreadyCompletedError,
  key_reused: KeyReusedError,
  invalid_step: InvalidStepError,
  invalid_query: InvalidQueryError,
  step_conflict: StepConflictError,
  too_many_steps: TooManyStepsError,
  not_quarantined: NotQuarantinedError,
  invalid_webhook: InvalidWebhookError,
  webhook_not_found: WebhookNotFoundError,
  quota_exceeded: QuotaExceededError,
  rate_limited: RateLimitedError,
  unavailable: UnavailableError,
});

/** Builds the typed error for a problem answer. */
export function errorFromProblem(status: number, problem: Problem, retryAfterMs?: number): IdemkeyError {
  const code = typeof problem.code === "string" ? problem.code : `http_${status}`;
  const cls = ERROR_CLASSES[code] ?? UnexpectedResponseError;
  return new cls(code, status, problem, undefined, retryAfterMs === undefined ? undefined : { retryAfterMs });
}
