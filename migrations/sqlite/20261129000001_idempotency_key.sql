-- The embedded default's authority on ownership: the same contract as the
-- Postgres table (see migrations/postgres), in one SQLite file.
--
-- The primary key (tenant, operation, key) decides ownership: a claim is a
-- single `insert ... on conflict do nothing`, every later transition an
-- `update` guarded by the owner token's hash and the attempt counter.
-- SQLite takes the write lock at the start of each such statement, so the
-- guard and the write are one atomic step, as in Postgres.
--
-- Times are integer milliseconds since the Unix epoch (UTC), taken from the
-- one machine's clock; STRICT makes SQLite enforce the declared types.
create table idempotency_key (
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
    constraint idempotency_key_pkey primary key (tenant, operation, key),
    constraint idempotency_key_state_check
        check (state in ('in_progress', 'completed', 'quarantined')),
    constraint idempotency_key_outcome_check
        check ((state = 'completed') = (outcome is not null and outcome_hash is not null))
) strict, without rowid;
