-- keel schema for MySQL / MariaDB: task dependencies and workflows
-- (driver.Workflows).
--
-- A task that depends on others is inserted pending with run_at at
-- driver.HeldUntil, which no claim reaches, and one row in keel_waits. The
-- leader reads the wait rows with their dependencies' states (keel_deps)
-- and, in one transaction each, releases the task (run_at = now), cancels
-- it (a dependency died or was cancelled) or drops a row whose task is no
-- longer held; the row goes with the decision. keel_tasks gets no column:
-- its hot path writes nothing more.
CREATE TABLE keel_workflows (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name       VARCHAR(255) NOT NULL,
    on_failure VARCHAR(16)  NOT NULL,
    created_at DATETIME(6)  NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A workflow's tasks by name.
CREATE TABLE keel_workflow_tasks (
    workflow_id BIGINT       NOT NULL,
    name        VARCHAR(128) NOT NULL,
    task_id     BIGINT       NOT NULL,
    PRIMARY KEY (workflow_id, name),
    KEY keel_workflow_tasks_task (task_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Every dependency, kept for the graph after the wait is over.
CREATE TABLE keel_deps (
    task_id BIGINT NOT NULL,
    dep_id  BIGINT NOT NULL,
    PRIMARY KEY (task_id, dep_id),
    KEY keel_deps_dep (dep_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per held task, deleted when it is released or cancelled.
CREATE TABLE keel_waits (
    task_id    BIGINT      NOT NULL PRIMARY KEY,
    on_failure VARCHAR(16) NOT NULL,
    created_at DATETIME(6) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
