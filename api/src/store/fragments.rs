//! SQL fragments both dialects' statements are assembled from (with
//! `concat!`), each dialect's under its prefix (`pg_`, `sqlite_`): the
//! columns of a record, the scoped key, what "gone" means, the audit trail.
//! Macros, because `concat!` takes only literals; `#[macro_use]`, so every
//! capability's statements below `store` see them.

/// A record is gone — its key new again — once its replay window is over:
/// a completed record at `expires_at`; one never completed (in progress or
/// quarantined) only when, in addition, its last lease ended a whole window
/// ago. The same rule as `domain::protected_until`, in each dialect, on the
/// statement's clock.
macro_rules! pg_gone {
    () => {
        " (expires_at <= now() and (state = 'completed' \
           or lease_expires_at + window_ms * interval '1 millisecond' <= now())) "
    };
}

/// SQLite's clock in epoch milliseconds. SQLite reads the clock once per
/// statement, so every use within one statement is the same moment.
macro_rules! sqlite_now {
    () => {
        " (cast(round((julianday('now') - 2440587.5) * 86400000.0) as integer)) "
    };
}

macro_rules! sqlite_gone {
    () => {
        concat!(
            " (expires_at <=",
            sqlite_now!(),
            "and (state = 'completed' or lease_expires_at + window_ms <=",
            sqlite_now!(),
            ")) "
        )
    };
}

// Postgres.

/// Columns every statement returns, plus the database clock.
macro_rules! pg_record {
    () => {
        " state, fingerprint, attempt, owner_token_hash, claimed_at, lease_expires_at, \
          outcome, outcome_hash, completed_at, quarantine_reason, expires_at, created_at, \
          updated_at, steps, history, segment, segment_offset, segment_len, \
          segment_sha256, tiered_at, rules_digest, window_ms, field_digests, now() as observed_at "
    };
}

/// The database clock as RFC 3339 text, for audit events.
macro_rules! pg_now_text {
    () => {
        "to_char(now() at time zone 'utc', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"
    };
}

/// The audit trail with one more event: the first event (the claim) and
/// the latest 49 are kept.
macro_rules! pg_history_with {
    ($($event:expr),+) => {
        concat!(
            " (case when jsonb_array_length(history::jsonb) >= 50 \
               then history::jsonb - 1 else history::jsonb end \
               || jsonb_build_array(jsonb_build_object(",
            $($event,)+
            ", 'at', ", pg_now_text!(), ")))::text "
        )
    };
}

macro_rules! pg_append_history {
    ($($event:expr),+) => {
        concat!(" history = ", pg_history_with!($($event),+))
    };
}

macro_rules! pg_scoped {
    () => {
        " tenant = $1 and operation = $2 and key = $3 "
    };
}

/// Not gone (see `pg_gone!`): a record that is gone is gone for every
/// caller, its owner included.
macro_rules! pg_live {
    () => {
        concat!(" and not", pg_gone!())
    };
}

/// A completion's new window end: at least a whole window after now.
macro_rules! pg_window_after_completion {
    () => {
        " expires_at = greatest(expires_at, now() + window_ms * interval '1 millisecond') "
    };
}

// SQLite.

macro_rules! sqlite_record {
    () => {
        concat!(
            " state, fingerprint, attempt, owner_token_hash, claimed_at, lease_expires_at, \
          outcome, outcome_hash, completed_at, quarantine_reason, expires_at, created_at, \
          updated_at, steps, history, segment, segment_offset, segment_len, \
          segment_sha256, tiered_at, rules_digest, window_ms, field_digests, ",
            sqlite_now!(),
            " as observed_at "
        )
    };
}

/// The statement's clock as RFC 3339 text, for audit events (the same
/// moment as `sqlite_now!`: SQLite reads the clock once per statement).
macro_rules! sqlite_now_text {
    () => {
        "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
    };
}

/// The audit trail with one more event: the first event (the claim) and
/// the latest 49 are kept.
macro_rules! sqlite_history_with {
    ($($event:expr),+) => {
        concat!(
            " json_insert(case when json_array_length(history) >= 50 \
               then json_remove(history, '$[1]') else history end, '$[#]', json_object(",
            $($event,)+
            ", 'at', ", sqlite_now_text!(), ")) "
        )
    };
}

macro_rules! sqlite_append_history {
    ($($event:expr),+) => {
        concat!(" history = ", sqlite_history_with!($($event),+))
    };
}

// ?1 tenant, ?2 operation, ?3 key; later numbers per statement, the same as
// in the Postgres dialect.
macro_rules! sqlite_scoped {
    () => {
        " tenant = ?1 and operation = ?2 and key = ?3 "
    };
}

/// Not gone (see `sqlite_gone!`).
macro_rules! sqlite_live {
    () => {
        concat!(" and not", sqlite_gone!())
    };
}

/// A completion's new window end: at least a whole window after now.
macro_rules! sqlite_window_after_completion {
    () => {
        concat!(
            " expires_at = max(expires_at, ",
            sqlite_now!(),
            " + window_ms) "
        )
    };
}
