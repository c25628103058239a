-- keel schema v10 for PostgreSQL: the dashboard's and List's filters by
-- type and by queue read an index range in id order instead of walking
-- every id backwards (a rare type in 5,000,000 rows took seconds). Task
-- updates change the state, which the partial indexes' predicates name,
-- so they are never HOT: every claim and finish adds an entry to these
-- indexes too (measured: see the README's Dashboard section). Creating
-- them on a big table takes a while and blocks writes meanwhile.
CREATE INDEX keel_tasks_type ON {schema}.keel_tasks (type, id);

CREATE INDEX keel_tasks_queue ON {schema}.keel_tasks (queue, id);
