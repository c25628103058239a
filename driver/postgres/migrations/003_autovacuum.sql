-- A queue table churns: every task is inserted, updated at least twice and
-- finished. Vacuum it far more eagerly than PostgreSQL's defaults (20 % of
-- the table) so dead index entries left by claimed tasks do not pile up at
-- the head of the claim index.
ALTER TABLE {schema}.keel_tasks SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
