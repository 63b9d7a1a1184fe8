-- Usage figures for the dashboard (SPEC section 8): per tenant, operation
-- class and minute, what the claim and release calls came to.
--
-- Every node keeps its own counts in memory and adds them here every few
-- seconds with `insert ... on conflict do update set n = usage_minute.n +
-- excluded.n`, so rows survive restarts and agree across nodes: a row is the
-- sum of what every node saw in that minute.
--
-- Claim latency is stored as counts per fixed log-scale bucket (lat_00 ..
-- lat_15), because percentiles cannot be added across nodes but bucket counts
-- can. Bucket i (0-14) holds latencies up to 250 us * 2^i (lat_02: <= 1 ms,
-- lat_14: <= 4.096 s); lat_15 holds everything slower. The bounds are part of
-- the code (api/src/domain/usage.rs) and must never change for stored rows.
create table usage_minute (
    tenant      text        not null,
    operation   text        not null,
    -- The minute the calls were answered in (the node's clock, truncated).
    minute      timestamptz not null,
    claims      bigint      not null default 0,
    replays     bigint      not null default 0,
    key_reuses  bigint      not null default 0,
    collisions  bigint      not null default 0,
    releases    bigint      not null default 0,
    takeovers   bigint      not null default 0,
    lat_00 bigint not null default 0, lat_01 bigint not null default 0,
    lat_02 bigint not null default 0, lat_03 bigint not null default 0,
    lat_04 bigint not null default 0, lat_05 bigint not null default 0,
    lat_06 bigint not null default 0, lat_07 bigint not null default 0,
    lat_08 bigint not null default 0, lat_09 bigint not null default 0,
    lat_10 bigint not null default 0, lat_11 bigint not null default 0,
    lat_12 bigint not null default 0, lat_13 bigint not null default 0,
    lat_14 bigint not null default 0, lat_15 bigint not null default 0,
    created_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now(),
    constraint usage_minute_pkey primary key (tenant, minute, operation)
);

-- Pruning rows older than the longest chart (a week) scans by minute.
create index usage_minute_minute_idx on usage_minute (minute);
