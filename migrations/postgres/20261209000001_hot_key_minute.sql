-- The most claimed keys of each class per minute, for the dashboard's hot
-- keys: every node's usage roll-up writes the top few keys of its bounded
-- per-minute summary on each flush (keys claimed at least twice on that
-- node in that minute), one row per key, minute and node (a process's
-- random name), replaced by the node's newer, larger figure; the dashboard
-- sums the nodes. Pruned with the usage rows.
create table hot_key_minute (
    tenant      text        not null,
    operation   text        not null,
    minute      timestamptz not null,
    key         text        not null,
    node        text        not null,
    claims      bigint      not null,
    created_at  timestamptz not null default now(),
    constraint hot_key_minute_pk primary key (tenant, operation, minute, key, node)
);

-- The dashboard reads one tenant's recent minutes (the primary key leads
-- with the tenant but has the class before the minute); pruning reads by
-- minute alone.
create index hot_key_minute_tenant_minute_idx on hot_key_minute (tenant, minute);
create index hot_key_minute_minute_idx on hot_key_minute (minute);
