-- Tiering: the same contract as migrations/postgres/20261203000001 (see the
-- comments there). The embedded default serves one process, so a `pending`
-- segment found by cleanup always belongs to a tiering run that died (the
-- worker runs tiering and cleanup one after the other, never at once).
--
-- SQLite cannot change a table's constraints in place: the record table is
-- rebuilt with the routing entry's columns and the new outcome check, the
-- rows copied across unchanged, and its indexes made again.
create table archive_segment (
    name        text    not null,
    lock_id     integer not null,
    state       text    not null,
    len         integer,
    sha256      blob,
    records     integer not null default 0,
    created_at  integer not null,
    updated_at  integer not null,
    constraint archive_segment_pkey primary key (name),
    constraint archive_segment_state_check
        check (state in ('pending', 'live', 'deleting')),
    constraint archive_segment_live_check
        check (state <> 'live' or (len is not null and sha256 is not null))
) strict, without rowid;

create index archive_segment_state_idx on archive_segment (state, created_at);

create table idempotency_key_next (
    tenant            text    not null,
    operation         text    not null,
    key               text    not null,
    fingerprint       blob    not null,
    state             text    not null,
    attempt           integer not null default 1,
    owner_token_hash  blob    not null,
    claimed_at        integer not null,
    lease_expires_at  integer not null,
    lease_ms          integer not null,
    outcome           text,
    outcome_hash      blob,
    completed_at      integer,
    quarantine_reason text,
    expires_at        integer not null,
    tier_at           integer not null,
    created_at        integer not null,
    updated_at        integer not null,
    steps             text    not null default '{}',
    history           text    not null default '[]',
    segment           text,
    segment_offset    integer,
    segment_len       integer,
    segment_sha256    blob,
    tiered_at         integer,
    constraint idempotency_key_pkey primary key (tenant, operation, key),
    constraint idempotency_key_state_check
        check (state in ('in_progress', 'completed', 'quarantined')),
    constraint idempotency_key_outcome_check
        check ((state = 'completed') = (outcome_hash is not null and (outcome is not null or segment is not null))),
    constraint idempotency_key_routing_check
        check ((segment is null) = (segment_offset is null)
           and (segment is null) = (segment_len is null)
           and (segment is null) = (segment_sha256 is null)
           and (segment is null) = (tiered_at is null)
           and (segment is null or (outcome is null and state = 'completed')))
) strict, without rowid;

insert into idempotency_key_next (
    tenant, operation, key, fingerprint, state, attempt, owner_token_hash, claimed_at,
    lease_expires_at, lease_ms, outcome, outcome_hash, completed_at, quarantine_reason,
    expires_at, tier_at, created_at, updated_at, steps, history)
select
    tenant, operation, key, fingerprint, state, attempt, owner_token_hash, claimed_at,
    lease_expires_at, lease_ms, outcome, outcome_hash, completed_at, quarantine_reason,
    expires_at, tier_at, created_at, updated_at, steps, history
from idempotency_key;

drop table idempotency_key;
alter table idempotency_key_next rename to idempotency_key;

create index idempotency_key_tenant_created_idx
    on idempotency_key (tenant, created_at, operation, key);
create index idempotency_key_lease_watch_idx
    on idempotency_key (lease_expires_at) where state = 'in_progress';
create index idempotency_key_quarantined_idx
    on idempotency_key (updated_at) where state = 'quarantined';
create index idempotency_key_tiering_idx
    on idempotency_key (tier_at) where state = 'completed' and segment is null;
create index idempotency_key_expiry_idx on idempotency_key (expires_at);
create index idempotency_key_segment_idx
    on idempotency_key (segment) where segment is not null;
