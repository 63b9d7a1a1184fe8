/** What an effect produced: stored by complete and replayed byte for byte. */
export interface Outcome {
  statusCode: number;
  body?: unknown;
  headers?: Record<string, string>;
  resourceId?: string;
}

/** An outcome as the caller may give it: camelCase or the wire's snake_case. */
export type OutcomeInput =
  | Outcome
  | { status_code: number; body?: unknown; headers?: Record<string, string>; resource_id?: string };

/** A step recorded on the key (recovery.md). */
export interface StepRecord {
  effectId: string;
  providerRef: string;
  doneAt: string;
}

export interface PreviousAttempt {
  attempt: number;
  claimedAt: string;
  leaseExpiresAt: string;
}

/** You own the key (`claimed`: new; `recovering`: you took over after the previous owner's lease ran out). */
export interface OwnedClaim {
  status: "claimed" | "recovering";
  ownerToken: string;
  attempt: number;
  leaseExpiresAt: string;
  expiresAt: string;
  effectId: string;
  previousAttempt?: PreviousAttempt;
  steps: Record<string, StepRecord>;
}

/** The key was completed: its stored outcome. */
export interface CompletedClaim {
  status: "completed";
  replayed: boolean;
  attempt: number;
  effectId: string;
  completedAt: string;
  expiresAt: string;
  outcome: Outcome;
}

/** Another attempt holds a live lease. */
export interface InProgressClaim {
  status: "in_progress";
  attempt: number | undefined;
  leaseExpiresAt: string | undefined;
  expiresAt: string | undefined;
  /** The server's Retry-After, in ms. */
  retryAfterMs: number | undefined;
  problem: Record<string, unknown>;
}

export type ClaimResult = OwnedClaim | CompletedClaim | InProgressClaim;

export type KeyState = "in_progress" | "completed" | "quarantined";

/** A key's record, as lookup and the owner calls answer it. */
export interface KeyRecord {
  operation: string;
  key: string;
  state: KeyState;
  fingerprint: string;
  attempt: number;
  effectId: string;
  tier: string;
  createdAt: string;
  claimedAt: string;
  leaseExpiresAt?: string;
  completedAt?: string;
  quarantineReason?: string;
  expiresAt: string;
  steps: Record<string, StepRecord>;
  history: Array<Record<string, unknown>>;
  outcome?: Outcome;
}

/** What once() returns: the outcome plus where it came from. */
export interface OnceResult extends Outcome {
  /** True when the outcome was stored earlier and this call ran nothing. */
  replayed: boolean;
  /** When the key's replay protection ends. */
  expiresAt: string;
  effectId: string;
  attempt: number;
  /** How the outcome was obtained by this call. */
  via: "effect" | "replay" | "reconcile";
  outcome: Outcome;
}

/** Given to the effect. */
export interface EffectContext {
  operation: string;
  key: string;
  /** Pass it to your provider as its idempotency key / reference. */
  effectId: string;
  attempt: number;
  /** True when this attempt took over from an owner whose lease ran out. */
  recovering: boolean;
  /** Steps already done (recorded on the key, or reported by reconcile). */
  steps: Readonly<Record<string, StepRecord>>;
  /** Aborted (with a LeaseLostError as reason) when the lease is lost. */
  signal: AbortSignal;
  /** True once the lease is lost: stop, do not act further. */
  readonly leaseLost: boolean;
  /** The effect id of a named step: `effectId + "." + name`. */
  stepEffectId(name: string): string;
  /** Records that a named step finished at its provider. */
  recordStep(name: string, providerRef: string): Promise<void>;
  /**
   * Runs a named step unless it is already done: `run(stepEffectId)` must
   * perform it and return the provider's reference, which is then recorded.
   * Returns the provider reference (the recorded one when skipped).
   */
  step(name: string, run: (stepEffectId: string) => Promise<string>): Promise<string>;
  /** True when the named step is already done. */
  isStepDone(name: string): boolean;
}

/** reconcile's answer on `recovering`. */
export type Reconciliation =
  /** The effect happened: complete with this outcome, run nothing. */
  | { done: true; outcome: OutcomeInput }
  /** Nothing happened: run the effect (same effect id). */
  | { done: false; stepsDone?: undefined }
  /** These steps (name → provider reference) happened: run only the rest. */
  | { done: false; stepsDone: Record<string, string> };

export interface ReconcileInfo {
  operation: string;
  key: string;
  attempt: number;
  previousAttempt?: PreviousAttempt;
}

export type Reconciler = (
  effectId: string,
  steps: Readonly<Record<string, StepRecord>>,
  info: ReconcileInfo,
) => Reconciliation | Promise<Reconciliation>;

export interface OnceOptions {
  operation: string;
  /** The idempotency key: made once per logical operation, stored before the first attempt. */
  key: string;
  /** The protected input (exactly one of request / fingerprint). */
  request?: unknown;
  /** A precomputed fingerprint (64 lowercase hex). */
  fingerprint?: string;
  effect: (ctx: EffectContext) => Promise<OutcomeInput> | OutcomeInput;
  reconcile?: Reconciler;
  /** How long to wait for another attempt that holds the key (default 30 000 ms). */
  deadlineMs?: number;
  /** The lease to ask for (1 000 – the class's max_lease). */
  leaseMs?: number;
}
