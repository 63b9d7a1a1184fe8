-- Rows for 64 tenants in every table a request reads (4,096 in the two
-- one-row-per-tenant quota tables, see there), so that the planner's
-- choices mean something: one tenant holds 1/64 of each table, one scoped
-- key one row in 64,000. Tenants t00..t63, classes op0..op3 (op0..op19 have
-- policies), keys k0000..k0249 per class; 7 in 10 completed, 2 in progress,
-- 1 quarantined; created over the last few hours.
--
-- 1 in 50 (completed) is past its window and waits for cleanup, as records
-- do between two runs of the worker. With none at all, and statistics that
-- know it, Postgres reads a renewal's one key through the cleanup's index
-- on `expires_at` (it expects no row there) rather than the primary key:
-- cheap while nothing waits, but it reads every tenant's gone records in
-- that partition once some do.
insert into idempotency_key (tenant, operation, key, fingerprint, state, attempt,
    owner_token_hash, claimed_at, lease_expires_at, lease_ms, outcome, outcome_hash,
    completed_at, quarantine_reason, expires_at, window_ms, tier_at, created_at,
    updated_at, history)
select format('t%s', lpad(t::text, 2, '0')), format('op%s', o),
       format('k%s', lpad(k::text, 4, '0')),
       sha256(convert_to(format('request %s/%s/%s', t, o, k), 'UTF8')),
       s.state, 1, sha256(convert_to(format('owner %s/%s/%s', t, o, k), 'UTF8')),
       c, case when k % 10 = 7 then now() + interval '30 seconds' else c + interval '30 seconds' end,
       30000,
       case when s.state = 'completed' then '{"status_code":201,"body":{"id":1}}' end,
       case when s.state = 'completed' then sha256(convert_to(format('outcome %s', k), 'UTF8')) end,
       case when s.state = 'completed' then c + interval '1 second' end,
       case when s.state = 'quarantined' then 'provider timed out' end,
       case when k % 50 = 0 then now() - interval '5 minutes' else c + interval '1 day' end,
       86400000, c + interval '1 hour', c, c,
       '[{"event":"claimed","attempt":1}]'
  from generate_series(0, 63) t, generate_series(0, 3) o, generate_series(0, 249) k,
       lateral (select now() - (k * 4 * 64 + o * 64 + t) * interval '1 second' as c) ct,
       lateral (select case when k % 10 < 7 then 'completed'
                            when k % 10 < 9 then 'in_progress'
                            else 'quarantined' end as state) s;

insert into operation_class (tenant, operation, policy)
select format('t%s', lpad(t::text, 2, '0')), format('op%s', o),
       '{"replay_window":"1d","lease":"30s"}'
  from generate_series(0, 63) t, generate_series(0, 19) o;

insert into fingerprint_rules (digest, rules)
select sha256(convert_to(format('rules %s', i), 'UTF8')), '{"include":["/amount"]}'
  from generate_series(0, 1999) i;

insert into key_release (tenant, operation, key, attempt, actor, reason, history)
select format('t%s', lpad(t::text, 2, '0')), format('op%s', o), format('r%s', k),
       1, 'admin', 'released by hand', '[]'
  from generate_series(0, 63) t, generate_series(0, 3) o, generate_series(0, 9) k;

insert into key_rejections (tenant, operation, key, at, mismatched)
select format('t%s', lpad(t::text, 2, '0')), format('op%s', o), format('k%s', k),
       now() - k * interval '1 minute', '{"pointers":["/amount"],"truncated":false}'
  from generate_series(0, 63) t, generate_series(0, 3) o, generate_series(0, 49) k;

insert into usage_minute (tenant, operation, minute, claims, replays)
select format('t%s', lpad(t::text, 2, '0')), format('op%s', o),
       date_trunc('minute', now()) - m * interval '1 minute', 10 + m, m
  from generate_series(0, 63) t, generate_series(0, 3) o, generate_series(0, 239) m;

