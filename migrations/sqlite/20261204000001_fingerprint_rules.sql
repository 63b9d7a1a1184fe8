-- Fingerprint rules fixed per record: the same contract as
-- migrations/postgres/20261204000001 (see the comments there).
create table fingerprint_rules (
    digest      blob    not null,
    rules       text    not null,
    created_at  integer not null,
    constraint fingerprint_rules_pkey primary key (digest)
) strict, without rowid;

alter table idempotency_key add column rules_digest blob;
