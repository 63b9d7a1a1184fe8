-- Every primary key and unique index of a tenant's table includes the
-- tenant, so the schema can be distributed by tenant (see "Past one
-- Postgres" in docs/architecture.md): a node can only check uniqueness
-- among the rows it holds. The delivery queue's key was its id alone; it
-- becomes (tenant, id). The workers that take, finish and prune deliveries
-- find rows by id across tenants, so the id keeps a plain index of its own.
alter table webhook_delivery drop constraint webhook_delivery_pkey;
alter table webhook_delivery add constraint webhook_delivery_pkey primary key (tenant, id);
create index webhook_delivery_id_idx on webhook_delivery (id);
