-- The lease watch counts and visits stuck keys on every node every interval;
-- these partial indexes keep that from scanning the whole table.
create index idempotency_key_lease_watch_idx
    on idempotency_key (lease_expires_at) where state = 'in_progress';
create index idempotency_key_quarantined_idx
    on idempotency_key (updated_at) where state = 'quarantined';
