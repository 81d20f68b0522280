"""scheme https, tls_config and basic_auth, against an HTTPS pprof endpoint of
this test (Python's ssl) whose certificate, for the name target.test, is
signed by a throw-away CA made with the openssl command-line tool.

  - ca_file + server_name verifies the certificate for that name while
    connecting to 127.0.0.1, and basic_auth (password from password_file)
    gets through: the target is up and its profiles are stored;
  - insecure_skip_verify scrapes without the CA;
  - without the CA the scrape fails with a TLS error, and with a wrong
    password with HTTP 401; both show on /targets.
"""
import base64
import os
import shutil
import ssl
import subprocess
import tempfile
import threading
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import harness as h
from test_scraper import targets, write_file
from test_scraper_redis import goroutine_profile

USER, PASSWORD = "scraper", "s3cret pass"


def make_certs(d):
    def run(*args):
        subprocess.run(["openssl", *args], cwd=d, check=True, capture_output=True, timeout=60)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
        "-days", "1", "-subj", "/CN=ember test CA")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "srv.key", "-out", "srv.csr",
        "-subj", "/CN=target.test")
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=DNS:target.test\n")
    run("x509", "-req", "-in", "srv.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "srv.pem", "-days", "1", "-extfile", "san.ext")


class HttpsTarget:
    def __init__(self, d):
        want = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.headers.get("Authorization") != want:
                    self.send_response(401)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = goroutine_profile()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(d, "srv.pem"), os.path.join(d, "srv.key"))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.address = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def job(name, target, tls, auth):
    return (f"  - job_name: {name}\n"
            "    scheme: https\n"
            "    scrape_interval: 1s\n"
            "    profiling_config:\n"
            "      pprof_config:\n"
            "        memory: {enabled: false}\n"
            "        block: {enabled: false}\n"
            "        mutex: {enabled: false}\n"
            "        process_cpu: {enabled: false}\n"
            f"    static_configs: [{{targets: ['{target}']}}]\n" + tls + auth)


class ScraperTlsTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="ember-scr-tls-")
        make_certs(cls.dir)
        cls.target = HttpsTarget(cls.dir)
        pw = os.path.join(cls.dir, "password")
        write_file(pw, PASSWORD + "\n")
        ca = os.path.join(cls.dir, "ca.pem")
        auth = f"    basic_auth: {{username: {USER}, password_file: {pw}}}\n"
        wrong = f"    basic_auth: {{username: {USER}, password: nope}}\n"
        verified = f"    tls_config: {{ca_file: {ca}, server_name: target.test}}\n"
        cls.config = os.path.join(cls.dir, "parca.yaml")
        write_file(cls.config, "scrape_configs:\n"
                   + job("verified", cls.target.address, verified, auth)
                   + job("insecure", cls.target.address,
                         "    tls_config: {insecure_skip_verify: true}\n", auth)
                   + job("noca", cls.target.address, "", auth)
                   + job("badauth", cls.target.address, verified, wrong))
        cls.srv = h.Ember(args=[f"--scrape.config-file={cls.config}"])
        try:
            cls.srv.start()
        except Exception:
            cls.target.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.srv.cleanup()
        cls.target.stop()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def health(self):
        return {t["scrapePool"]: (t["health"], t["lastError"])
                for t in targets(self.srv)["activeTargets"]}

    def test_tls_and_basic_auth(self):
        h.wait_for(lambda: all(v[0] != "unknown" for v in self.health().values()) and
                   len(self.health()) == 4, timeout=15, what="every job scraped once")
        got = self.health()
        self.assertEqual(got["verified"], ("up", ""))
        self.assertEqual(got["insecure"], ("up", ""))
        self.assertEqual(got["noca"][0], "down")
        self.assertTrue(got["noca"][1].startswith("tls:"), got["noca"])
        self.assertEqual(got["badauth"][0], "down")
        self.assertIn("401", got["badauth"][1])
        # The URL keeps the address; only the TLS name was target.test.
        urls = {t["scrapePool"]: t["scrapeUrl"] for t in targets(self.srv)["activeTargets"]}
        self.assertTrue(urls["verified"].startswith(f"https://{self.target.address}/"))
        pid = "goroutine:goroutine:count:goroutine:count"
        total = h.wait_for(lambda: self.srv.series_sum(pid, '{service_name="verified"}',
                                                       h.now_ms() - 60_000, h.now_ms() + 1000),
                           timeout=10, what="profiles of the verified job")
        self.assertGreater(total, 0)


if __name__ == "__main__":
    unittest.main()
