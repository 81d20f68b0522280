"""--auth.tokens-file (issue 12): credentials bound to tenants and scopes.

A matrix of credentials x tenants x routes x read/write, through the
all-in-one `ember` and through `ember-querier` + `ember-ingester`s: exactly
the allowed cells answer 200, the others 401 (no or bad credential) or 403
(a tenant or scope the credential lacks). Also: a token removed by a SIGHUP
reload is refused, a reload of a broken file keeps the old table, a tampered
basic header is refused."""
import base64
import hashlib
import os
import signal
import tempfile
import unittest
from urllib.parse import urlencode

import distributed_harness as dh
import harness as h

GOOD = "pprof/pyroscope-cpu.pprof"


def sha(s):
    return "sha256:" + hashlib.sha256(s.encode()).hexdigest()


def basic(user, pw):
    return "Basic " + base64.b64encode(f"{user}:{pw}".encode()).decode()


# name -> (Authorization header, {tenants} or "*", read, write); None = invalid
CREDS = {
    "tok-a-rw": ("Bearer tok-a-rw", {"a"}, True, True),
    "tok-ab-r": ("Bearer tok-ab-r", {"a", "b"}, True, False),
    "tok-any-r": ("Bearer tok-any-r", "*", True, False),
    "alice-b-w": (basic("alice", "pw-alice"), {"b"}, False, True),
    "none": (None, None, False, False),
    "unknown": ("Bearer tok-nope", None, False, False),
    "prefix": ("Bearer tok-a-r", None, False, False),
    "tampered": (basic("alice", "pw-alicf"), None, False, False),
    "wrong-user": (basic("bob", "pw-alice"), None, False, False),
}

FILE = f"""# issue 12 test credentials
token {sha('tok-a-rw')} tenants=a scope=read,write
token {sha('tok-ab-r')} tenants=a,b scope=read
token {sha('tok-any-r')} tenants=* scope=read
basic alice {sha('pw-alice')} tenants=b scope=write
"""


def expected(cred, tenants, write):
    _, held, can_read, can_write = CREDS[cred]
    if held is None:
        return 401
    if not (can_write if write else can_read):
        return 403
    if held != "*" and not set(tenants.split("|")) <= held:
        return 403
    return 200


def write_file(text):
    fd, path = tempfile.mkstemp(prefix="ember-auth-", suffix=".txt")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    return path


class Matrix:
    """Mixin: runs the matrix against self.writer() and self.reader()."""

    def hdrs(self, cred, tenant):
        authz = CREDS[cred][0]
        out = {"X-Scope-OrgID": tenant}
        if authz:
            out["Authorization"] = authz
        return out

    def write(self, srv, cred, tenant, route):
        raw = h.read_testdata(GOOD)
        if route == "push":
            return srv.push([({"__name__": "process_cpu", "service_name": "auth-svc"}, [raw])],
                            headers=self.hdrs(cred, tenant)).status
        q = urlencode({"name": "auth-svc", "format": "pprof"})
        return srv.request("POST", f"/ingest?{q}", raw, dict(self.hdrs(cred, tenant), **{
            "Content-Type": "application/octet-stream"})).status

    def read(self, srv, cred, tenant, route):
        end = h.now_ms() + 3600_000
        if route == "LabelValues":
            req_cls, _ = h.rpc_classes(f"{h.QUERIER}/LabelValues")
            return srv.call(f"{h.QUERIER}/LabelValues", req_cls(name="service_name", start=0, end=end),
                            headers=self.hdrs(cred, tenant), check=False).status
        if route == "ProfileTypes":
            req_cls, _ = h.rpc_classes(f"{h.QUERIER}/ProfileTypes")
            return srv.call(f"{h.QUERIER}/ProfileTypes", req_cls(start=0, end=end),
                            headers=self.hdrs(cred, tenant), check=False).status
        q = urlencode({"label": "__name__"})
        return srv.request("GET", f"/pyroscope/label-values?{q}", None,
                           self.hdrs(cred, tenant)).status

    def run_matrix(self, writer, reader, read_routes):
        bad = []
        cells = 0
        for cred in CREDS:
            for tenant in ("a", "b"):
                for route in ("push", "ingest"):
                    got, want = self.write(writer, cred, tenant, route), expected(cred, tenant, True)
                    cells += 1
                    if got != want:
                        bad.append(("write", cred, tenant, route, got, want))
            for tenant in ("a", "b", "a|b"):
                for route in read_routes:
                    got, want = self.read(reader, cred, tenant, route), expected(cred, tenant, False)
                    cells += 1
                    if got != want:
                        bad.append(("read", cred, tenant, route, got, want))
        self.assertEqual(bad, [], f"{len(bad)} of {cells} cells wrong")
        return cells


