-- Multi-step effects, the audit trail, and released-by-resolve records
-- (SPEC sections 3 and 4).
--
-- `steps` maps a step name to {"provider_ref", "done_at"}; `history` is the
-- bounded audit trail of the key (the first event and the latest 49). Both
-- are JSON text changed by the same single statement as the transition they
-- describe, so a record and its history can never disagree.
alter table idempotency_key
    add column steps   text not null default '{}',
    add column history text not null default '[]';

-- Listing a tenant's keys newest first (stuck keys, quarantined keys).
create index idempotency_key_tenant_created_idx
    on idempotency_key (tenant, created_at, operation, key);

-- A released record leaves no row behind; when an admin (or the owner)
-- releases a quarantined key by resolving it, who did it and the record's
-- history are kept here, written in the same transaction as the delete.
create table key_release (
    tenant      text        not null,
    operation   text        not null,
    key         text        not null,
    released_at timestamptz not null default now(),
    attempt     integer     not null,
    actor       text        not null,
    reason      text,
    history     text        not null,
    created_at  timestamptz not null default now()
);

create index key_release_scoped_idx on key_release (tenant, operation, key, released_at desc);
