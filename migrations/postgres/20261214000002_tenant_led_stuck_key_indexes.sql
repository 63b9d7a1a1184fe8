-- The lease watch's two partial indexes (in-progress keys by lease end,
-- quarantined keys by last change) now lead with the tenant, like every
-- other index of a tenant's rows.
--
-- Listing one tenant's keys in one state (`GET /v1/keys?state=...`, the
-- dashboard's stuck keys) chose them over the tenant's own index, because
-- they hold only rows of that state: the plan then read every tenant's
-- in-progress or quarantined entries and kept this tenant's (found by the
-- EXPLAIN test, tests/tests/explain_request_path.rs). Led by the tenant,
-- the same index serves that listing with the tenant as its search key,
-- and on a Postgres distributed by tenant (docs/architecture.md, "Past one
-- Postgres") each node's copy is searched by the tenants it holds.
--
-- The lease watch, which counts every tenant's stuck keys, still reads
-- only these partial indexes (their entries are the in-flight and
-- quarantined keys, few beside the table), now whole rather than by a
-- range of lease ends. SQLite keeps its indexes: one file serves one
-- process, is never distributed, and its watch keeps the range scan.
drop index idempotency_key_lease_watch_idx;
create index idempotency_key_lease_watch_idx
    on idempotency_key (tenant, lease_expires_at) where state = 'in_progress';

drop index idempotency_key_quarantined_idx;
create index idempotency_key_quarantined_idx
    on idempotency_key (tenant, updated_at) where state = 'quarantined';
