"""The container image, deploy/docker/Dockerfile.

Always (no container runtime needed): the Dockerfile is parsed and held against
the real build: it starts from Debian 12 (build) and Debian 12 slim (runtime); the
build stage installs the project's own dependency list and builds with CMake exactly
the targets that produce the five binaries, whose `cmake --install` (run here on
the test's build tree) puts them where the runtime stage copies from; the runtime
stage's packages provide every shared library the binaries need (each binary's
NEEDED entries, owner package looked up with dpkg on this Debian 12 machine) and
no package that provides none (ca-certificates aside, for the scraper's TLS); the
binaries land in the directory the chart's commands use; the user is the non-root
uid the chart's podSecurityContext runs as; /data is a volume and 4040 exposed.

With podman, runc and debootstrap installed (scripts/install-deps.sh installs them; set
EMBER_IMAGE_BUILD=0 to skip): builds the image with podman from a debootstrap'ed Debian 12
imported as the base, runs the all-in-one container once, checks /ready and its uid, pushes
a profile and reads it back. About 6 minutes on a fresh 2-core machine, 2 with podman's layer
cache.
"""
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import unittest

import yaml

import harness as h
import k8s_harness as k

DOCKERFILE = os.path.join(h.SRC_DIR, "deploy", "docker", "Dockerfile")
BINARIES = ("ember", "ember-ingester", "ember-querier", "ember-scraper", "ember-agent")


def parse_dockerfile(path):
    """[(stage name, base, [(instruction, text)])] with ARG defaults substituted in
    FROM, continuation lines joined and comments dropped."""
    with open(path) as f:
        text = f.read()
    text = re.sub(r"\\\n", " ", text)
    args, stages = {}, []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, rest = line.partition(" ")
        instr = instr.upper()
        if instr == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name.strip()] = default.strip()
            continue
        if instr == "FROM":
            base = re.sub(r"\$\{(\w+)\}", lambda m: args.get(m.group(1), ""), rest.split()[0])
            name = rest.split()[2] if len(rest.split()) >= 3 and rest.split()[1].upper() == "AS" else None
            stages.append((name, base, []))
            continue
        stages[-1][2].append((instr, rest))
    return stages


def apt_packages(run_text):
    """Package names of `apt-get install` in a RUN line."""
    m = re.search(r"apt-get install ([^&;|]+)", run_text)
    if not m:
        return []
    return [w for w in m.group(1).split() if not w.startswith("-")]


def needed_libs(binary):
    out = subprocess.run(["objdump", "-p", binary], capture_output=True, text=True, check=True).stdout
    return re.findall(r"NEEDED\s+(\S+)", out)


_LDD, _OWNER = {}, {}


def owner_package(lib, binary):
    """The Debian package that provides lib as the binary loads it (ldd + dpkg -S)."""
    if binary not in _LDD:
        _LDD[binary] = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True).stdout
    out = _LDD[binary]
    m = re.search(rf"^\s*{re.escape(lib)} => (\S+)", out, re.M)
    if not m:
        raise AssertionError(f"ldd {binary}: {lib} not resolved:\n{out}")
    path = m.group(1)
    candidates = {path, os.path.realpath(path)}
    for p in list(candidates):
        if p.startswith("/lib/"):
            candidates.add("/usr" + p)
    for p in sorted(candidates):
        if p not in _OWNER:
            r = subprocess.run(["dpkg", "-S", p], capture_output=True, text=True)
            _OWNER[p] = r.stdout.split(":")[0].strip() if r.returncode == 0 else None
        if _OWNER[p]:
            return _OWNER[p]
    raise AssertionError(f"no package owns {sorted(candidates)}")


class DockerfileTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.stages = parse_dockerfile(DOCKERFILE)
        cls.build = [s for s in cls.stages if s[0] == "build"][0]
        cls.runtime = cls.stages[-1]
        with open(os.path.join(k.CHART, "values.yaml")) as f:
            cls.values = yaml.safe_load(f)

    def instrs(self, stage, kind):
        return [t for i, t in stage[2] if i == kind]

    def test_bases_are_debian_12(self):
        self.assertEqual("debian:12", self.build[1])
        self.assertEqual("debian:12-slim", self.runtime[1])
        self.assertEqual("runtime", self.runtime[0], "the runtime stage is the default target")

    def test_build_stage_builds_what_the_runtime_copies(self):
        runs = " ".join(self.instrs(self.build, "RUN"))
        self.assertIn("./scripts/install-deps.sh", runs)
        self.assertTrue(os.access(os.path.join(h.SRC_DIR, "scripts", "install-deps.sh"), os.X_OK))
        copies = self.instrs(self.build, "COPY")
        self.assertIn("scripts/install-deps.sh scripts/install-deps.sh", copies)
        targets = re.search(r"--target ((?:[\w-]+ ?)+)", runs).group(1).split()
        self.assertEqual(sorted(BINARIES), sorted(targets))
        for t in targets:
            k.find_binary(t)        # the build tree really produces each target
        prefix = re.search(r"cmake --install build --prefix (\S+)", runs).group(1)
        self.assertIn("-DCMAKE_BUILD_TYPE=RelWithDebInfo", runs)
        # the install rules put exactly these binaries under <prefix>/bin
        build_dir = os.path.dirname(os.path.dirname(os.path.dirname(k.find_binary("ember"))))
        dest = tempfile.mkdtemp(prefix="ember-install-")
        try:
            r = subprocess.run(["cmake", "--install", build_dir, "--prefix", dest], capture_output=True, text=True)
            self.assertEqual(0, r.returncode, r.stderr)
            self.assertEqual(sorted(BINARIES), sorted(os.listdir(os.path.join(dest, "bin"))))
        finally:
            shutil.rmtree(dest, ignore_errors=True)
        copy = [c for c in self.instrs(self.runtime, "COPY") if c.startswith("--from=build")]
        self.assertEqual(1, len(copy))
        src, dst = copy[0].split()[1:3]
        self.assertEqual(prefix.rstrip("/") + "/bin", src.rstrip("/"))
        # the chart's commands name <binDir>/<binary>
        self.assertEqual(self.values["image"]["binDir"].rstrip("/"), dst.rstrip("/"))
        entry = self.instrs(self.runtime, "ENTRYPOINT")[0]
        self.assertEqual(f'["{dst.rstrip("/")}/ember"]', entry)

    def test_runtime_packages_provide_every_needed_library(self):
        pkgs = set()
        for run in self.instrs(self.runtime, "RUN"):
            pkgs |= set(apt_packages(run))
        self.assertTrue(pkgs, "the runtime stage installs its libraries")
        used = set()
        for b in BINARIES:
            binary = k.find_binary(b)
            for lib in needed_libs(binary):
                owner = owner_package(lib, binary)
                with self.subTest(binary=b, lib=lib):
                    if owner != "libc6":       # libc6 is in every Debian image
                        self.assertIn(owner, pkgs, f"{b} needs {lib} from {owner}")
                used.add(owner)
        extra = pkgs - used - {"ca-certificates"}
        self.assertEqual(set(), extra, "packages that provide no library a binary needs")

    def test_non_root_volume_and_port(self):
        user = self.instrs(self.runtime, "USER")[-1]
        uid, _, gid = user.partition(":")
        self.assertNotEqual("0", uid)
        self.assertEqual(self.values["podSecurityContext"]["runAsUser"], int(uid))
        self.assertEqual(self.values["podSecurityContext"]["runAsGroup"], int(gid))
        self.assertEqual(['["/data"]'], self.instrs(self.runtime, "VOLUME"))
        self.assertEqual(["4040"], self.instrs(self.runtime, "EXPOSE"))
        runs = " ".join(self.instrs(self.runtime, "RUN"))
        self.assertIn(f"--uid {uid}", runs)
        self.assertIn(f"chown {uid}:{gid} /data", runs)

    def test_dockerignore_keeps_build_trees_out(self):
        with open(os.path.join(h.SRC_DIR, ".dockerignore")) as f:
            pats = {l.strip() for l in f if l.strip() and not l.startswith("#")}
        self.assertTrue({"build", ".git"} <= pats, pats)


def _podman_why_not():
    if os.environ.get("EMBER_IMAGE_BUILD") == "0":
        return "EMBER_IMAGE_BUILD=0: the image build was switched off"
    missing = [t for t in ("podman", "runc", "debootstrap") if not shutil.which(t)]
    if missing:
        return f"not installed: {' '.join(missing)}"
    return None


PODMAN = ["podman", *shlex.split(os.environ.get("PODMAN_FLAGS", "--runtime runc --cgroup-manager cgroupfs"))]
ULIMITS = ["--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"]


@unittest.skipIf(_podman_why_not(), _podman_why_not() or "")
class ImageBuildTest(unittest.TestCase):
    """Builds the image with podman from a debootstrap'ed base (build-local.sh) and
    runs the all-in-one container once: /ready, its user, a push and a query."""

    def test_build_and_run(self):
        script = os.path.join(h.SRC_DIR, "deploy", "docker", "build-local.sh")
        tag = f"localhost/ember-test:{os.getpid()}"
        # --layers=false: no intermediate images are left behind
        r = subprocess.run([script, tag, "--layers=false"], capture_output=True, text=True, timeout=3000,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(0, r.returncode, r.stdout[-3000:] + r.stderr[-3000:])
        name = f"ember-test-{os.getpid()}"
        try:
            port = h.free_port()
            r = subprocess.run([*PODMAN, "run", "-d", "--name", name, "--network", "host", *ULIMITS, tag,
                                f"--http.address=127.0.0.1:{port}", "--data.dir=/data"],
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(0, r.returncode, r.stderr)
            h.wait_for(lambda: h.http_request(port, "GET", "/ready", timeout=2).status == 200,
                       timeout=30, what="the container's /ready")
            who = subprocess.run([*PODMAN, "exec", name, "id", "-u"], capture_output=True, text=True)
            self.assertEqual("10001", who.stdout.strip())
            body = b"main;work;hot 30\nmain;idle 10\n"
            r = h.http_request(port, "POST", "/ingest?name=img.cpu&sampleRate=100", body)
            self.assertEqual(200, r.status, r.describe())
            r = h.http_request(port, "POST", "/querier.v1.QuerierService/SelectMergeStacktraces",
                               json.dumps({"profileTypeID": "process_cpu:cpu:nanoseconds:cpu:nanoseconds",
                                           "labelSelector": "{}", "start": str(h.now_ms() - 3600_000),
                                           "end": str(h.now_ms() + 60_000)}).encode(),
                               {"Content-Type": "application/json"})
            self.assertEqual(200, r.status, r.describe())
            self.assertEqual(40 * 10_000_000, int(r.json["flamegraph"]["total"]))
        finally:
            subprocess.run([*PODMAN, "rm", "-f", name], capture_output=True, timeout=60)
            subprocess.run([*PODMAN, "rmi", "-f", tag], capture_output=True, timeout=60)


if __name__ == "__main__":
    unittest.main()
