#!/usr/bin/env python3
"""walpages.py: what each commit of a SQLite store wrote, by b-tree.

    python3 walpages.py DB WAL

DB is a copy of the store's file and WAL a copy of its write-ahead log,
taken before the log was checkpointed (copy both while hrns serve runs,
or after kill -9). The script reads the WAL's frames (one page each) up to
the last valid one, groups them by commit, names each page's table or index
(dbstat, on a checkpointed copy of DB + WAL in a temporary folder) and
prints the pages per commit, in all and by b-tree. Every page a commit
writes is a WAL frame: two pwrite calls, a checksum, and later a
checkpoint's write into the database file.
"""
import collections
import os
import shutil
import sqlite3
import struct
import sys
import tempfile


def frames(wal):
    data = open(wal, "rb").read()
    if len(data) < 32:
        return []
    _, _, page_size, _, salt1, salt2, _, _ = struct.unpack(">8I", data[:32])
    commits, current, off = [], [], 32
    while off + 24 + page_size <= len(data):
        page, db_size, s1, s2, _, _ = struct.unpack(">6I", data[off:off + 24])
        if (s1, s2) != (salt1, salt2):
            break  # frames of an earlier generation of the log
        current.append(page)
        if db_size:  # the last frame of a commit
            commits.append(current)
            current = []
        off += 24 + page_size
    return commits


def names(db, wal):
    tmp = tempfile.mkdtemp()
    try:
        copy = os.path.join(tmp, "db")
        shutil.copy(db, copy)
        shutil.copy(wal, copy + "-wal")
        c = sqlite3.connect(copy)
        c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        out = dict(c.execute("SELECT pageno, name FROM dbstat"))
        out[1] = out.get(1, "sqlite_schema") + " (page 1: the header)"
        c.close()
        return out
    finally:
        shutil.rmtree(tmp)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    db, wal = sys.argv[1], sys.argv[2]
    commits = frames(wal)
    if not commits:
        sys.exit("no commit in the log")
    name = names(db, wal)
    total = sum(map(len, commits))
    print(f"{len(commits)} commits, {total} pages: {total / len(commits):.1f} pages per commit")
    by = collections.Counter(name.get(p, f"page {p} (freed since)") for c in commits for p in c)
    for n, count in by.most_common():
        print(f"{count / len(commits):6.2f}  {n}")


if __name__ == "__main__":
    main()
