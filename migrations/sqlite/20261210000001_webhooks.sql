-- Lifecycle webhooks: endpoints a tenant's admin registers per operation
-- class, and the durable queue of their deliveries. Times are epoch
-- milliseconds, as everywhere in this database.
--
-- Events are found by a background worker that reads what the store already
-- records (key states, attempts and times; the key_rejections roll-up), never
-- by the claim path: a slow or dead endpoint can only slow the worker.
--
-- The secret is kept as given out (`whsec_…`): the worker needs it to sign
-- every delivery, so it cannot be a one-way hash. It is shown to the admin
-- once, when the endpoint is created, and never read back by the API.
create table webhook_endpoint (
    tenant           text    not null,
    id               text    not null,
    operation        text    not null,
    url              text    not null,
    secret           text    not null,
    -- A comma-separated list of `quarantined`, `stuck`, `taken_over`,
    -- `key_reused_spike`.
    events           text    not null,
    stuck_after_ms   integer,
    spike_threshold  integer,
    spike_window_ms  integer,
    created_at       integer not null,
    constraint webhook_endpoint_pkey primary key (tenant, id)
) strict, without rowid;

create index webhook_endpoint_class_idx on webhook_endpoint (tenant, operation);

-- One row per event per endpoint; `subject` names the occurrence, so the
-- detection pass may see one event many times and queue it once.
create table webhook_delivery (
    id               integer primary key,
    tenant           text    not null,
    endpoint_id      text    not null,
    kind             text    not null,
    subject          text    not null,
    operation        text    not null,
    key              text,
    attempt          integer,
    occurred_at      integer not null,
    reason           text,
    rejections       integer,
    -- `pending` until `delivered` (a 2xx answer) or `failed` (the bound on
    -- attempts reached). Taking a due row moves `next_attempt_at` past its
    -- request's timeout and counts the attempt.
    state            text    not null default 'pending',
    attempts         integer not null default 0,
    next_attempt_at  integer not null,
    last_attempt_at  integer,
    last_status      integer,
    last_error       text,
    delivered_at     integer,
    created_at       integer not null,
    updated_at       integer not null,
    constraint webhook_delivery_once unique (tenant, endpoint_id, kind, subject),
    constraint webhook_delivery_endpoint_fkey foreign key (tenant, endpoint_id)
        references webhook_endpoint (tenant, id) on delete cascade,
    constraint webhook_delivery_state_check
        check (state in ('pending', 'delivered', 'failed'))
) strict;

create index webhook_delivery_due_idx on webhook_delivery (next_attempt_at)
    where state = 'pending';
create index webhook_delivery_endpoint_idx
    on webhook_delivery (tenant, endpoint_id, created_at desc);
create index webhook_delivery_finished_idx on webhook_delivery (updated_at)
    where state <> 'pending';

-- Takeovers by their claim time; a first claim (attempt 1) never writes to
-- this partial index.
create index idempotency_key_taken_over_idx on idempotency_key (claimed_at)
    where attempt > 1;
