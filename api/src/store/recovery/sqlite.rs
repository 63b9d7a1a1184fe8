//! SQLite statements for the hard cases: steps, quarantine, resolve, and
//! listing stuck keys — the same contract as the Postgres ones.

use super::Statements;

/// The JSON path of step `?5` (step names are `[a-z0-9._-]`, never quotes).
macro_rules! step_path {
    () => {
        " '$.\"' || ?5 || '\"' "
    };
}

macro_rules! has_step {
    () => {
        concat!(" (json_type(steps,", step_path!(), ") is not null) ")
    };
}

// ?4 owner hash, ?5 step, ?6 provider_ref
const RECORD_STEP: &str = concat!(
    "update idempotency_key set \
       steps = case when",
    has_step!(),
    "then steps else json_set(steps,",
    step_path!(),
    ", json_object('provider_ref', ?6, 'done_at', ",
    sqlite_now_text!(),
    ")) end, history = case when",
    has_step!(),
    "then history else",
    sqlite_history_with!("'event', 'step', 'attempt', attempt, 'step', ?5"),
    "end, updated_at = ",
    sqlite_now!(),
    " where",
    sqlite_scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?4",
    sqlite_live!(),
    "and (not",
    has_step!(),
    "or json_extract(steps, '$.\"' || ?5 || '\".provider_ref') = ?6) and (",
    has_step!(),
    "or (select count(*) from json_each(idempotency_key.steps)) < 64) returning",
    sqlite_record!()
);

// ?4 owner hash, ?5 reason
const QUARANTINE: &str = concat!(
    "update idempotency_key set state = 'quarantined', quarantine_reason = ?5, updated_at = ",
    sqlite_now!(),
    ", ",
    sqlite_append_history!(
        "'event', 'quarantined', 'attempt', attempt, 'reason', ?5, 'by', 'owner'"
    ),
    "where",
    sqlite_scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?4",
    sqlite_live!(),
    "returning",
    sqlite_record!()
);

/// Quarantined, or (for an admin, `?4` null) in progress with its lease run
/// out; an owner (`?4` its token hash) resolves only its own quarantined key.
macro_rules! resolvable {
    () => {
        concat!(
            " and (state = 'quarantined' or (?4 is null and state = 'in_progress' \
           and lease_expires_at <= ",
            sqlite_now!(),
            ")) and (?4 is null or owner_token_hash = ?4) "
        )
    };
}

// ?4 owner hash or null, ?5 outcome, ?6 outcome hash, ?7 actor
const RESOLVE_COMPLETE: &str = concat!(
    "update idempotency_key set state = 'completed', outcome = ?5, outcome_hash = ?6, \
       completed_at = ",
    sqlite_now!(),
    ", updated_at = ",
    sqlite_now!(),
    ",",
    sqlite_window_after_completion!(),
    ",",
    sqlite_append_history!(
        "'event', 'resolved', 'resolution', 'completed', 'attempt', attempt, 'by', ?7"
    ),
    "where",
    sqlite_scoped!(),
    resolvable!(),
    sqlite_live!(),
    "returning",
    sqlite_record!()
);

// ?4 owner hash or null, ?5 actor, ?6 reason
const RESOLVE_RELEASE: &str = concat!(
    "delete from idempotency_key where",
    sqlite_scoped!(),
    resolvable!(),
    sqlite_live!(),
    "returning attempt,",
    sqlite_history_with!(
        "'event', 'resolved', 'resolution', 'released', 'attempt', attempt, 'by', ?5, 'reason', ?6"
    ),
    "as history"
);

const KEEP_RELEASE: &str = concat!(
    "insert into key_release \
     (tenant, operation, key, released_at, attempt, actor, reason, history, created_at) \
     values (?1, ?2, ?3, ",
    sqlite_now!(),
    ", ?4, ?5, ?6, ?7, ",
    sqlite_now!(),
    ")"
);

// ?1 tenant, ?2 operation, ?3 state, ?4 lease expired only, ?5 older than
// (ms), ?6..?8 cursor, ?9 limit
const LIST: &str = concat!(
    "select operation, key,",
    sqlite_record!(),
    "from idempotency_key where tenant = ?1 \
       and (?2 is null or operation = ?2) \
       and (?3 is null or state = ?3) \
       and (not ?4 or lease_expires_at <= ",
    sqlite_now!(),
    ") \
       and (?5 is null or created_at <= ",
    sqlite_now!(),
    " - ?5) \
       and not",
    sqlite_gone!(),
    "and (?6 is null or (created_at, operation, key) < (?6, ?7, ?8)) \
     order by created_at desc, operation desc, key desc limit ?9"
);

/// Recovery in this dialect (see `recovery::Statements`).
pub(in crate::store) const SQLITE: Statements = Statements {
    record_step: RECORD_STEP,
    quarantine: QUARANTINE,
    resolve_complete: RESOLVE_COMPLETE,
    resolve_release: RESOLVE_RELEASE,
    keep_release: KEEP_RELEASE,
    list: LIST,
};