class AuthAllInOneTest(Matrix, unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.path = write_file(FILE)
        cls.srv = h.Ember(args=("--auth.multitenancy-enabled=true", f"--auth.tokens-file={cls.path}"))
        cls.srv.start()

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()
        os.unlink(cls.path)

    def test_1_matrix(self):
        self.run_matrix(self.srv, self.srv, ("LabelValues", "ProfileTypes", "label-values"))

    def test_2_reload_on_sighup(self):
        self.assertEqual(self.read(self.srv, "tok-ab-r", "a", "LabelValues"), 200)
        with open(self.path, "w") as f:
            f.write("\n".join(l for l in FILE.splitlines() if sha("tok-ab-r") not in l) + "\n")
        self.srv.proc.send_signal(signal.SIGHUP)
        h.wait_for(lambda: self.read(self.srv, "tok-ab-r", "a", "LabelValues") == 401,
                   timeout=10, what="the removed token to be refused")
        self.assertEqual(self.read(self.srv, "tok-a-rw", "a", "LabelValues"), 200)
        # a broken file keeps the table that was in force
        with open(self.path, "w") as f:
            f.write("token not-a-hash tenants=a scope=read\n")
        refused = self.reloads_refused()
        self.srv.proc.send_signal(signal.SIGHUP)
        # Wait for ember to say it refused the file, not for a guessed time.
        h.wait_for(lambda: self.reloads_refused() > refused, timeout=10,
                   what="the broken tokens file to be refused")
        self.assertEqual(self.read(self.srv, "tok-a-rw", "a", "LabelValues"), 200)
        self.assertTrue(self.srv.alive())
        with open(self.path, "w") as f:
            f.write(FILE)
        self.srv.proc.send_signal(signal.SIGHUP)
        h.wait_for(lambda: self.read(self.srv, "tok-ab-r", "a", "LabelValues") == 200, timeout=10)

    def reloads_refused(self):
        with open(self.srv.log_path, "rb") as f:
            return f.read().count(b"SIGHUP reload failed")

    def test_3_unprotected_routes(self):
        self.assertEqual(h.http_request(self.srv.port, "GET", "/ready").status, 200)


class AuthDistributedTest(Matrix, dh.ClusterTestCase):

    @classmethod
    def set_up(cls):
        cls.path = write_file(FILE)
        args = ("--auth.multitenancy-enabled=true", f"--auth.tokens-file={cls.path}")
        cls.redis = dh.Redis()
        cls.redis.start()
        cls.ingesters = [dh.ingester(cls.redis.url, args=args) for _ in range(2)]
        cls.querier = dh.querier(cls.redis.url, args=args)
        for p in [*cls.ingesters, cls.querier]:
            cls.procs.append(p)
            p.start()
        dh.wait_members(cls.querier, 2)

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        os.unlink(cls.path)

    def test_matrix(self):
        self.run_matrix(self.ingesters[0], self.querier, ("LabelValues", "ProfileTypes"))


if __name__ == "__main__":
    unittest.main()
