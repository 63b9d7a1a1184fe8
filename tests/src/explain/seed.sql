-- Rows for 64 tenants in every table a request reads, so that the planner's
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

analyze;
