-- Operation-class policies set by tenant admins (SPEC section 6): one row per
-- (tenant, operation) that has a policy; a class without a row uses the
-- defaults. The tenant leads the key, as everywhere.
--
-- `policy` is the canonical JSON text of the whole policy (every member
-- present, written by the API), so a later change of the built-in defaults
-- never changes a class an admin has set. It is text rather than jsonb: the
-- service is the only reader and parses and checks it on every read.
--
-- A policy is read when a record is written; a record keeps its own
-- expires_at and tier_at, so changing or deleting a row here never shortens a
-- promise already made.
create table operation_class (
    tenant      text        not null,
    operation   text        not null,
    policy      text        not null,
    created_at  timestamptz not null default now(),
    updated_at  timestamptz not null default now(),
    constraint operation_class_pkey primary key (tenant, operation)
);
