//! Tiering and cleanup in SQLite: one process, whose worker runs tiering and
//! cleanup one after the other, so there is nothing to lock against. The
//! batch is read before the tiering transaction (holding SQLite's single
//! write lock across an upload would stall every claim, and a transaction
//! that has read cannot write once another connection has); the slimming
//! transaction is short, and guarded per row by the outcome hash that was
//! packed. Every `pending` segment cleanup sees is an orphan.

use super::Statements;

pub(in crate::store) const SQLITE: Statements = Statements {
    select_due: concat!(
        "select tenant, operation, key, fingerprint, outcome, outcome_hash, expires_at \
           from idempotency_key \
          where state = 'completed' and segment is null and tier_at <=",
        sqlite_now!(),
        "and expires_at >",
        sqlite_now!(),
        "order by tier_at limit ?1"
    ),
    read_due_in_transaction: false,
    lock_segment: None,
    reserve: concat!(
        "insert into archive_segment (name, lock_id, state, created_at, updated_at) \
         values (?1, ?2, 'pending',",
        sqlite_now!(),
        ",",
        sqlite_now!(),
        ")"
    ),
    make_live: concat!(
        "update archive_segment set state = 'live', len = ?2, sha256 = ?3, records = ?4, \
                updated_at =",
        sqlite_now!(),
        "where name = ?1 and state = 'pending'"
    ),
    slim: concat!(
        "update idempotency_key set outcome = null, segment = ?1, segment_offset = u.off, \
                segment_len = u.len, segment_sha256 = unhex(u.sha), tiered_at =",
        sqlite_now!(),
        ",",
        sqlite_append_history!("'event', 'tiered', 'segment', ?1"),
        "from (select value ->> 'tenant' as tenant, value ->> 'operation' as operation, \
                        value ->> 'key' as key, value ->> 'outcome_hash' as outcome_hash, \
                        value ->> 'off' as off, value ->> 'len' as len, value ->> 'sha' as sha \
                   from json_each(?2)) as u \
          where idempotency_key.tenant = u.tenant and idempotency_key.operation = u.operation \
            and idempotency_key.key = u.key and idempotency_key.state = 'completed' \
            and idempotency_key.segment is null \
            and idempotency_key.outcome_hash = unhex(u.outcome_hash)"
    ),
    delete_expired: concat!(
        "delete from idempotency_key where (tenant, operation, key) in ( \
            select tenant, operation, key from idempotency_key \
             where",
        sqlite_gone!(),
        "order by expires_at limit ?1)"
    ),
    condemn_candidates: None,
    // ?1 limit: every pending segment is an orphan here (see the module).
    condemn: concat!(
        "update archive_segment set state = 'deleting', updated_at =",
        sqlite_now!(),
        "where name in ( \
            select s.name from archive_segment s \
             where s.state in ('pending', 'deleting') \
                or (s.state = 'live' \
                    and not exists (select 1 from idempotency_key k where k.segment = s.name)) \
             order by s.created_at limit ?1) \
        returning name"
    ),
    forget: "delete from archive_segment where name = ?1 and state = 'deleting'",
    lag: concat!(
        "select (select min(tier_at) from idempotency_key \
                 where state = 'completed' and segment is null and tier_at <=",
        sqlite_now!(),
        "and expires_at >",
        sqlite_now!(),
        ") as tiering_due, \
               (select min(case when state = 'completed' then expires_at \
                           else max(expires_at, lease_expires_at + window_ms) end) \
                  from idempotency_key where",
        sqlite_gone!(),
        ") as cleanup_due, \
               count(*) as segments, \
               coalesce(sum(records), 0) as records, \
               coalesce(sum(len), 0) as bytes,",
        sqlite_now!(),
        "as now from archive_segment where state = 'live'"
    ),
};
