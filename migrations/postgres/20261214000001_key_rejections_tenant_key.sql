-- The primary key of `key_rejections` leads with the tenant, like every other
-- key of a table holding a tenant's rows.
--
-- It was the `bigserial` id alone. A distributed Postgres (Citus and the
-- like) spreads a table's rows over nodes by one column — here `tenant` —
-- and can only enforce a primary key or unique index that contains that
-- column, because each node checks uniqueness among its own rows. The id
-- stays (it orders refusals made in the same instant, and pruning names
-- rows by it), now beside the tenant. Pruning names rows by (tenant, id),
-- which this key serves. SQLite keeps its integer rowid key: one file is
-- never distributed, and the rowid is what makes its ids.
alter table key_rejections drop constraint key_rejections_pkey;
alter table key_rejections
    add constraint key_rejections_pkey primary key (tenant, id);
