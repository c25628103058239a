-- keel schema v6 for MySQL / MariaDB: alerts, their notifier deliveries,
-- and small stored documents (see driver/alerts.go). Times are the
-- leader's clock; vals and resolved_vals are JSON objects kept as the text
-- they were given (like the other databases). Each statement can run again
-- if a later one failed.
--
-- open_key (sqlutil.OpenKey of rule and subject) is set while the alert
-- fires and NULL once it resolved: its unique key keeps one open alert per
-- rule and subject, and NULLs never collide. Names and keys are VARBINARY:
-- compared byte by byte, trailing spaces included (utf8mb4_bin pads), like
-- on the other databases; their sizes are the limits in driver/alerts.go
-- (open_key: 3 + 64 + 300 bytes). TEXT columns take no literal default on
-- MySQL 8: every insert names them.
CREATE TABLE IF NOT EXISTS keel_alerts (
    id               BIGINT         NOT NULL AUTO_INCREMENT PRIMARY KEY,
    rule             VARBINARY(64)  NOT NULL,
    subject          VARBINARY(300) NOT NULL,
    open_key         VARBINARY(367) NULL,
    message          TEXT           NOT NULL,
    hint             TEXT           NOT NULL,
    vals             TEXT           NULL,
    fired_at         DATETIME(6)    NOT NULL,
    resolved_at      DATETIME(6)    NULL,
    resolved_message TEXT           NULL,
    resolved_vals    TEXT           NULL,
    UNIQUE KEY keel_alerts_open (open_key),
    KEY keel_alerts_rule (rule, subject, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- One row per alert, event ('fired' or 'resolved') and notifier; attempts
-- counts every try, delivered_at is the first that succeeded.
CREATE TABLE IF NOT EXISTS keel_alert_deliveries (
    alert_id     BIGINT         NOT NULL,
    event        VARBINARY(16)  NOT NULL,
    notifier     VARBINARY(100) NOT NULL,
    attempts     INT            NOT NULL,
    delivered_at DATETIME(6)    NULL,
    last_error   TEXT           NOT NULL,
    updated_at   DATETIME(6)    NOT NULL,
    PRIMARY KEY (alert_id, event, notifier),
    CONSTRAINT keel_alert_deliveries_event CHECK (event IN ('fired', 'resolved')),
    CONSTRAINT keel_alert_deliveries_alert FOREIGN KEY (alert_id) REFERENCES keel_alerts (id) ON DELETE CASCADE
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Small documents by name; MEDIUMBLOB, as BLOB holds one byte less than
-- the 64 KiB a document may have.
CREATE TABLE IF NOT EXISTS keel_meta (
    name       VARBINARY(100) NOT NULL PRIMARY KEY,
    value      MEDIUMBLOB     NOT NULL,
    updated_at DATETIME(6)    NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
