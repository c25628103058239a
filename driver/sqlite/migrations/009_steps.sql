-- Durable steps (keel.Step): each task keeps the results of its finished
-- steps, a JSON object of step name to {"result", "at", "attempt"}; NULL
-- until its first step. Archived tasks keep them.
ALTER TABLE keel_tasks ADD COLUMN steps TEXT;
ALTER TABLE keel_archive ADD COLUMN steps TEXT;
