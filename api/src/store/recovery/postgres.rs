//! Postgres statements for the hard cases: steps, quarantine, resolve, and
//! listing stuck keys. Each transition is still one guarded statement (a
//! resolve that releases is a delete plus its audit row, in one transaction).

use super::Statements;

/// The step is already recorded.
macro_rules! has_step {
    () => {
        " (steps::jsonb ? $5) "
    };
}

// $4 owner hash, $5 step, $6 provider_ref
const RECORD_STEP: &str = concat!(
    "update idempotency_key set \
       steps = case when",
    has_step!(),
    "then steps else (steps::jsonb || jsonb_build_object($5::text, \
         jsonb_build_object('provider_ref', $6::text, 'done_at', ",
    pg_now_text!(),
    ")))::text end, \
       history = case when",
    has_step!(),
    "then history else",
    pg_history_with!("'event', 'step', 'attempt', attempt, 'step', $5::text"),
    "end, updated_at = now() \
     where",
    pg_scoped!(),
    "and state = 'in_progress' and owner_token_hash = $4",
    pg_live!(),
    "and (not",
    has_step!(),
    "or steps::jsonb -> $5 ->> 'provider_ref' = $6) \
     and (",
    has_step!(),
    "or (select count(*) from jsonb_object_keys(steps::jsonb)) < 64) returning",
    pg_record!()
);

// $4 owner hash, $5 reason
const QUARANTINE: &str = concat!(
    "update idempotency_key set state = 'quarantined', quarantine_reason = $5, updated_at = now(), ",
    pg_append_history!("'event', 'quarantined', 'attempt', attempt, 'reason', $5::text, 'by', 'owner'"),
    "where",
    pg_scoped!(),
    "and state = 'in_progress' and owner_token_hash = $4",
    pg_live!(),
    "returning",
    pg_record!()
);

/// Quarantined, or (for an admin, `$4` null) in progress with its lease run
/// out; an owner (`$4` its token hash) resolves only its own quarantined key.
macro_rules! resolvable {
    () => {
        " and (state = 'quarantined' or ($4::bytea is null and state = 'in_progress' \
           and lease_expires_at <= now())) and ($4::bytea is null or owner_token_hash = $4) "
    };
}

// $4 owner hash or null, $5 outcome, $6 outcome hash, $7 actor
const RESOLVE_COMPLETE: &str = concat!(
    "update idempotency_key set state = 'completed', outcome = $5, outcome_hash = $6, \
       completed_at = now(), updated_at = now(),",
    pg_window_after_completion!(),
    ",",
    pg_append_history!(
        "'event', 'resolved', 'resolution', 'completed', 'attempt', attempt, 'by', $7::text"
    ),
    "where",
    pg_scoped!(),
    resolvable!(),
    pg_live!(),
    "returning",
    pg_record!()
);

// $4 owner hash or null, $5 actor, $6 reason
const RESOLVE_RELEASE: &str = concat!(
    "delete from idempotency_key where",
    pg_scoped!(),
    resolvable!(),
    pg_live!(),
    "returning attempt,",
    pg_history_with!(
        "'event', 'resolved', 'resolution', 'released', 'attempt', attempt, 'by', $5::text, 'reason', $6::text"
    ),
    "as history"
);

const KEEP_RELEASE: &str = "insert into key_release \
     (tenant, operation, key, attempt, actor, reason, history) values ($1, $2, $3, $4, $5, $6, $7)";

// $1 tenant, $2 operation, $3 state, $4 lease expired only, $5 older than
// (ms), $6..$8 cursor, $9 limit
const LIST: &str = concat!(
    "select operation, key,",
    pg_record!(),
    "from idempotency_key where tenant = $1 \
       and ($2::text is null or operation = $2) \
       and ($3::text is null or state = $3) \
       and (not $4::bool or lease_expires_at <= now()) \
       and ($5::bigint is null or created_at <= now() - $5 * interval '1 millisecond') \
       and not",
    pg_gone!(),
    "and ($6::timestamptz is null or (created_at, operation, key) < ($6, $7::text, $8::text)) \
     order by created_at desc, operation desc, key desc limit $9"
);

/// Recovery in this dialect (see `recovery::Statements`).
pub(in crate::store) const POSTGRES: Statements = Statements {
    record_step: RECORD_STEP,
    quarantine: QUARANTINE,
    resolve_complete: RESOLVE_COMPLETE,
    resolve_release: RESOLVE_RELEASE,
    keep_release: KEEP_RELEASE,
    list: LIST,
};
