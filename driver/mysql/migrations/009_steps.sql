-- Durable steps (keel.Step): each task keeps the results of its finished
-- steps, a JSON object of step name to {"result", "at", "attempt"}; NULL
-- until its first step. Archived tasks keep them.
--
-- Each statement can run again if a later one failed: keel_archive's
-- column is added only when missing (MySQL has no ADD COLUMN IF NOT
-- EXISTS), and keel_tasks's ALTER is last. ALGORITHM=INSTANT changes only
-- metadata: no copy of the task table whatever its size.
SET @keel_steps = IF((SELECT count(*) FROM information_schema.columns
        WHERE table_schema = DATABASE() AND table_name = 'keel_archive' AND column_name = 'steps') = 0,
    'ALTER TABLE keel_archive ADD COLUMN steps JSON NULL', 'DO 0');
PREPARE keel_steps FROM @keel_steps;
EXECUTE keel_steps;
DEALLOCATE PREPARE keel_steps;
ALTER TABLE keel_tasks ADD COLUMN steps JSON NULL, ALGORITHM=INSTANT;
