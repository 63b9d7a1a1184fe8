-- The most claimed keys of each class per minute (minute in epoch
-- milliseconds), for the dashboard's hot keys: every node's usage roll-up
-- writes the top few keys of its bounded per-minute summary on each flush
-- (keys claimed at least twice on that node in that minute), one row per
-- key, minute and node, replaced by the node's newer, larger figure; the
-- dashboard sums the nodes. Pruned with the usage rows.
create table hot_key_minute (
    tenant      text    not null,
    operation   text    not null,
    minute      integer not null,
    key         text    not null,
    node        text    not null,
    claims      integer not null,
    created_at  integer not null default (cast((julianday('now') - 2440587.5) * 86400000 as integer)),
    constraint hot_key_minute_pk primary key (tenant, operation, minute, key, node)
) strict;

create index hot_key_minute_tenant_minute_idx on hot_key_minute (tenant, minute);
create index hot_key_minute_minute_idx on hot_key_minute (minute);
