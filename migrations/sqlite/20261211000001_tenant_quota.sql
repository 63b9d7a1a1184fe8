-- Per-tenant quotas and the measured storage they are checked against: the
-- same tables as in migrations/postgres (see the comments there). In
-- `tenant_quota` a null limit follows the server's default and -1 means no
-- limit. Times are integer milliseconds since the Unix epoch (UTC).
create table tenant_quota (
    tenant            text    not null,
    max_keys          integer,
    max_outcome_bytes integer,
    created_at        integer not null default (cast((julianday('now') - 2440587.5) * 86400000 as integer)),
    updated_at        integer not null default (cast((julianday('now') - 2440587.5) * 86400000 as integer)),
    constraint tenant_quota_pkey primary key (tenant),
    constraint tenant_quota_max_keys_check check (max_keys >= -1),
    constraint tenant_quota_max_outcome_bytes_check check (max_outcome_bytes >= -1)
) strict, without rowid;

create table tenant_storage (
    tenant          text    not null,
    keys            integer not null,
    outcome_bytes   integer not null,
    archived_bytes  integer not null,
    measured_at     integer not null,
    created_at      integer not null default (cast((julianday('now') - 2440587.5) * 86400000 as integer)),
    constraint tenant_storage_pkey primary key (tenant)
) strict, without rowid;
