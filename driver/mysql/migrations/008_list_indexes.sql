-- keel schema v8 for MySQL / MariaDB: the dashboard's and List's filters by
-- type and by queue read an index range in id order instead of walking
-- every id backwards (a rare type in 5,000,000 rows took seconds). The type
-- and the queue of a task never change, so InnoDB maintains these indexes
-- on inserts only. One statement: it applies whole or not at all.
ALTER TABLE keel_tasks
    ADD KEY keel_tasks_type (type, id),
    ADD KEY keel_tasks_queue (queue, id);
