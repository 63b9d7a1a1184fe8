//! The claim path in Postgres (see `claims::Statements`).

use super::Statements;

/// The claim path in this dialect (see `claims::Statements`).
pub(in crate::store) const POSTGRES: Statements = Statements {
    insert_claim: INSERT_CLAIM,
    find: FIND,
    renew_expired: RENEW_EXPIRED,
    take_over: TAKE_OVER,
    quarantine_expired: QUARANTINE_EXPIRED,
    complete: COMPLETE,
    heartbeat: HEARTBEAT,
    release: RELEASE,
};

/// The statements a claim and a completion issue, public so the benchmark
/// (`bench/`) replays exactly this SQL with pgbench to measure the database's
/// own limit: the script is generated from these constants and cannot drift.
pub mod sql {
    pub use super::{COMPLETE, COMPLETE_BATCH, FIND, INSERT_CLAIM, INSERT_CLAIMS};
}

/// A new claim: `$1..$3` the scoped key, `$4` fingerprint, `$5` owner hash,
/// `$6` lease, `$7` replay window, `$8` tiering delay (ms), `$9` the
/// fingerprint rules' digest (null: the defaults), `$10` the field digests
/// (null: none). No row: taken.
pub const INSERT_CLAIM: &str = concat!(
    "insert into idempotency_key (tenant, operation, key, fingerprint, state, attempt, \
       owner_token_hash, claimed_at, lease_expires_at, lease_ms, expires_at, window_ms, tier_at, \
       created_at, updated_at, rules_digest, field_digests, history) \
     values ($1, $2, $3, $4, 'in_progress', 1, $5, now(), now() + $6 * interval '1 millisecond', $6, \
       now() + $7 * interval '1 millisecond', $7, now() + $8 * interval '1 millisecond', now(), now(), $9, $10, \
       jsonb_build_array(jsonb_build_object('event', 'claimed', 'attempt', 1, 'at', ",
    pg_now_text!(),
    "))::text) on conflict do nothing returning",
    pg_record!()
);

/// Many new claims in one statement (see `store::batch`): the arrays `$1`
/// tenants, `$2` operations, `$3` keys, `$4` fingerprints, `$5` owner
/// hashes, `$6` leases, `$7` windows, `$8` tiering delays (ms), `$9` rules
/// digests and `$10` field digests (elements may be null), element by
/// element as `INSERT_CLAIM` takes them. Inserted in scoped-key order, so
/// two batches wait on each other's keys in one order and never deadlock.
/// A row comes back for each claim that won its key, named by its owner
/// hash (random per claim); a key taken, or claimed twice in the batch
/// (the second loses, as it would a moment later), returns nothing.
pub const INSERT_CLAIMS: &str = concat!(
    "insert into idempotency_key (tenant, operation, key, fingerprint, state, attempt, \
       owner_token_hash, claimed_at, lease_expires_at, lease_ms, expires_at, window_ms, tier_at, \
       created_at, updated_at, rules_digest, field_digests, history) \
     select b.tenant, b.operation, b.key, b.fingerprint, 'in_progress', 1, b.owner, now(), \
       now() + b.lease * interval '1 millisecond', b.lease, \
       now() + b.window_ms * interval '1 millisecond', b.window_ms, \
       now() + b.tier * interval '1 millisecond', now(), now(), b.rules, b.digests, \
       jsonb_build_array(jsonb_build_object('event', 'claimed', 'attempt', 1, 'at', ",
    pg_now_text!(),
    "))::text \
     from unnest($1::text[], $2::text[], $3::text[], $4::bytea[], $5::bytea[], $6::bigint[], \
       $7::bigint[], $8::bigint[], $9::bytea[], $10::text[]) \
       as b(tenant, operation, key, fingerprint, owner, lease, window_ms, tier, rules, digests) \
     order by b.tenant, b.operation, b.key \
     on conflict do nothing returning",
    pg_record!()
);