insert into hot_key_minute (tenant, operation, minute, key, node, claims)
select format('t%s', lpad(t::text, 2, '0')), format('op%s', o),
       date_trunc('minute', now()) - m * interval '1 minute', format('k%s', h), 'node-a', 2 + h
  from generate_series(0, 63) t, generate_series(0, 3) o, generate_series(0, 59) m,
       generate_series(0, 1) h;

insert into archive_segment (name, lock_id, state, len, sha256, records)
select format('seg-%s', i), i, 'live', 1024, sha256(convert_to(format('segment %s', i), 'UTF8')), 10
  from generate_series(0, 199) i;

-- Webhooks: two endpoints per class of every tenant, each with 100
-- deliveries over the last day (8 in 10 delivered, 1 failed, 1 pending).
-- Ids as the API makes them, `wh_` and 20 hex digits; the cases name one
-- of t07's by the same expression.
insert into webhook_endpoint (tenant, id, operation, url, secret, events,
    stuck_after_ms, spike_threshold, spike_window_ms, created_at)
select format('t%s', lpad(t::text, 2, '0')),
       'wh_' || left(md5(format('endpoint %s/%s/%s', t, o, e)), 20), format('op%s', o),
       format('https://hooks.example.com/t%s/op%s/%s', t, o, e),
       'whsec_' || md5(format('secret %s/%s/%s', t, o, e)),
       'quarantined,stuck,taken_over,key_reused_spike', 60000, 20, 60000,
       now() - interval '2 days'
  from generate_series(0, 63) t, generate_series(0, 3) o, generate_series(0, 1) e;

insert into webhook_delivery (tenant, endpoint_id, kind, subject, operation, key, attempt,
    occurred_at, state, attempts, next_attempt_at, last_attempt_at, last_status,
    delivered_at, created_at, updated_at)
select format('t%s', lpad(t::text, 2, '0')),
       'wh_' || left(md5(format('endpoint %s/%s/%s', t, o, e)), 20),
       (array['quarantined', 'stuck', 'taken_over', 'key_reused_spike'])[d % 4 + 1],
       format('1:%s:k%s', d, lpad(d::text, 4, '0')), format('op%s', o),
       format('k%s', lpad(d::text, 4, '0')), 1, c, s.state,
       case when s.state = 'pending' then 3 else 1 end,
       case when s.state = 'pending' then c + interval '5 minutes' else c end,
       c, case when s.state = 'delivered' then 200 else 503 end,
       case when s.state = 'delivered' then c end, c, c
  from generate_series(0, 63) t, generate_series(0, 3) o, generate_series(0, 1) e,
       generate_series(0, 99) d,
       lateral (select now() - (d * 8 + o * 2 + e) * interval '100 seconds' as c) ct,
       lateral (select case when d % 10 < 8 then 'delivered'
                            when d % 10 = 8 then 'failed'
                            else 'pending' end as state) s;

-- Quotas: `tenant_storage` has one row per tenant that stores anything and
-- `tenant_quota` one per tenant the operator gave an override, so their
-- size is the deployment's number of tenants, not 64: with 64 rows the
-- whole table is one page and Postgres rightly reads it whole. Seeded for
-- 4,096 tenants (t00..t4095), one in four (t07 among them) overridden.
insert into tenant_storage (tenant, keys, outcome_bytes, archived_bytes, measured_at)
select format('t%s', case when t < 10 then '0' || t else t::text end),
       1000 + t, 40000 + t, 1000 * t, now() - interval '1 minute'
  from generate_series(0, 4095) t;

insert into tenant_quota (tenant, max_keys, max_outcome_bytes)
select format('t%s', case when t < 10 then '0' || t else t::text end),
       case when t % 8 = 3 then -1 else 100000 end, null
  from generate_series(0, 4095) t
 where t % 4 = 3;

analyze;
