-- Completions in batches: one call, one transaction and one commit for
-- every completion a node gathered while its previous batches were in
-- flight (api/src/store/batch.rs).
--
-- Each element is the single completion's guarded update, run in array
-- order (the node sorts a batch by scoped key, so two batches lock rows in
-- the same order and cannot deadlock): the owner-token guard decides each
-- row on its own, and an element that matches nothing returns no row, as
-- the single statement does. `i` is the element's position (from 1).
--
-- The update below is the single completion's (`COMPLETE` in
-- api/src/store/claims/postgres.rs) with parameter n of element i read as
-- the i-th element of argument n; the store's tests run the same
-- completions through both and compare the records they leave.
--
-- A set of statements rather than one `update ... from unnest(...)`: on
-- the partitioned table that join probed every partition for every row,
-- or chose a partial index of the lease watch, while each statement here
-- reaches one partition through the primary key.
create function idemkey_complete_batch(
    tenants text[], operations text[], keys text[],
    owners bytea[], outcomes text[], outcome_hashes bytea[])
returns table (
    i integer, state text, fingerprint bytea, attempt integer,
    owner_token_hash bytea, claimed_at timestamptz, lease_expires_at timestamptz,
    outcome text, outcome_hash bytea, completed_at timestamptz,
    quarantine_reason text, expires_at timestamptz, created_at timestamptz,
    updated_at timestamptz, steps text, history text, segment text,
    segment_offset bigint, segment_len bigint, segment_sha256 bytea,
    tiered_at timestamptz, rules_digest bytea, window_ms bigint,
    field_digests text, observed_at timestamptz, waited boolean)
language plpgsql volatile as $$
#variable_conflict use_column
declare
    n integer;
begin
    for n in 1 .. coalesce(array_length(keys, 1), 0) loop
        return query
        update idempotency_key as r
           set state = 'completed', outcome = outcomes[n], outcome_hash = outcome_hashes[n],
               completed_at = now(), updated_at = now(),
               expires_at = greatest(r.expires_at, now() + r.window_ms * interval '1 millisecond'),
               history = (case when jsonb_array_length(r.history::jsonb) >= 50
                               then r.history::jsonb - 1 else r.history::jsonb end
                          || jsonb_build_array(jsonb_build_object(
                                 'event', 'completed', 'attempt', r.attempt,
                                 'at', to_char(now() at time zone 'utc', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))))::text
         where r.tenant = tenants[n] and r.operation = operations[n] and r.key = keys[n]
           and r.state = 'in_progress' and r.owner_token_hash = owners[n]
           and not (r.expires_at <= now() and (r.state = 'completed'
                    or r.lease_expires_at + r.window_ms * interval '1 millisecond' <= now()))
        returning n, r.state, r.fingerprint, r.attempt, r.owner_token_hash, r.claimed_at,
                  r.lease_expires_at, r.outcome, r.outcome_hash, r.completed_at,
                  r.quarantine_reason, r.expires_at, r.created_at, r.updated_at, r.steps,
                  r.history, r.segment, r.segment_offset, r.segment_len, r.segment_sha256,
                  r.tiered_at, r.rules_digest, r.window_ms, r.field_digests, now(),
                  idemkey_waited(r.tenant, r.operation, r.key);
    end loop;
end
$$;