/// Many completions in one call: `$1`..`$6` arrays of what `COMPLETE` takes
/// as `$1`..`$6`, sorted by scoped key. Each element runs `COMPLETE`'s
/// guarded update in turn (the function `idemkey_complete_batch`, in the
/// migrations); a row comes back for each that matched, `i` its position
/// from 1, with `waited` as `COMPLETE` returns it.
pub const COMPLETE_BATCH: &str =
    "select * from idemkey_complete_batch($1::text[], $2::text[], $3::text[], $4::bytea[], \
       $5::text[], $6::bytea[])";

/// The record of the scoped key `$1..$3` (the replay read).
pub const FIND: &str = concat!(
    "select",
    pg_record!(),
    "from idempotency_key where",
    pg_scoped!()
);

const RENEW_EXPIRED: &str = concat!(
    "update idempotency_key set fingerprint = $4, state = 'in_progress', attempt = 1, \
       owner_token_hash = $5, claimed_at = now(), lease_expires_at = now() + $6 * interval '1 millisecond', \
       lease_ms = $6, outcome = null, outcome_hash = null, completed_at = null, quarantine_reason = null, \
       expires_at = now() + $7 * interval '1 millisecond', window_ms = $7, \
       tier_at = now() + $8 * interval '1 millisecond', \
       created_at = now(), updated_at = now(), steps = '{}', segment = null, \
       segment_offset = null, segment_len = null, segment_sha256 = null, tiered_at = null, \
       rules_digest = $9, field_digests = $10, \
       history = jsonb_build_array(jsonb_build_object('event', 'claimed', 'attempt', 1, 'renewed', true, 'at', ",
    pg_now_text!(),
    "))::text where",
    pg_scoped!(),
    "and",
    pg_gone!(),
    "returning",
    pg_record!()
);

/// `$4` the attempt and `$7` the owner hash seen (the version; the attempt
/// alone restarts at 1 when a record is written anew), `$5` the new owner
/// hash, `$6` lease.
const TAKE_OVER: &str = concat!(
    "update idempotency_key set attempt = attempt + 1, owner_token_hash = $5, claimed_at = now(), \
       lease_expires_at = now() + $6 * interval '1 millisecond', lease_ms = $6, updated_at = now(), ",
    pg_append_history!("'event', 'taken_over', 'attempt', attempt + 1"),
    "where",
    pg_scoped!(),
    "and state = 'in_progress' and attempt = $4 and owner_token_hash = $7 \
       and lease_expires_at <= now() returning",
    pg_record!()
);

/// The owner (`$4` its token hash) stores outcome `$5` with hash `$6`.
/// `waited`: whether a node waits on the key (see the key-waiters
/// migration), asked after the row is changed so no registration that
/// committed before it is missed.
pub const COMPLETE: &str = concat!(
    "update idempotency_key set state = 'completed', outcome = $5, outcome_hash = $6, \
       completed_at = now(), updated_at = now(),",
    pg_window_after_completion!(),
    ",",
    pg_append_history!("'event', 'completed', 'attempt', attempt"),
    "where",
    pg_scoped!(),
    "and state = 'in_progress' and owner_token_hash = $4",
    pg_live!(),
    "returning",
    pg_record!(),
    ", idemkey_waited(tenant, operation, key) as waited"
);

const QUARANTINE_EXPIRED: &str = concat!(
    "update idempotency_key set state = 'quarantined', quarantine_reason = 'lease expired', \
       updated_at = now(), ",
    pg_append_history!("'event', 'quarantined', 'attempt', attempt, 'reason', 'lease expired', 'by', 'lease watch'"),
    "where",
    pg_scoped!(),
    "and state = 'in_progress' and attempt = $4 and owner_token_hash = $5 \
       and lease_expires_at <= now() returning",
    pg_record!()
);

const HEARTBEAT: &str = concat!(
    "update idempotency_key set \
       lease_expires_at = now() + coalesce($5, lease_ms) * interval '1 millisecond', \
       updated_at = now() \
     where",
    pg_scoped!(),
    "and state = 'in_progress' and owner_token_hash = $4",
    pg_live!(),
    "returning",
    pg_record!()
);

const RELEASE: &str = concat!(
    "delete from idempotency_key where",
    pg_scoped!(),
    "and state = 'in_progress' and owner_token_hash = $4"
);
