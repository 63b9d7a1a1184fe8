-- The authority on ownership (SPEC section 7): one row per scoped key.
--
-- The primary key (tenant, operation, key) is the only thing that decides who
-- owns a key: a claim is a single `insert ... on conflict do nothing`, and
-- every later transition is an `update` guarded by the owner token's hash and
-- the attempt counter. The tenant leads the key so every lookup is scoped.
--
-- Hash partitioning by the scoped key spreads writes and index pages over
-- sixteen partitions; a unique constraint on a partitioned table must contain
-- the partition key, which is why we partition by the scoped key and never by
-- time (retention is handled by `expires_at`, not by dropping partitions).
create table idempotency_key (
    tenant            text        not null,
    operation         text        not null,
    key               text        not null,
    -- SHA-256 of the canonical protected input; never changes while the
    -- record lives.
    fingerprint       bytea       not null,
    state             text        not null,
    -- Fencing counter: incremented on every takeover.
    attempt           integer     not null default 1,
    -- SHA-256 of the current attempt's owner token; the token itself is only
    -- ever shown to its attempt.
    owner_token_hash  bytea       not null,
    -- When the current attempt claimed the key, and when its lease ends.
    claimed_at        timestamptz not null,
    lease_expires_at  timestamptz not null,
    -- The lease length the current attempt chose; a heartbeat without its
    -- own lease_ms extends by this much.
    lease_ms          bigint      not null,
    -- The outcome exactly as the owner sent it (replayed byte for byte) and
    -- the hash of its canonical form (to tell a repeated completion from a
    -- conflicting one).
    outcome           text,
    outcome_hash      bytea,
    completed_at      timestamptz,
    quarantine_reason text,
    -- Fixed when the record is first written (policy changes affect new
    -- records only): the end of the replay window, and when the outcome may
    -- move to the archive tier.
    expires_at        timestamptz not null,
    tier_at           timestamptz not null,
    created_at        timestamptz not null default now(),
    updated_at        timestamptz not null default now(),
    constraint idempotency_key_pkey primary key (tenant, operation, key),
    constraint idempotency_key_state_check
        check (state in ('in_progress', 'completed', 'quarantined')),
    constraint idempotency_key_outcome_check
        check ((state = 'completed') = (outcome is not null and outcome_hash is not null))
) partition by hash (tenant, operation, key);

do $$
begin
    for i in 0..15 loop
        execute format(
            'create table idempotency_key_p%s partition of idempotency_key '
            'for values with (modulus 16, remainder %s)', i, i);
    end loop;
end
$$;
