"""Shared code of the Kubernetes chart tests (test_k8s_*.py): finds (or installs,
through scripts/install-test-tools.sh) helm and kubernetes-validate, renders the
chart in deploy/k8s/ember with given values and returns its objects, and
finds the built binaries the chart's containers name.
"""
import glob
import json
import os
import shutil
import subprocess
import tempfile

import yaml

import harness as h

CHART = os.path.join(h.SRC_DIR, "deploy", "k8s", "ember")
PRESETS = os.path.join(CHART, "ci")
TOOLS = os.environ.get("EMBER_TOOLS_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                           "ember-test-tools")
HELM = os.path.join(TOOLS, "bin", "helm")
KV_PY = os.path.join(TOOLS, "venv", "bin", "python")
# kubernetes-validate 1.37.0 bundles the schemas of 1.25 to 1.37, these among them.
KUBE_VERSIONS = ("1.29.0", "1.33.0")

_tools_checked = False


def ensure_tools():
    """helm and kubernetes-validate, installed by the project's script when absent
    (scripts/test.sh runs it too; it is quick when both are there)."""
    global _tools_checked
    if _tools_checked:
        return
    ok = os.access(HELM, os.X_OK) and os.access(KV_PY, os.X_OK)
    if not ok:
        script = os.path.join(h.SRC_DIR, "scripts", "install-test-tools.sh")
        r = subprocess.run([script], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=840)      # under ctest's 900 s
        if r.returncode != 0:
            raise AssertionError(f"{script} failed ({r.returncode}):\n{r.stdout[-2000:]}\n{r.stderr[-3000:]}")
    _tools_checked = True


def helm(*args, check=True):
    ensure_tools()
    r = subprocess.run([HELM, *args], capture_output=True, text=True, timeout=300,
                       stdin=subprocess.DEVNULL, env={**os.environ, "HELM_CACHE_HOME": _helm_home(),
                                                      "HELM_CONFIG_HOME": _helm_home(),
                                                      "HELM_DATA_HOME": _helm_home()})
    if check and r.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


_HELM_HOME = None


def _helm_home():
    global _HELM_HOME
    if _HELM_HOME is None:
        _HELM_HOME = h.temp_dir("ember-helm-home-")
    return _HELM_HOME


def preset(name):
    return os.path.join(PRESETS, name + ".yaml")


def values_args(presets=(), sets=(), files=()):
    out = []
    for p in presets:
        out += ["-f", preset(p)]
    for f in files:
        out += ["-f", f]
    for s in sets:
        out += ["--set", s]
    return out


def render(presets=(), sets=(), files=(), release="ember", namespace="ember-test",
           kube_version="1.33.0", text=False):
    """helm template: the rendered objects (dicts), or the text with text=True."""
    r = helm("template", release, CHART, "-n", namespace, "--kube-version", kube_version,
             *values_args(presets, sets, files))
    if text:
        return r.stdout
    return [d for d in yaml.safe_load_all(r.stdout) if d]


_VALIDATOR = r'''
import json, sys, kubernetes_validate as kv
docs = json.load(sys.stdin)
out = []
for version in sys.argv[1:]:
    for d in docs:
        what = f"{d.get('kind')}/{d.get('metadata', {}).get('name')}"
        try:
            kv.validate(d, version, True)
            out.append([version, what, "ok", ""])
        except kv.SchemaNotFoundError as e:
            out.append([version, what, "no-schema", str(e)])
        except Exception as e:
            out.append([version, what, "invalid", str(e)])
json.dump(out, sys.stdout)
'''


def kube_validate(docs, versions=KUBE_VERSIONS):
    """Validates every object with kubernetes-validate (strict: unknown fields are
    errors) against each version; returns [[version, kind/name, status, message]]
    with status ok, invalid or no-schema (a CRD such as ServiceMonitor)."""
    ensure_tools()
    r = subprocess.run([KV_PY, "-c", _VALIDATOR, *versions], input=json.dumps(docs),
                       capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        raise AssertionError(f"kubernetes-validate failed: {r.stderr[-3000:]}")
    return json.loads(r.stdout)


def kinds(docs, kind):
    return [d for d in docs if d["kind"] == kind]


def by_name(docs, kind, name):
    for d in docs:
        if d["kind"] == kind and d["metadata"]["name"] == name:
            return d
    raise KeyError(f"{kind}/{name} not rendered; have {[(d['kind'], d['metadata']['name']) for d in docs]}")


def workloads(docs):
    return [d for d in docs if d["kind"] in ("StatefulSet", "Deployment", "DaemonSet")]


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


# ------------------------------------------------------------- binaries

def find_binary(name):
    """A built binary by its name, under EMBER_BIN_DIR (the build tree): searched
    rather than assumed, since the layout of the tree may change."""
    hits = sorted(p for p in glob.glob(os.path.join(h.BIN_DIR, "**", name), recursive=True)
                  if os.path.isfile(p) and os.access(p, os.X_OK) and "CMakeFiles" not in p)
    if not hits:
        raise AssertionError(f"{name} not found under {h.BIN_DIR} (set EMBER_BIN_DIR to the build dir)")
    return min(hits, key=len)


_HELP = {}


def binary_flags(name):
    """The flags a built binary accepts, read from its --help."""
    if name not in _HELP:
        r = subprocess.run([find_binary(name), "--help"], capture_output=True, text=True, timeout=30)
        text = r.stdout + r.stderr
        flags = set()
        for line in text.splitlines():
            s = line.strip()
            if s.startswith("--"):
                flags.add(s.split()[0].split("=")[0])
        if not flags:
            raise AssertionError(f"{name} --help listed no flags:\n{text}")
        _HELP[name] = flags
    return _HELP[name]


def flag_name(arg):
    return arg.split("=", 1)[0]


def tmp_values(data):
    """A values file with data (dict), removed at exit."""
    d = h.temp_dir("ember-values-")
    p = os.path.join(d, "values.yaml")
    with open(p, "w") as f:
        yaml.safe_dump(data, f)
    return p


def rmtree(p):
    shutil.rmtree(p, ignore_errors=True)


def mkdtemp(prefix):
    return tempfile.mkdtemp(prefix=prefix)
