-- Recent claims refused as `key_reused`, per tenant and class, for the
-- dashboard: when (epoch milliseconds), which key, and which JSON pointers
-- differed, as JSON text `{"pointers": [...], "truncated": bool}` (pointers, never values;
-- null when the fields could not be compared). Written by each node's usage
-- roll-up in batches; pruned by age and to the newest rows of each class.
create table key_rejections (
    id          integer primary key,
    tenant      text    not null,
    operation   text    not null,
    key         text    not null,
    at          integer not null,
    mismatched  text
) strict;

create index key_rejections_class_idx on key_rejections (tenant, operation, at desc);
create index key_rejections_at_idx on key_rejections (at);
