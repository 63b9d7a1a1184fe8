-- Lifecycle webhooks: endpoints a tenant's admin registers per operation
-- class, and the durable queue of their deliveries.
--
-- Events are found by a background worker that reads what the store already
-- records (key states, attempts and times; the key_rejections roll-up), never
-- by the claim path: a slow or dead endpoint can only slow the worker.
--
-- The secret is kept as given out (`whsec_…`): the worker needs it to sign
-- every delivery, so it cannot be a one-way hash. It is shown to the admin
-- once, when the endpoint is created, and never read back by the API.
create table webhook_endpoint (
    tenant           text        not null,
    id               text        not null,
    operation        text        not null,
    url              text        not null,
    secret           text        not null,
    -- The events the endpoint wants, a comma-separated list of
    -- `quarantined`, `stuck`, `taken_over`, `key_reused_spike`.
    events           text        not null,
    -- `stuck`: a key in progress (one attempt) for longer than this.
    stuck_after_ms   bigint,
    -- `key_reused_spike`: at least `spike_threshold` refusals within one
    -- window of `spike_window_ms` (windows aligned to the epoch).
    spike_threshold  bigint,
    spike_window_ms  bigint,
    created_at       timestamptz not null default now(),
    constraint webhook_endpoint_pkey primary key (tenant, id)
);

-- The worker visits every endpoint of a class; the dashboard lists a
-- tenant's endpoints by class.
create index webhook_endpoint_class_idx on webhook_endpoint (tenant, operation);

-- One row per event per endpoint. `subject` names the occurrence (the key,
-- its attempt and that attempt's claim time; or a spike's window), so the
-- detection pass may see one event any number of times, on any number of
-- nodes, and the insert that would queue it twice does nothing.
create table webhook_delivery (
    id               bigserial   primary key,
    tenant           text        not null,
    endpoint_id      text        not null,
    kind             text        not null,
    subject          text        not null,
    operation        text        not null,
    key              text,
    attempt          integer,
    -- When the event happened (quarantine, takeover, the claim that got
    -- stuck, the spike's window start).
    occurred_at      timestamptz not null,
    -- The quarantine reason; or the refusals counted in a spike's window.
    reason           text,
    rejections       bigint,
    -- `pending` until `delivered` (a 2xx answer) or `failed` (the bound
    -- on attempts reached). A worker takes a due row by moving
    -- `next_attempt_at` past its request's timeout and counting the
    -- attempt, so no two workers send one delivery at once.
    state            text        not null default 'pending',
    attempts         integer     not null default 0,
    next_attempt_at  timestamptz not null default now(),
    last_attempt_at  timestamptz,
    last_status      integer,
    last_error       text,
    delivered_at     timestamptz,
    created_at       timestamptz not null default now(),
    updated_at       timestamptz not null default now(),
    constraint webhook_delivery_once unique (tenant, endpoint_id, kind, subject),
    constraint webhook_delivery_endpoint_fkey foreign key (tenant, endpoint_id)
        references webhook_endpoint (tenant, id) on delete cascade,
    constraint webhook_delivery_state_check
        check (state in ('pending', 'delivered', 'failed'))
);

-- The delivery worker's "what is due", oldest first.
create index webhook_delivery_due_idx on webhook_delivery (next_attempt_at)
    where state = 'pending';
-- The dashboard's newest deliveries of an endpoint.
create index webhook_delivery_endpoint_idx
    on webhook_delivery (tenant, endpoint_id, created_at desc);
-- Pruning finished deliveries by age.
create index webhook_delivery_finished_idx on webhook_delivery (updated_at)
    where state <> 'pending';

-- Takeovers: rows whose attempt is past the first, by the takeover's claim
-- time. A partial index: a first claim (attempt 1) never writes to it, so
-- the claim path pays nothing for it; only a takeover's row is indexed.
create index idempotency_key_taken_over_idx on idempotency_key (claimed_at)
    where attempt > 1;
