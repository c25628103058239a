-- keel schema v6 for SQLite: alerts, their notifier deliveries, and small
-- stored documents (see driver/alerts.go). Times are Unix microseconds
-- from the leader's clock; vals and resolved_vals are JSON objects as text.
-- open_key (sqlutil.OpenKey of rule and subject) is set while the alert
-- fires and NULL once it resolved: its unique index keeps one open alert
-- per rule and subject, and NULLs never collide.
CREATE TABLE keel_alerts (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    rule             TEXT    NOT NULL,
    subject          TEXT    NOT NULL,
    open_key         TEXT    UNIQUE,
    message          TEXT    NOT NULL,
    hint             TEXT    NOT NULL DEFAULT '',
    vals             TEXT,
    fired_at         INTEGER NOT NULL,
    resolved_at      INTEGER,
    resolved_message TEXT    NOT NULL DEFAULT '',
    resolved_vals    TEXT
);

CREATE INDEX keel_alerts_rule ON keel_alerts (rule, subject, id);

-- One row per alert, event ('fired' or 'resolved') and notifier; attempts
-- counts every try, delivered_at is the first that succeeded.
CREATE TABLE keel_alert_deliveries (
    alert_id     INTEGER NOT NULL REFERENCES keel_alerts (id) ON DELETE CASCADE,
    event        TEXT    NOT NULL CHECK (event IN ('fired', 'resolved')),
    notifier     TEXT    NOT NULL,
    attempts     INTEGER NOT NULL,
    delivered_at INTEGER,
    last_error   TEXT    NOT NULL DEFAULT '',
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (alert_id, event, notifier)
) WITHOUT ROWID;

-- Small documents by name (at most 64 KiB each).
CREATE TABLE keel_meta (
    name       TEXT    PRIMARY KEY,
    value      BLOB    NOT NULL,
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
