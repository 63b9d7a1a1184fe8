-- The batch completion's update, planned once per connection instead of
-- once per element.
--
-- PL/pgSQL prepares the update of `idemkey_complete_batch` once, but the
-- plan cache replanned it for every element: on the partitioned table a
-- generic plan (every partition, pruned when it starts) looks dearer to
-- the planner than a plan made for the element's key, so it chose the
-- latter each time. A profile of the new-keys benchmark put a quarter of
-- the database's CPU in that planning. The generic plan reaches the
-- element's one partition all the same: its executor prunes the others
-- before reading anything, by the same primary key.
alter function idemkey_complete_batch(text[], text[], text[], bytea[], text[], bytea[])
    set plan_cache_mode = force_generic_plan;
