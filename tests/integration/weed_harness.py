"""A real S3-compatible server for the tests: SeaweedFS's `weed server -s3`
(built from the Go module proxy by scripts/build-seaweedfs.sh, cached) on
free loopback ports, with one identity so signatures are checked. Without
weed the caller's test skips, except in CI (CI=1), where it fails."""
import hashlib
import json
import os
import signal
import subprocess
import unittest

import harness as h

ACCESS, SECRET, BUCKET = "emberak", "embersecret", "ember-test"


def weed_binary():
    script = os.path.join(h.SRC_DIR, "scripts", "build-seaweedfs.sh")
    r = subprocess.run([script], capture_output=True, text=True)
    path = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else ""
    if os.access(path, os.X_OK):
        return path
    msg = "weed (SeaweedFS) could not be built: " + r.stderr[-500:]
    if os.environ.get("CI"):
        raise AssertionError(msg)
    raise unittest.SkipTest(msg)


class Weed:
    """weed as our own child; stop() and start() again keep its data and ports."""

    def __init__(self):
        self.binary = weed_binary()
        self.dir = h.temp_dir("ember-weed-")
        self.cfg = os.path.join(self.dir, "s3.json")
        with open(self.cfg, "w") as f:
            json.dump({"identities": [{"name": "ember", "credentials": [
                {"accessKey": ACCESS, "secretKey": SECRET}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}, f)
        # gRPC ports default to port+10000 and the Iceberg and Lance catalogs
        # to fixed ports (8181, 9101): name the first, all free, and turn the
        # others off, so two runs on one machine never collide.
        self.ports = {n: h.free_port() for n in ("master", "volume", "filer", "s3", "master.grpc",
                                                 "volume.grpc", "filer.grpc", "s3.grpc")}
        self.s3_port = self.ports["s3"]
        self.data = os.path.join(self.dir, "data")
        os.makedirs(self.data)
        self.proc = None
        self.log = None

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.s3_port}"

    def start(self):
        p = self.ports
        cmd = [self.binary, "server", "-ip=127.0.0.1", "-ip.bind=127.0.0.1", f"-dir={self.data}",
               f"-master.port={p['master']}", f"-master.port.grpc={p['master.grpc']}",
               f"-volume.port={p['volume']}", f"-volume.port.grpc={p['volume.grpc']}",
               f"-filer.port={p['filer']}", f"-filer.port.grpc={p['filer.grpc']}",
               "-s3", f"-s3.port={p['s3']}", f"-s3.port.grpc={p['s3.grpc']}",
               "-s3.port.iceberg=0", "-s3.port.lance=0", f"-s3.config={self.cfg}",
               "-s3.domainName=localhost",  # bucket.localhost: virtual-host style
               "-master.volumeSizeLimitMB=64", "-volume.max=20"]
        self.log = open(os.path.join(self.dir, "weed.log"), "a")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            h.wait_for(self.make_bucket, timeout=180, interval=1.0, what="weed's S3 port")
        except Exception as e:
            self.stop()
            with open(os.path.join(self.dir, "weed.log")) as f:
                raise AssertionError(f"{e}; weed's log ends: {f.read()[-3000:]}") from e
        return self

    def stop(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None
        self.log.close()

    def storage_args(self, prefix):
        """The flags of an ember binary that stores its blocks here under prefix."""
        return ["--storage.backend=s3", f"--storage.s3.endpoint={self.endpoint}",
                f"--storage.s3.bucket-name={BUCKET}", "--storage.s3.force-path-style",
                f"--storage.s3.access-key-id={ACCESS}",
                f"--storage.s3.secret-access-key={SECRET}", f"--storage.prefix={prefix}"]

    def raw(self, method, path, data_file=None, headers=(), out="/dev/null"):
        """curl's own SigV4 client: the independent way in."""
        cmd = ["curl", "-s", "-o", out, "-w", "%{http_code}", "-X", method,
               "--aws-sigv4", "aws:amz:us-east-1:s3", "--user", f"{ACCESS}:{SECRET}"]
        body = b""
        if data_file:
            with open(data_file, "rb") as f:
                body = f.read()
            cmd += ["--data-binary", f"@{data_file}"]
        cmd += ["-H", "x-amz-content-sha256: " + hashlib.sha256(body).hexdigest()]
        for hd in headers:
            cmd += ["-H", hd]
        cmd.append(f"http://127.0.0.1:{self.s3_port}{path}")
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        return int(r.stdout or 0)

    def make_bucket(self):
        if self.proc.poll() is not None:
            raise AssertionError("weed exited; see its log")
        return self.raw("PUT", f"/{BUCKET}") in (200, 409)
