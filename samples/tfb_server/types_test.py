#!/usr/bin/env python3
"""tfb_server against TechEmpower's requirements, on loopback, with the private
PostgreSQL of the ctest fixture: every test type's body, headers and query
clamping; pipelined plaintext; rows that match the database; updates that
reach it; HTML escaping and UTF-8 in fortunes; a Date that changes each
second; a database error answered with 500 while the rest serves on; many
concurrent requests; a graceful stop; a committed transaction per statement
(General Requirement #7, counted by the server in pg_stat_database).

Usage: types_test.py path/to/tfb_server path/to/conninfo
"""
import concurrent.futures
import html
import http.client
import json
import re
import socket
import subprocess
import sys
import time

server_bin, conninfo_file = sys.argv[1], sys.argv[2]
conninfo = open(conninfo_file).read().strip()


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def start(db):
    p = subprocess.Popen([server_bin, "--port", "0", "--workers", "2", "--db", db, "--db-pool", "8"],
                         stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    m = re.match(r"listening on .*:(\d+)$", line.strip())
    if not m:
        p.kill()
        fail(f"tfb_server did not report its address: {line!r}")
    return p, int(m.group(1))


def stop(p):
    """SIGTERM; the server must exit 0 within 10 s (a leak or sanitizer
    report at shutdown is a non-zero exit). Returns its output."""
    p.terminate()
    try:
        out, _ = p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        fail("tfb_server did not stop on SIGTERM")
    if p.returncode != 0:
        fail(f"tfb_server exited with status {p.returncode}: {out!r}")
    return out


def get(port, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path)
    r = c.getresponse()
    body = r.read()
    c.close()
    return r.status, {k.lower(): v for k, v in r.getheaders()}, body


def psql(sql):
    out = subprocess.run(["psql", "-X", "-A", "-t", "-d", conninfo, "-c", sql],
                         check=True, capture_output=True, text=True).stdout
    return out.strip()


def check_headers(path, headers, body, content_type):
    for h in ("server", "date", "content-type", "content-length"):
        if h not in headers:
            fail(f"{path}: no {h} header: {headers}")
    if headers["content-type"].lower() != content_type:
        fail(f"{path}: Content-Type {headers['content-type']!r}, want {content_type!r}")
    if int(headers["content-length"]) != len(body):
        fail(f"{path}: Content-Length {headers['content-length']} but {len(body)} bytes")
    if not re.match(r"\w{3}, \d{2} \w{3} \d{4} \d{2}:\d{2}:\d{2} GMT$", headers["date"]):
        fail(f"{path}: Date {headers['date']!r} is not an HTTP date")


def check_rows(path, rows, n):
    if not isinstance(rows, list) or len(rows) != n:
        fail(f"{path}: want a list of {n} rows, got {str(rows)[:200]}")
    for row in rows:
        if set(row) != {"id", "randomNumber"} or not 1 <= row["id"] <= 10000 \
                or not 1 <= row["randomNumber"] <= 10000:
            fail(f"{path}: bad row {row}")


proc, port = start(conninfo)
try:
    # /plaintext and /json
    status, h, body = get(port, "/plaintext")
    if status != 200 or body != b"Hello, World!":
        fail(f"/plaintext: {status} {body!r}")
    check_headers("/plaintext", h, body, "text/plain")
    status, h, body = get(port, "/json")
    if status != 200 or json.loads(body) != {"message": "Hello, World!"}:
        fail(f"/json: {status} {body!r}")
    check_headers("/json", h, body, "application/json")

    # Pipelining: 16 requests in one write, 16 answers in order.
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n" * 16)
    got = b""
    while got.count(b"Hello, World!") < 16:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
    s.close()
    if got.count(b"HTTP/1.1 200 OK") != 16:
        fail(f"pipelined /plaintext: {got.count(b'HTTP/1.1 200 OK')} answers of 16")

    # /db: one row, as in the database.
    status, h, body = get(port, "/db")
    row = json.loads(body)
    check_headers("/db", h, body, "application/json")
    check_rows("/db", [row], 1)
    if int(psql(f"SELECT randomNumber FROM World WHERE id = {row['id']}")) != row["randomNumber"]:
        fail(f"/db: row {row} differs from the database")

    # /queries: clamping, and rows as in the database.
    for q, n in [("", 1), ("?queries=", 1), ("?queries=0", 1), ("?queries=foo", 1),
                 ("?queries=-5", 1), ("?queries=1", 1), ("?queries=20", 20),
                 ("?queries=501", 500), ("?queries=99999999999", 500), ("?x=1&queries=7", 7)]:
        status, h, body = get(port, "/queries" + q)
        if status != 200:
            fail(f"/queries{q}: {status} {body[:200]!r}")
        check_headers("/queries" + q, h, body, "application/json")
        check_rows("/queries" + q, json.loads(body), n)
    rows = json.loads(get(port, "/queries?queries=5")[2])
    for r in rows:
        if int(psql(f"SELECT randomNumber FROM World WHERE id = {r['id']}")) != r["randomNumber"]:
            fail(f"/queries: row {r} differs from the database")

    # /updates: clamping, and the new numbers are in the database.
    for q, n in [("", 1), ("?queries=0", 1), ("?queries=bar", 1), ("?queries=501", 500)]:
        status, h, body = get(port, "/updates" + q)
        check_headers("/updates" + q, h, body, "application/json")
        check_rows("/updates" + q, json.loads(body), n)
    before = psql("SELECT sum(randomNumber::bigint) FROM World")
    status, h, body = get(port, "/updates?queries=20")
    rows = json.loads(body)
    check_rows("/updates", rows, 20)
    for r in rows:
        if int(psql(f"SELECT randomNumber FROM World WHERE id = {r['id']}")) != r["randomNumber"]:
            fail(f"/updates: row {r} did not reach the database")
    if psql("SELECT sum(randomNumber::bigint) FROM World") == before:
        fail("/updates: nothing in the database changed")

    # /fortunes: 13 rows sorted by message, escaped, UTF-8.
    status, h, body = get(port, "/fortunes")
    check_headers("/fortunes", h, body, "text/html; charset=utf-8")
    page = body.decode("utf-8")
    if not page.startswith("<!DOCTYPE html><html><head><title>Fortunes</title></head><body><table>"):
        fail(f"/fortunes: page head {page[:120]!r}")
    cells = re.findall(r"<tr><td>(\d+)</td><td>(.*?)</td></tr>", page)
    if len(cells) != 13:
        fail(f"/fortunes: {len(cells)} rows, want 13")
    messages = [html.unescape(m) for _, m in cells]
    if messages != sorted(messages):
        fail("/fortunes: rows are not sorted by message")
    if "Additional fortune added at request time." not in messages:
        fail("/fortunes: the fortune added at request time is missing")
    if "&lt;script&gt;alert(&quot;This should not be displayed in a browser alert box.&quot;);" \
            "&lt;/script&gt;" not in page:
        fail("/fortunes: the <script> fortune is not escaped")
    if "フレームワークのベンチマーク" not in page:
        fail("/fortunes: the Japanese fortune did not survive")

    status, _, _ = get(port, "/nope")
    if status != 404:
        fail(f"/nope: {status}")

    # The Date header follows the clock.
    first = get(port, "/plaintext")[1]["date"]
    time.sleep(1.1)
    if get(port, "/plaintext")[1]["date"] == first:
        fail("the Date header did not change after a second")

    # Many at once: 200 requests from 20 clients, every one answered.
    paths = ["/db", "/queries?queries=10", "/updates?queries=5", "/fortunes", "/json"] * 40
    with concurrent.futures.ThreadPoolExecutor(20) as ex:
        statuses = list(ex.map(lambda p: get(port, p)[0], paths))
    if statuses.count(200) != len(paths):
        fail(f"concurrent requests: {len(paths) - statuses.count(200)} of {len(paths)} failed")
finally:
    out = stop(proc)
if "stopped" not in out:
    fail(f"tfb_server did not stop cleanly: {out!r}")

# A database that is not there: 500 with the reason; the rest serves on.
free = socket.socket()
free.bind(("127.0.0.1", 0))
dead = free.getsockname()[1]
free.close()
proc, port = start(f"host=127.0.0.1 port={dead} dbname=x user=x sslmode=disable")
try:
    status, _, body = get(port, "/db")
    if status != 500 or b"onnection refused" not in body:
        fail(f"/db without a database: {status} {body!r}")
    status, _, body = get(port, "/json")
    if status != 200:
        fail(f"/json beside a dead database: {status}")
finally:
    stop(proc)
# General Requirement #7: a Sync, and so a transaction, per statement. The
# server's count (pg_stat_database.xact_commit) of a database only this
# server uses; its backends flush their counts as they exit, at the stop.
counts = re.sub(r"dbname=\S+", "dbname=tfb_counts", conninfo)
requests = 10
for path, per_request in (("/queries?queries=20", 20), ("/updates?queries=20", 21)):
    before = int(psql("SELECT xact_commit FROM pg_stat_database WHERE datname = 'tfb_counts'"))
    proc, port = start(counts)
    try:
        for _ in range(requests):
            status, _, body = get(port, path)
            if status != 200:
                fail(f"{path} on tfb_counts: {status} {body!r}")
    finally:
        stop(proc)
    deadline = time.monotonic() + 10
    while int(psql("SELECT count(*) FROM pg_stat_activity WHERE datname = 'tfb_counts'")) != 0:
        if time.monotonic() > deadline:
            fail("the server's database connections did not end within 10 s of its stop")
        time.sleep(0.01)
    committed = int(psql("SELECT xact_commit FROM pg_stat_database "
                         "WHERE datname = 'tfb_counts'")) - before
    if committed < requests * per_request:
        fail(f"{requests} x {path} committed {committed} transactions; the rule asks for "
             f"at least {per_request} a request")
    print(f"{requests} x {path}: {committed} transactions committed "
          f"(at least {requests * per_request})")

print("tfb_server: plaintext (pipelined), json, db, queries, fortunes, updates to the "
      "requirements; clamping, escaping, Date, a dead database, 200 concurrent requests, "
      "a transaction per statement")
