-- Fingerprint rules are fixed per record, like its window (SPEC section 6:
-- a policy change affects new records only).
--
-- Every rule set a policy has ever used is kept here, addressed by the
-- SHA-256 of its JSON (content-addressed: a row never changes), and each
-- record names the rule set its fingerprint was computed under. A retry
-- whose fingerprint under today's rules differs from the record's is
-- fingerprinted again under the record's own rules before it is called
-- key reuse. `rules_digest` is null for the default rules (no include,
-- exclude or decimal fields), and for records written before this table.
create table fingerprint_rules (
    digest      bytea       not null,
    rules       text        not null,
    created_at  timestamptz not null default now(),
    constraint fingerprint_rules_pkey primary key (digest)
);

alter table idempotency_key add column rules_digest bytea;
