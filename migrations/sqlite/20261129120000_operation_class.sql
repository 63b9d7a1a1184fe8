-- Operation-class policies set by tenant admins: the same table as in
-- migrations/postgres (see the comments there). A class without a row uses
-- the defaults; `policy` is the canonical JSON text of the whole policy.
-- Times are integer milliseconds since the Unix epoch (UTC).
create table operation_class (
    tenant      text    not null,
    operation   text    not null,
    policy      text    not null,
    created_at  integer not null,
    updated_at  integer not null,
    constraint operation_class_pkey primary key (tenant, operation)
) strict, without rowid;
