//! Webhook endpoints and deliveries in Postgres.

use super::Statements;

/// The columns a delivery row is read from.
macro_rules! pg_delivery_columns {
    () => {
        " id, tenant, endpoint_id, kind, subject, operation, key, attempt, occurred_at, \
          reason, rejections, state, attempts, next_attempt_at, last_attempt_at, last_status, \
          last_error, delivered_at, created_at "
    };
}

/// Queues what the select `$candidates` finds (columns in the order of the
/// insert's list) unless the endpoint already has it.
macro_rules! pg_queue {
    ($candidates:expr) => {
        concat!(
            "insert into webhook_delivery (tenant, endpoint_id, kind, subject, operation, key, \
               attempt, occurred_at, reason, rejections) \
             select * from (",
            $candidates,
            ") c where not exists (select 1 from webhook_delivery d where d.tenant = c.tenant \
               and d.endpoint_id = c.endpoint_id and d.kind = c.kind and d.subject = c.subject) \
             limit $1 on conflict on constraint webhook_delivery_once do nothing"
        )
    };
}

/// A key's occurrence: its attempt, that attempt's claim time, the key.
macro_rules! pg_key_subject {
    () => {
        " k.attempt || ':' || floor(extract(epoch from k.claimed_at) * 1000)::bigint || ':' || k.key "
    };
}

/// The endpoints that want event `$word`, joined to their class's keys.
macro_rules! pg_class_keys {
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

pub(in crate::store) const POSTGRES: Statements = Statements {
    insert_endpoint: "insert into webhook_endpoint (tenant, id, operation, url, secret, events, \
                        stuck_after_ms, spike_threshold, spike_window_ms) \
                      select $1, $2, $3, $4, $5, $6, $7, $8, $9 \
                      where (select count(*) from webhook_endpoint \
                             where tenant = $1 and operation = $3) < $10",
    endpoints: "select * from webhook_endpoint where tenant = $1 \
                and ($2::text is null or operation = $2) order by operation, created_at, id",
    endpoint: "select * from webhook_endpoint where tenant = $1 and id = $2",
    delete_endpoint: "delete from webhook_endpoint where tenant = $1 and id = $2",
    queue_quarantined: pg_queue!(concat!(
        "select e.tenant, e.id as endpoint_id, 'quarantined' as kind,",
        pg_key_subject!(),
        "as subject, k.operation, k.key, k.attempt, k.updated_at as occurred_at, \
           k.quarantine_reason as reason, null::bigint as rejections",
        pg_class_keys!("quarantined"),
        "and k.state = 'quarantined' and k.updated_at >= e.created_at \
         and k.updated_at >= now() - interval '1 day'"
    )),
    queue_stuck: pg_queue!(concat!(
        "select e.tenant, e.id as endpoint_id, 'stuck' as kind,",
        pg_key_subject!(),
        "as subject, k.operation, k.key, k.attempt, \
           k.claimed_at + e.stuck_after_ms * interval '1 millisecond' as occurred_at, \
           null::text as reason, null::bigint as rejections",
        pg_class_keys!("stuck"),
        "and k.state = 'in_progress' \
         and k.claimed_at + e.stuck_after_ms * interval '1 millisecond' <= now() \
         and k.claimed_at + e.stuck_after_ms * interval '1 millisecond' >= e.created_at"
    )),
    queue_taken_over: pg_queue!(concat!(
        "select e.tenant, e.id as endpoint_id, 'taken_over' as kind,",
        pg_key_subject!(),
        "as subject, k.operation, k.key, k.attempt, k.claimed_at as occurred_at, \
           null::text as reason, null::bigint as rejections",
        pg_class_keys!("taken_over"),
        "and k.attempt > 1 and k.claimed_at >= e.created_at \
         and k.claimed_at >= now() - interval '1 day'"
    )),
    queue_spikes: pg_queue!(
        "select s.tenant, s.endpoint_id, 'key_reused_spike' as kind, s.bucket::text as subject, \
           s.operation, null::text as key, null::integer as attempt, \
           to_timestamp(s.bucket * s.w / 1000.0) as occurred_at, null::text as reason, \
           s.n as rejections \
         from (select e.tenant, e.id as endpoint_id, e.operation, e.spike_window_ms as w, \
                 floor(extract(epoch from r.at) * 1000 / e.spike_window_ms)::bigint as bucket, \
                 count(*) as n \
               from webhook_endpoint e join key_rejections r \
                 on r.tenant = e.tenant and r.operation = e.operation \
               where (',' || e.events || ',') like '%,key_reused_spike,%' \
                 and r.at >= e.created_at and r.at >= now() - interval '1 day' \
               group by e.tenant, e.id, e.operation, e.spike_window_ms, e.spike_threshold, bucket \
               having count(*) >= e.spike_threshold) s"
    ),
    take_due: concat!(
        "update webhook_delivery set attempts = attempts + 1, \
           next_attempt_at = now() + $1 * interval '1 millisecond', \
           last_attempt_at = now(), updated_at = now() \
         where id in (select id from webhook_delivery where state = 'pending' \
           and next_attempt_at <= now() order by next_attempt_at, id limit $2 \
           for update skip locked) \
         returning",
        pg_delivery_columns!()
    ),
    finish: "update webhook_delivery set state = $4, \
               next_attempt_at = case when $5::bigint is null then next_attempt_at \
                 else now() + $5 * interval '1 millisecond' end, \
               last_status = $6, last_error = $7::text, \
               delivered_at = case when $4 = 'delivered' then now() end, updated_at = now() \
             where tenant = $1 and id = $2 and attempts = $3 and state = 'pending'",
    deliveries: concat!(
        "select",
        pg_delivery_columns!(),
        "from webhook_delivery where tenant = $1 and endpoint_id = $2 \
         order by created_at desc, id desc limit $3"
    ),
    counts: "select endpoint_id, state, count(*) as n from webhook_delivery \
             where tenant = $1 group by endpoint_id, state",
    prune: "delete from webhook_delivery where id in (select id from webhook_delivery \
              where state <> 'pending' and updated_at < now() - $1 * interval '1 millisecond' \
              limit $2)",
};
