-- Recent claims refused as `key_reused`, per tenant and class, for the
-- dashboard: when, which key, and which JSON pointers differed, as JSON
-- text `{"pointers": [...], "truncated": bool}` (pointers, never values;
-- null when the fields could not be compared). Written by each node's usage
-- roll-up in batches; pruned by age and to the newest rows of each class.
create table key_rejections (
    id          bigserial   primary key,
    tenant      text        not null,
    operation   text        not null,
    key         text        not null,
    at          timestamptz not null,
    mismatched  text
);

create index key_rejections_class_idx on key_rejections (tenant, operation, at desc);
create index key_rejections_at_idx on key_rejections (at);
