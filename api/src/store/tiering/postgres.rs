//! Tiering and cleanup in Postgres: `for update skip locked` so that every
//! node can run the workers at once without picking the same rows, an
//! advisory lock per segment held by the transaction writing it, and a
//! two-step condemn.

use super::Statements;

/// Segments nothing points at: an orphan of a dead tiering run (`pending`,
/// and its writer's advisory lock is free), a `live` one whose records are
/// all gone, or a `deleting` one whose deletion was interrupted.
macro_rules! unused_segment {
    () => {
        "((s.state = 'pending' and pg_try_advisory_xact_lock(s.lock_id)) \
           or (s.state = 'live' \
               and not exists (select 1 from idempotency_key k where k.segment = s.name)) \
           or (s.state = 'deleting' and s.updated_at < now() - interval '2 minutes'))"
    };
}

pub(in crate::store) const POSTGRES: Statements = Statements {
    select_due: "\
        select tenant, operation, key, fingerprint, outcome, outcome_hash, expires_at \
          from idempotency_key \
         where state = 'completed' and segment is null and tier_at <= now() and expires_at > now() \
         order by tier_at limit $1 for update skip locked",
    // The rows stay locked, this batch's, until its transaction ends.
    read_due_in_transaction: true,
    lock_segment: Some("select pg_advisory_xact_lock($1)"),
    reserve: "insert into archive_segment (name, lock_id, state) values ($1, $2, 'pending')",
    make_live: "\
        update archive_segment set state = 'live', len = $2, sha256 = $3, records = $4, \
               updated_at = now() \
         where name = $1 and state = 'pending'",
    slim: concat!(
        "update idempotency_key k set outcome = null, segment = $1, segment_offset = u.off, \
                segment_len = u.len, segment_sha256 = decode(u.sha, 'hex'), tiered_at = now(),",
        pg_append_history!("'event', 'tiered', 'segment', $1::text"),
        "from json_to_recordset($2::json) \
               as u(tenant text, operation text, key text, outcome_hash text, off bigint, len bigint, \
                    sha text) \
         where k.tenant = u.tenant and k.operation = u.operation and k.key = u.key \
           and k.state = 'completed' and k.segment is null \
           and k.outcome_hash = decode(u.outcome_hash, 'hex')"
    ),
    // Records that are gone (`pg_gone!`: a record never completed stays a
    // whole window after its last lease), oldest window end first.
    delete_expired: concat!(
        "with doomed as ( \
            select tenant, operation, key from idempotency_key \
             where",
        pg_gone!(),
        "order by expires_at limit $1 for update skip locked) \
        delete from idempotency_key k using doomed d \
         where k.tenant = d.tenant and k.operation = d.operation and k.key = d.key"
    ),
    // Step one of condemning, in a transaction: lock the candidates. Its
    // snapshot may predate a tiering run that committed while it ran (a
    // `pending` segment whose writer just finished looks like an orphan, and
    // the re-check of a row locked after its update does not see the rows
    // the same commit routed to it), so this only picks and locks.
    condemn_candidates: Some(concat!(
        "select s.name from archive_segment s where ",
        unused_segment!(),
        " order by s.created_at limit $1 for update skip locked"
    )),
    // Step two, in the same transaction: with the candidates locked no
    // tiering run can change them any more, and this statement's fresh
    // snapshot sees every run that committed before the locks were taken.
    // Only what still qualifies is condemned.
    condemn: concat!(
        "update archive_segment s set state = 'deleting', updated_at = now() \
          where s.name in (select json_array_elements_text($1::json)) and ",
        unused_segment!(),
        " returning s.name"
    ),
    forget: "delete from archive_segment where name = $1 and state = 'deleting'",
    lag: concat!(
        "select (select min(tier_at) from idempotency_key \
                 where state = 'completed' and segment is null and tier_at <= now() \
                   and expires_at > now()) as tiering_due, \
               (select min(case when state = 'completed' then expires_at \
                           else greatest(expires_at, \
                                         lease_expires_at + window_ms * interval '1 millisecond') end) \
                  from idempotency_key where",
        pg_gone!(),
        ") as cleanup_due, \
               count(*) as segments, \
               coalesce(sum(records), 0)::bigint as records, \
               coalesce(sum(len), 0)::bigint as bytes, \
               now() as now \
          from archive_segment where state = 'live'"
    ),
};
