//! The claim path in SQLite (see `claims::Statements`): the same statements
//! as Postgres, on SQLite's clock (`sqlite_now!`).

use super::Statements;

/// The claim path in this dialect (see `claims::Statements`).
pub(in crate::store) const SQLITE: Statements = Statements {
    insert_claim: INSERT_CLAIM,
    find: FIND,
    renew_expired: RENEW_EXPIRED,
    take_over: TAKE_OVER,
    quarantine_expired: QUARANTINE_EXPIRED,
    complete: COMPLETE,
    heartbeat: HEARTBEAT,
    release: RELEASE,
};

// ?4 fingerprint, ?5 owner hash, ?6 lease ms, ?7 window ms, ?8 tier-after ms,
// ?9 the fingerprint rules' digest (null: the defaults)
const INSERT_CLAIM: &str = concat!(
    "insert into idempotency_key (tenant, operation, key, fingerprint, state, attempt, \
       owner_token_hash, claimed_at, lease_expires_at, lease_ms, expires_at, window_ms, tier_at, \
       created_at, updated_at, rules_digest, field_digests, history) \
     values (?1, ?2, ?3, ?4, 'in_progress', 1, ?5, ",
    sqlite_now!(),
    ", ",
    sqlite_now!(),
    " + ?6, ?6, ",
    sqlite_now!(),
    " + ?7, ?7, ",
    sqlite_now!(),
    " + ?8, ",
    sqlite_now!(),
    ", ",
    sqlite_now!(),
    ", ?9, ?10, \
       json_array(json_object('event', 'claimed', 'attempt', 1, 'at', ",
    sqlite_now_text!(),
    "))) on conflict do nothing returning",
    sqlite_record!()
);

const FIND: &str = concat!(
    "select",
    sqlite_record!(),
    "from idempotency_key where",
    sqlite_scoped!()
);

const RENEW_EXPIRED: &str = concat!(
    "update idempotency_key set fingerprint = ?4, state = 'in_progress', attempt = 1, \
       owner_token_hash = ?5, claimed_at = ", sqlite_now!(), ", lease_expires_at = ", sqlite_now!(), " + ?6, lease_ms = ?6, \
       outcome = null, outcome_hash = null, completed_at = null, quarantine_reason = null, \
       expires_at = ", sqlite_now!(), " + ?7, window_ms = ?7, tier_at = ", sqlite_now!(), " + ?8, created_at = ", sqlite_now!(), ", updated_at = ", sqlite_now!(), ", steps = '{}', segment = null, \
       segment_offset = null, segment_len = null, segment_sha256 = null, tiered_at = null, \
       rules_digest = ?9, field_digests = ?10, \
       history = json_array(json_object('event', 'claimed', 'attempt', 1, 'renewed', json('true'), 'at', ",
    sqlite_now_text!(),
    ")) where",
    sqlite_scoped!(),
    "and",
    sqlite_gone!(),
    "returning",
    sqlite_record!()
);

// ?4 seen attempt, ?5 new owner hash, ?6 lease ms, ?7 seen owner hash (the
// version; the attempt alone restarts at 1 when a record is written anew)
const TAKE_OVER: &str = concat!(
    "update idempotency_key set attempt = attempt + 1, owner_token_hash = ?5, claimed_at = ",
    sqlite_now!(),
    ", \
       lease_expires_at = ",
    sqlite_now!(),
    " + ?6, lease_ms = ?6, updated_at = ",
    sqlite_now!(),
    ", ",
    sqlite_append_history!("'event', 'taken_over', 'attempt', attempt + 1"),
    "where",
    sqlite_scoped!(),
    "and state = 'in_progress' and attempt = ?4 and owner_token_hash = ?7 \
       and lease_expires_at <= ",
    sqlite_now!(),
    " returning",
    sqlite_record!()
);

// ?4 seen attempt, ?5 seen owner hash
const QUARANTINE_EXPIRED: &str = concat!(
    "update idempotency_key set state = 'quarantined', quarantine_reason = 'lease expired', \
       updated_at = ", sqlite_now!(), ", ",
    sqlite_append_history!("'event', 'quarantined', 'attempt', attempt, 'reason', 'lease expired', 'by', 'lease watch'"),
    "where",
    sqlite_scoped!(),
    "and state = 'in_progress' and attempt = ?4 and owner_token_hash = ?5 \
       and lease_expires_at <= ", sqlite_now!(), " returning",
    sqlite_record!()
);

// ?4 owner hash, ?5 outcome, ?6 outcome hash
const COMPLETE: &str = concat!(
    "update idempotency_key set state = 'completed', outcome = ?5, outcome_hash = ?6, \
       completed_at = ",
    sqlite_now!(),
    ", updated_at = ",
    sqlite_now!(),
    ",",
    sqlite_window_after_completion!(),
    ",",
    sqlite_append_history!("'event', 'completed', 'attempt', attempt"),
    "where",
    sqlite_scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?4",
    sqlite_live!(),
    "returning",
    sqlite_record!()
);

// ?4 owner hash, ?5 lease ms or null
const HEARTBEAT: &str = concat!(
    "update idempotency_key set lease_expires_at = ",
    sqlite_now!(),
    " + coalesce(?5, lease_ms), updated_at = ",
    sqlite_now!(),
    " \
     where",
    sqlite_scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?4",
    sqlite_live!(),
    "returning",
    sqlite_record!()
);

// ?4 owner hash
const RELEASE: &str = concat!(
    "delete from idempotency_key where",
    sqlite_scoped!(),
    "and state = 'in_progress' and owner_token_hash = ?4"
);
