#!/usr/bin/env python3
"""The SQLite drain's own SQL through C SQLite, for comparison with
BenchmarkRawClaimFinish (the same statements through modernc.org/sqlite).

    KEEL_RAW_DUMP=/tmp/raw go test -count=1 -run TestDumpRawBench ./driver/sqlite/
    python3 bench/csqlite/claim_finish.py /tmp/raw

It copies the database the driver made (100,000 pending tasks), then claims
500 tasks a statement and marks them succeeded, one commit each, with
synchronous=FULL, as the Go benchmark does, and prints tasks/s.
"""
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time


def main():
    if len(sys.argv) != 2 or not all(os.path.isfile(os.path.join(sys.argv[1], f)) for f in ("keel.db", "statements.json")):
        sys.exit("usage: claim_finish.py DIR, where DIR holds keel.db and statements.json from\n"
                 "  KEEL_RAW_DUMP=DIR go test -count=1 -run TestDumpRawBench ./driver/sqlite/")
    src = sys.argv[1]
    stmts = json.load(open(os.path.join(src, "statements.json")))
    work = tempfile.mkdtemp()
    db_path = os.path.join(work, "keel.db")
    shutil.copy(os.path.join(src, "keel.db"), db_path)
    db = sqlite3.connect(db_path, isolation_level=None)
    for pragma in ("journal_mode=WAL", "synchronous=FULL", "temp_store=2"):
        db.execute("PRAGMA " + pragma)
    lease = int(time.time() * 1e6) + 3600 * 10**6
    done, start = 0, time.time()
    while done < 100000:
        db.execute("BEGIN IMMEDIATE")
        rows = db.execute(stmts["claim"], ("node", lease, int(time.time() * 1e6), "default", 500)).fetchall()
        db.execute("COMMIT")
        if not rows:
            sys.exit("nothing left to claim")
        ids = [r[0] for r in rows]
        pairs = [[r[0], r[6]] for r in rows]  # id, fence
        db.execute("BEGIN IMMEDIATE")
        n = len(db.execute(stmts["succeed"], (int(time.time() * 1e6), json.dumps(ids), json.dumps(pairs), "node")).fetchall())
        db.execute("COMMIT")
        if n != len(ids):
            sys.exit(f"finished {n} of {len(ids)}")
        done += n
    elapsed = time.time() - start
    print(f"C SQLite {sqlite3.sqlite_version}: {done} tasks in {elapsed:.2f}s, {done / elapsed:.0f} tasks/s")
    shutil.rmtree(work)


if __name__ == "__main__":
    main()
