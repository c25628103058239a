-- Durable steps (keel.Step): each task keeps the results of its finished
-- steps, a JSON object of step name to {"result", "at", "attempt"}; NULL
-- until its first step. Archived tasks keep them. A nullable column
-- without a default is added without rewriting the table.
ALTER TABLE {schema}.keel_tasks ADD COLUMN steps jsonb;
ALTER TABLE {schema}.keel_archive ADD COLUMN steps jsonb;
