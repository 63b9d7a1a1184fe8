-- Tiering (SPEC section 7): outcomes past their hot retention move to the
-- archive, packed into segment objects; the row keeps the unique key, the
-- fingerprint and a routing entry saying where the outcome now lives.
--
-- A segment row is written *before* its object is uploaded, as `pending`,
-- by the tiering transaction that holds `pg_advisory_xact_lock(lock_id)`
-- until it commits or dies. The same transaction turns it `live` and slims
-- the rows it packed. So a segment still `pending` whose lock anyone can
-- take belongs to a tiering run that died: nothing points at it, and cleanup
-- deletes its object. A segment is marked `deleting` (committed) before its
-- object is deleted, so an interrupted cleanup simply runs again.
create table archive_segment (
    name        text        not null,
    lock_id     bigint      not null,
    state       text        not null,
    -- Length and SHA-256 of the whole object, as verified by reading it back.
    len         bigint,
    sha256      bytea,
    records     integer     not null default 0,
    created_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now(),
    constraint archive_segment_pkey primary key (name),
    constraint archive_segment_state_check
        check (state in ('pending', 'live', 'deleting')),
    constraint archive_segment_live_check
        check (state <> 'live' or (len is not null and sha256 is not null))
);

create index archive_segment_state_idx on archive_segment (state, created_at);

-- The routing entry: segment, byte offset and length of the outcome in it,
-- and the SHA-256 of those bytes (checked on every read). The foreign key
-- makes "delete a segment still in use" impossible, whatever the code does.
alter table idempotency_key
    add column segment        text references archive_segment (name),
    add column segment_offset bigint,
    add column segment_len    bigint,
    add column segment_sha256 bytea,
    add column tiered_at      timestamptz;

-- A completed record holds its outcome either here or behind a routing
-- entry, never neither and never both.
alter table idempotency_key drop constraint idempotency_key_outcome_check;
alter table idempotency_key add constraint idempotency_key_outcome_check
    check ((state = 'completed') = (outcome_hash is not null and (outcome is not null or segment is not null)));
alter table idempotency_key add constraint idempotency_key_routing_check
    check ((segment is null) = (segment_offset is null)
       and (segment is null) = (segment_len is null)
       and (segment is null) = (segment_sha256 is null)
       and (segment is null) = (tiered_at is null)
       and (segment is null or (outcome is null and state = 'completed')));

-- The tiering worker's queue (completed, still hot, oldest due first), the
-- cleanup worker's (oldest expiry first), and "is this segment still used".
create index idempotency_key_tiering_idx
    on idempotency_key (tier_at) where state = 'completed' and segment is null;
create index idempotency_key_expiry_idx on idempotency_key (expires_at);
create index idempotency_key_segment_idx
    on idempotency_key (segment) where segment is not null;
