-- Per-tenant quotas on what a tenant keeps stored, so one tenant cannot fill
-- the database.
--
-- `tenant_quota` holds the operator's overrides (set with `idemkey quota`,
-- never through the API: a tenant's own admins must not raise their own
-- limit). A tenant without a row follows the server's defaults
-- (IDEMKEY_QUOTA_MAX_KEYS, IDEMKEY_QUOTA_MAX_OUTCOME_BYTES). In a row, a
-- null limit also follows the default, and -1 means "no limit" for this
-- tenant whatever the default says (a check keeps every other value a
-- count).
create table tenant_quota (
    tenant            text        not null,
    max_keys          bigint,
    max_outcome_bytes bigint,
    created_at        timestamptz not null default now(),
    updated_at        timestamptz not null default now(),
    constraint tenant_quota_pkey primary key (tenant),
    constraint tenant_quota_max_keys_check check (max_keys >= -1),
    constraint tenant_quota_max_outcome_bytes_check check (max_outcome_bytes >= -1)
);

-- What each tenant stores, as the quota worker last measured it: live
-- records (hot rows and routing entries alike; records past their window
-- are not counted, cleanup removes them), the outcome bytes still in the
-- database and those moved to the archive. Claims read these figures through
-- each node's in-memory standing, never per claim: a measurement is a scan
-- of the tenant's records, far too dear for the claim path. One row per
-- tenant, replaced by every measurement.
create table tenant_storage (
    tenant          text        not null,
    keys            bigint      not null,
    outcome_bytes   bigint      not null,
    archived_bytes  bigint      not null,
    measured_at     timestamptz not null,
    created_at      timestamptz not null default now(),
    constraint tenant_storage_pkey primary key (tenant)
);
