-- Multi-step effects, the audit trail, and released-by-resolve records; the
-- same contract as migrations/postgres/20261129000002.
alter table idempotency_key add column steps text not null default '{}';
alter table idempotency_key add column history text not null default '[]';

create index idempotency_key_tenant_created_idx
    on idempotency_key (tenant, created_at, operation, key);

create table key_release (
    tenant      text    not null,
    operation   text    not null,
    key         text    not null,
    released_at integer not null,
    attempt     integer not null,
    actor       text    not null,
    reason      text,
    history     text    not null,
    created_at  integer not null
) strict;

create index key_release_scoped_idx on key_release (tenant, operation, key, released_at desc);
