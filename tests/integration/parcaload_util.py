"""Builds tests/integration/parcaload (a Go driver of ember's Parca API with
parca-load's request matrix, over connect-go's gRPC-Web client) with Go code
generated from the repo's own protos by protoc-gen-go and
protoc-gen-connect-go, both installed from the Go module proxy into
~/.cache/ember-go-tools. Used by test_parca_load.py and bench/parca_load.py.
Raises unittest.SkipTest when the Go module proxy cannot be reached."""
import hashlib
import os
import re
import shutil
import subprocess
import unittest

import harness as h

SRC = os.path.join(h.HERE, "parcaload")
WORK = os.path.join(h.WORK_DIR, "parcaload")
TOOLS = os.path.join(os.path.expanduser("~"), ".cache", "ember-go-tools", "bin")
PLUGINS = {"protoc-gen-go": "google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.6",
           "protoc-gen-connect-go": "connectrpc.com/connect/cmd/protoc-gen-connect-go@v1.18.1"}
MOD = "ember.local/parcaload/gen"
PROTOS = {  # proto -> Go import path (the well-known types map to Go's own)
    "google/protobuf/timestamp.proto": "google.golang.org/protobuf/types/known/timestamppb",
    "google/protobuf/duration.proto": "google.golang.org/protobuf/types/known/durationpb",
    "parca/metastore/v1alpha1/metastore.proto": f"{MOD}/parca/metastore/v1alpha1;metastorev1alpha1",
    "parca/profilestore/v1alpha1/profilestore.proto": f"{MOD}/parca/profilestore/v1alpha1;profilestorev1alpha1",
    "parca/query/v1alpha1/query.proto": f"{MOD}/parca/query/v1alpha1;queryv1alpha1",
    "types/v1/types.proto": f"{MOD}/types/v1;typesv1",
    "google/v1/profile.proto": f"{MOD}/google/v1;googlev1",
    "querier/v1/querier.proto": f"{MOD}/querier/v1;querierv1",
}


def _run(cmd, cwd, what, env=None):
    r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != 0:
        text = r.stderr.strip()[-800:]
        if "proxy" in text or "dial tcp" in text or "403" in text:
            raise unittest.SkipTest(f"{what}: Go module proxy unreachable: {text}")
        raise AssertionError(f"{what} failed: {text}")


def _inputs_digest():
    d = hashlib.sha256()
    for name in sorted(os.listdir(SRC)):
        with open(os.path.join(SRC, name), "rb") as f:
            d.update(name.encode() + f.read())
    for rel in sorted(PROTOS):
        with open(os.path.join(h.SRC_DIR, "proto", rel), "rb") as f:
            d.update(f.read())
    return d.hexdigest()


def build():
    """Path of the built driver (rebuilt when its sources or protos change)."""
    os.makedirs(WORK, exist_ok=True)
    binary = os.path.join(WORK, "parcaload")
    stamp = os.path.join(WORK, "digest.txt")
    digest = _inputs_digest()
    if os.path.exists(binary) and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read() == digest:
                return binary
    os.makedirs(TOOLS, exist_ok=True)
    env = dict(os.environ, GOBIN=TOOLS, GOFLAGS="-mod=mod")
    for tool, mod in PLUGINS.items():
        if not os.path.exists(os.path.join(TOOLS, tool)):
            _run(["go", "install", mod], WORK, f"go install {mod}", env)
    protos = os.path.join(WORK, "proto")
    shutil.rmtree(protos, ignore_errors=True)
    for rel, pkg in PROTOS.items():
        with open(os.path.join(h.SRC_DIR, "proto", rel)) as f:
            text = f.read()
        text = re.sub(r"^(package [^;]+;)", rf'\1\noption go_package = "{pkg}";', text, count=1, flags=re.M)
        dst = os.path.join(protos, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "w") as f:
            f.write(text)
    for name in os.listdir(SRC):
        shutil.copy(os.path.join(SRC, name), WORK)
    gen = [p for p in PROTOS if not p.startswith("google/protobuf/")]
    shutil.rmtree(os.path.join(WORK, "gen"), ignore_errors=True)
    _run(["protoc", f"-I{protos}", f"--plugin=protoc-gen-go={TOOLS}/protoc-gen-go",
          f"--plugin=protoc-gen-connect-go={TOOLS}/protoc-gen-connect-go",
          f"--go_out={WORK}", f"--go_opt=module=ember.local/parcaload",
          f"--connect-go_out={WORK}", f"--connect-go_opt=module=ember.local/parcaload", *gen],
         WORK, "protoc (Go)")
    _run(["go", "build", "-o", binary, "."], WORK, "go build parcaload", dict(os.environ, GOFLAGS="-mod=mod"))
    with open(stamp, "w") as f:
        f.write(digest)
    return binary
