"""Scopes on every route (issue 25, part 3).

Each binary lists the routes it serves at GET /debug/routes (path, methods,
scope, straight from its registration table). The walk: every listed route
must have a row in docs/operations.md's route table with the same scope, and
is called with a read-only, a write-only and no credential; the status must
follow the table's scope, whatever the handler would then do with the (empty)
body: public -> never 401/403; read -> 401 / 403 for the write-only one /
passes for the read-only one; write -> the other way round. Run on the
all-in-one `ember` and on `ember-ingester` + `ember-querier` over Redis.

Also: a read-only token gets 403 from settings Set/Delete and nothing
changes, a write token can Set; OTLP/HTTP refuses a caller without a
credential before it looks at the body (401 for a body it cannot parse)."""
import json
import os
import re
import tempfile
import unittest

import distributed_harness as dh
import harness as h

from test_auth import sha, write_file

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "operations.md")
READ = "Bearer scope-read-only"
WRITE = "Bearer scope-write-only"
FILE = f"""# test_scopes.py
token {sha('scope-read-only')} tenants=* scope=read
token {sha('scope-write-only')} tenants=* scope=write
"""
ROW = re.compile(r"^\| `([^`]+)` \| ([^|]+) \| (public|read|write) \| ([^|]+) \|\s*$")
SETTINGS = "settings.v1.SettingsService"


def doc_table():
    """{path: scope} from the table under "Routes and the scope each needs"."""
    with open(DOC, encoding="utf-8") as f:
        text = f.read()
    section = text.split("### Routes and the scope each needs", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        m = ROW.match(line)
        if m:
            rows[m.group(1)] = m.group(3)
    return rows


def served_routes(srv):
    r = srv.request("GET", "/debug/routes")
    if r.status != 200:
        raise AssertionError(f"/debug/routes: {r.status}")
    out = []
    for line in r.body.decode().splitlines():
        path, methods, scope = line.split("\t")
        out.append((path, methods, scope))
    return out


def expected(scope, cred):
    """The status class a credential must get: 'pass' (anything but 401/403), 401 or 403."""
    if scope == "public" or cred == scope:
        return "pass"
    return 401 if cred == "none" else 403


def got_class(status):
    return status if status in (401, 403) else "pass"


class Walk:
    """Mixin: walks self.servers() against the docs table."""

    def call_route(self, srv, path, methods, cred):
        method = "GET" if methods == "GET" else "POST"
        if path.endswith("*"):
            path = path[:-1] + "scope-walk"
        hdrs = {"Content-Type": "application/proto"} if method == "POST" else {}
        if cred != "none":
            hdrs["Authorization"] = READ if cred == "read" else WRITE
        body = b"" if method == "POST" else None
        return srv.request(method, path, body, hdrs).status

    def walk(self, srv):
        table = doc_table()
        routes = served_routes(srv)
        self.assertGreater(len(routes), 10)
        missing = [p for p, _, _ in routes if p not in table]
        self.assertEqual(missing, [], "routes served but not in docs/operations.md's table")
        wrong_scope = [(p, s, table[p]) for p, _, s in routes if table[p] != s]
        self.assertEqual(wrong_scope, [], "registered scope differs from the docs table")
        bad, cells = [], 0
        for path, methods, _ in routes:
            for cred in ("none", "read", "write"):
                got = got_class(self.call_route(srv, path, methods, cred))
                want = expected(table[path], cred)
                cells += 1
                if got != want:
                    bad.append((path, cred, got, want))
        self.assertEqual(bad, [], f"{len(bad)} of {cells} cells wrong")
        return cells


class ScopesAllInOneTest(Walk, unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.path = write_file(FILE)
        cls.srv = h.Ember(args=(f"--auth.tokens-file={cls.path}",))
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()
        os.unlink(cls.path)

    def settings(self, method, body, authz):
        return self.srv.request("POST", f"/{SETTINGS}/{method}", json.dumps(body).encode(),
                                {"Content-Type": "application/json", "Authorization": authz})

    def names(self):
        r = self.settings("Get", {}, READ)
        self.assertEqual(r.status, 200, r.body)
        return {s["name"]: s["value"] for s in json.loads(r.body).get("settings", [])}

    def test_walk_every_route(self):
        self.walk(self.srv)

    def test_read_only_cannot_change_settings(self):
        r = self.settings("Set", {"setting": {"name": "scope-x", "value": "1"}}, READ)
        self.assertEqual(r.status, 403, r.body)
        self.assertEqual(json.loads(r.body)["code"], "permission_denied")
        self.assertNotIn("scope-x", self.names())
        self.assertEqual(self.settings("Set", {"setting": {"name": "scope-y", "value": "1"}},
                                       WRITE).status, 200)
        self.assertEqual(self.names().get("scope-y"), "1")
        r = self.settings("Delete", {"name": "scope-y"}, READ)
        self.assertEqual(r.status, 403, r.body)
        self.assertEqual(self.names().get("scope-y"), "1")

    def test_otlp_http_checks_the_credential_before_the_body(self):
        garbage = b"\xff\xff\xff not protobuf"
        r = self.srv.request("POST", "/v1development/profiles", garbage,
                             {"Content-Type": "application/x-protobuf"})
        self.assertEqual(r.status, 401, r.body)
        r = self.srv.request("POST", "/v1development/profiles", garbage,
                             {"Content-Type": "application/x-protobuf", "Authorization": READ})
        self.assertEqual(r.status, 403, r.body)
        r = self.srv.request("POST", "/v1development/profiles", garbage,
                             {"Content-Type": "application/x-protobuf", "Authorization": WRITE})
        self.assertEqual(r.status, 400, r.body)


class ScopesDistributedTest(Walk, dh.ClusterTestCase):

    @classmethod
    def set_up(cls):
        cls.path = write_file(FILE)
        args = (f"--auth.tokens-file={cls.path}",)
        cls.redis = dh.Redis()
        cls.redis.start()
        cls.ingester = dh.ingester(cls.redis.url, args=args)
        cls.querier = dh.querier(cls.redis.url, args=args)
        for p in (cls.ingester, cls.querier):
            cls.procs.append(p)
            p.start()
        dh.wait_members(cls.querier, 1)

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        os.unlink(cls.path)

    def test_walk_ingester(self):
        self.walk(self.ingester)

    def test_walk_querier(self):
        self.walk(self.querier)


if __name__ == "__main__":
    unittest.main()
