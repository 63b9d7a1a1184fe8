//! Webhook endpoints and deliveries in SQLite (times in epoch
//! milliseconds). One node owns the file, so taking due rows needs no
//! lock beyond the statement's own.

use super::Statements;

macro_rules! sqlite_delivery_columns {
    () => {
        " id, tenant, endpoint_id, kind, subject, operation, key, attempt, occurred_at, \
          reason, rejections, state, attempts, next_attempt_at, last_attempt_at, last_status, \
          last_error, delivered_at, created_at "
    };
}

/// Queues what the select `$candidates` finds unless the endpoint already
/// has it (the `where` before `on conflict` is what SQLite's grammar asks
/// of an upsert from a select).
macro_rules! sqlite_queue {
    ($candidates:expr) => {
        concat!(
            "insert into webhook_delivery (tenant, endpoint_id, kind, subject, operation, key, \
               attempt, occurred_at, reason, rejections, next_attempt_at, created_at, updated_at) \
             select *,",
            sqlite_now!(),
            ",",
            sqlite_now!(),
            ",",
            sqlite_now!(),
            "from (select * from (",
            $candidates,
            ") c where not exists (select 1 from webhook_delivery d where d.tenant = c.tenant \
               and d.endpoint_id = c.endpoint_id and d.kind = c.kind and d.subject = c.subject) \
             limit ?1) where true on conflict (tenant, endpoint_id, kind, subject) do nothing"
        )
    };
}

macro_rules! sqlite_key_subject {
    () => {
        " k.attempt || ':' || k.claimed_at || ':' || k.key "
    };
}

macro_rules! sqlite_class_keys {
    ($word:literal) => {
        concat!(
            " from webhook_endpoint e join idempotency_key k \
               on k.tenant = e.tenant and k.operation = e.operation \
             where (',' || e.events || ',') like '%,",
            $word,
            ",%' "
        )
    };
}

/// A day ago, in epoch milliseconds.
macro_rules! sqlite_day_ago {
    () => {
        concat!("(", sqlite_now!(), " - 86400000)")
    };
}

pub(in crate::store) const SQLITE: Statements = Statements {
    insert_endpoint: concat!(
        "insert into webhook_endpoint (tenant, id, operation, url, secret, events, \
           stuck_after_ms, spike_threshold, spike_window_ms, created_at) \
         select ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,",
        sqlite_now!(),
        "where (select count(*) from webhook_endpoint where tenant = ?1 and operation = ?3) < ?10"
    ),
    endpoints: "select * from webhook_endpoint where tenant = ?1 \
                and (?2 is null or operation = ?2) order by operation, created_at, id",
    endpoint: "select * from webhook_endpoint where tenant = ?1 and id = ?2",
    delete_endpoint: "delete from webhook_endpoint where tenant = ?1 and id = ?2",
    queue_quarantined: sqlite_queue!(concat!(
        "select e.tenant, e.id as endpoint_id, 'quarantined' as kind,",
        sqlite_key_subject!(),
        "as subject, k.operation, k.key, k.attempt, k.updated_at as occurred_at, \
           k.quarantine_reason as reason, null as rejections",
        sqlite_class_keys!("quarantined"),
        "and k.state = 'quarantined' and k.updated_at >= e.created_at and k.updated_at >=",
        sqlite_day_ago!()
    )),
    queue_stuck: sqlite_queue!(concat!(
        "select e.tenant, e.id as endpoint_id, 'stuck' as kind,",
        sqlite_key_subject!(),
        "as subject, k.operation, k.key, k.attempt, k.claimed_at + e.stuck_after_ms as occurred_at, \
           null as reason, null as rejections",
        sqlite_class_keys!("stuck"),
        "and k.state = 'in_progress' and k.claimed_at + e.stuck_after_ms >= e.created_at \
         and k.claimed_at + e.stuck_after_ms <=",
        sqlite_now!()
    )),
    queue_taken_over: sqlite_queue!(concat!(
        "select e.tenant, e.id as endpoint_id, 'taken_over' as kind,",
        sqlite_key_subject!(),
        "as subject, k.operation, k.key, k.attempt, k.claimed_at as occurred_at, \
           null as reason, null as rejections",
        sqlite_class_keys!("taken_over"),
        "and k.attempt > 1 and k.claimed_at >= e.created_at and k.claimed_at >=",
        sqlite_day_ago!()
    )),
    queue_spikes: sqlite_queue!(concat!(
        "select s.tenant, s.endpoint_id, 'key_reused_spike' as kind, \
           cast(s.bucket as text) as subject, s.operation, null as key, null as attempt, \
           s.bucket * s.w as occurred_at, null as reason, s.n as rejections \
         from (select e.tenant, e.id as endpoint_id, e.operation, e.spike_window_ms as w, \
                 r.at / e.spike_window_ms as bucket, count(*) as n \
               from webhook_endpoint e join key_rejections r \
                 on r.tenant = e.tenant and r.operation = e.operation \
               where (',' || e.events || ',') like '%,key_reused_spike,%' \
                 and r.at >= e.created_at and r.at >=",
        sqlite_day_ago!(),
        "group by e.tenant, e.id, e.operation, e.spike_window_ms, e.spike_threshold, bucket \
         having count(*) >= e.spike_threshold) s"
    )),
    take_due: concat!(
        "update webhook_delivery set attempts = attempts + 1, next_attempt_at =",
        sqlite_now!(),
        "+ ?1, last_attempt_at =",
        sqlite_now!(),
        ", updated_at =",
        sqlite_now!(),
        "where id in (select id from webhook_delivery where state = 'pending' \
           and next_attempt_at <=",
        sqlite_now!(),
        "order by next_attempt_at, id limit ?2) returning",
        sqlite_delivery_columns!()
    ),
    finish: concat!(
        "update webhook_delivery set state = ?4, \
           next_attempt_at = case when ?5 is null then next_attempt_at else",
        sqlite_now!(),
        "+ ?5 end, last_status = ?6, last_error = ?7, \
           delivered_at = case when ?4 = 'delivered' then",
        sqlite_now!(),
        "end, updated_at =",
        sqlite_now!(),
        "where tenant = ?1 and id = ?2 and attempts = ?3 and state = 'pending'"
    ),
    deliveries: concat!(
        "select",
        sqlite_delivery_columns!(),
        "from webhook_delivery where tenant = ?1 and endpoint_id = ?2 \
         order by created_at desc, id desc limit ?3"
    ),
    counts: "select endpoint_id, state, count(*) as n from webhook_delivery \
             where tenant = ?1 group by endpoint_id, state",
    prune: concat!(
        "delete from webhook_delivery where id in (select id from webhook_delivery \
           where state <> 'pending' and updated_at <",
        sqlite_now!(),
        "- ?1 limit ?2)"
    ),
};
