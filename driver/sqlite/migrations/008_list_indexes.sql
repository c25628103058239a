-- keel schema v8 for SQLite: the dashboard's and List's filters by type and
-- by queue read an index range in id order instead of walking every id
-- backwards (a rare type in 5,000,000 rows took seconds). The type and the
-- queue of a task never change, so only inserts maintain these indexes:
-- claims and finishes do not touch them.
CREATE INDEX keel_tasks_type ON keel_tasks (type, id);

CREATE INDEX keel_tasks_queue ON keel_tasks (queue, id);
