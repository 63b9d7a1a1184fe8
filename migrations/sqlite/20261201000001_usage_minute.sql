-- Usage figures for the dashboard; the same contract as
-- migrations/postgres/20261201000001 (see the comments there): counts per
-- tenant, operation class and minute, added to by every flush, and claim
-- latency as counts per fixed log-scale bucket (lat_i: <= 250 us * 2^i,
-- lat_15: slower than 4.096 s). `minute` is milliseconds since the Unix epoch.
create table usage_minute (
    tenant      text    not null,
    operation   text    not null,
    minute      integer not null,
    claims      integer not null default 0,
    replays     integer not null default 0,
    key_reuses  integer not null default 0,
    collisions  integer not null default 0,
    releases    integer not null default 0,
    takeovers   integer not null default 0,
    lat_00 integer not null default 0, lat_01 integer not null default 0,
    lat_02 integer not null default 0, lat_03 integer not null default 0,
    lat_04 integer not null default 0, lat_05 integer not null default 0,
    lat_06 integer not null default 0, lat_07 integer not null default 0,
    lat_08 integer not null default 0, lat_09 integer not null default 0,
    lat_10 integer not null default 0, lat_11 integer not null default 0,
    lat_12 integer not null default 0, lat_13 integer not null default 0,
    lat_14 integer not null default 0, lat_15 integer not null default 0,
    created_at  integer not null,
    updated_at  integer not null,
    constraint usage_minute_pkey primary key (tenant, minute, operation)
) strict;

create index usage_minute_minute_idx on usage_minute (minute);
