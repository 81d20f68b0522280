"""The official Java agent (io.pyroscope:agent from Maven Central, async-
profiler inside) pushing JFR live to ember through a recording proxy.

Maven fetches the agent (sdk/java/pom.xml; ~/.m2 caches it), javac builds
sdk/java/App.java under the build dir, and the JDK on the machine runs it with
-javaagent: CPU (itimer) in App.emberBusyJava under LabelsWrapper labels
request=busy, allocations (alloc=64k), monitor contention (lock=1ms), 2 s
uploads of the agent's multipart (`jfr` + `labels`, both gzip).

The oracle is the JDK's own JFR reader (`jfr print --json`, an independent
implementation of the format) over every captured recording, with the
conversion rules of Pyroscope's converter (pyroscope-api.md §2.8): execution
samples not sleeping x 1e9/sampleRate as cpu; TLAB allocations [count,
tlabSize], outside TLAB [count, allocationSize]; monitor enter and thread park
[count, duration in ticks]; the contextId of each sample mapped through the
LabelsSnapshot part (decoded here by a few lines of protobuf reading) gives
the request=busy share.
"""
import gzip
import json
import os
import re
import struct
import subprocess
import tempfile
import unittest

import harness as h
import sdk_util as su

SECONDS = 8
AGENT_VERSION = "2.1.2"   # keep in step with sdk/java/pom.xml


def build():
    for tool in ("java", "javac", "mvn", "jfr"):
        if not su.shutil.which(tool):
            raise unittest.SkipTest(f"{tool} is not on this machine")
    d = su.cache_dir("java")
    lib = os.path.join(d, "lib")
    agent = os.path.join(lib, f"agent-{AGENT_VERSION}.jar")
    if not os.path.exists(agent):
        su.run(["mvn", "-B", "-q", "-f", os.path.join(su.SDK_DIR, "java", "pom.xml"),
                "dependency:copy-dependencies", f"-DoutputDirectory={lib}"],
               timeout=900, what="mvn (io.pyroscope:agent)")
    classes = os.path.join(d, "classes")
    su.run(["javac", "-cp", agent, "-d", classes, os.path.join(su.SDK_DIR, "java", "App.java")],
           what="javac App.java")
    return agent, classes


# ------------------------------------------------------------ the oracle

def iso_ns(s):
    """ISO-8601 duration (as `jfr print --json` writes it) -> nanoseconds."""
    m = re.fullmatch(r"(-?)PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:\.(\d+))?S)?", s)
    if not m:
        raise AssertionError(f"unexpected duration {s!r}")
    ns = (int(m.group(2) or 0) * 3600 + int(m.group(3) or 0) * 60 + int(m.group(4) or 0)) * 10**9
    ns += int((m.group(5) or "").ljust(9, "0")[:9] or 0)
    return -ns if m.group(1) else ns


def varint(b, i):
    v = shift = 0
    while True:
        c = b[i]
        i += 1
        v |= (c & 0x7F) << shift
        shift += 7
        if c < 0x80:
            return v, i


def fields(b):
    """(number, value) of a protobuf message: ints for varints, bytes else."""
    i = 0
    while i < len(b):
        key, i = varint(b, i)
        if key & 7 == 0:
            v, i = varint(b, i)
        elif key & 7 == 2:
            n, i = varint(b, i)
            v, i = b[i:i + n], i + n
        else:
            raise AssertionError("unexpected wire type in LabelsSnapshot")
        yield key >> 3, v


def labels_snapshot(raw):
    """{context id: {key: value}} of a LabelsSnapshot (jfr_labels.proto)."""
    strings, contexts = {}, {}
    for num, v in fields(raw):
        entry = dict(fields(v))
        if num == 2:
            strings[entry.get(1, 0)] = entry.get(2, b"").decode()
        elif num == 1:
            ctx = {}
            for n2, lab in fields(entry.get(2, b"")):
                kv = dict(fields(lab))
                ctx[kv.get(1, 0)] = kv.get(2, 0)
            contexts[entry.get(1, 0)] = ctx
    return {cid: {strings.get(k, ""): strings.get(v, "") for k, v in ctx.items()}
            for cid, ctx in contexts.items()}


EVENTS = ("jdk.ExecutionSample", "jdk.ObjectAllocationInNewTLAB",
          "jdk.ObjectAllocationOutsideTLAB", "jdk.ObjectAllocationSample", "jdk.JavaMonitorEnter",
          "jdk.ThreadPark",
          "jdk.ActiveSetting")


def jfr_events(raw_jfr):
    with tempfile.NamedTemporaryFile(suffix=".jfr") as f:
        f.write(raw_jfr)
        f.flush()
        ticks = struct.unpack(">q", raw_jfr[56:64])[0]
        if ticks != 10**9:
            raise AssertionError(f"ticks per second {ticks}: durations would need converting")
        r = su.run(["jfr", "print", "--json", "--events", ",".join(EVENTS), f.name],
                   timeout=120, what="jfr print")
    return json.loads(r.stdout)["recording"]["events"]


def expected_from_jfr_uploads(uploads):
    """({profile type id: total}, {profile type id: total of request=busy}, events)."""
    tot, busy, jfr_event = {}, {}, set()

    def add(d, k, v):
        d[k] = d.get(k, 0) + v

    for u in uploads:
        if u.status != 200:
            raise AssertionError(f"ember refused an agent upload: {u.status} {u.answer[:300]!r}")
        parts = u.parts()
        raw = h.gunzip_if(parts["jfr"])
        ctx = labels_snapshot(h.gunzip_if(parts["labels"])) if parts.get("labels") else {}
        period = 10**9 // int(u.param("sampleRate", "100"))
        for e in jfr_events(raw):
            v, t = e["values"], e["type"]
            if t == "jdk.ActiveSetting":
                if v.get("name") == "event":
                    jfr_event.add(v.get("value"))
                continue
            if not v.get("stackTrace"):
                continue   # Pyroscope drops events without a stack
            is_busy = ctx.get(v.get("contextId", 0), {}).get("request") == "busy"
            rows = []
            if t == "jdk.ExecutionSample" and v.get("state") not in (None, "STATE_SLEEPING"):
                rows = [("process_cpu:cpu:nanoseconds:cpu:nanoseconds", period)]
            elif t == "jdk.ObjectAllocationInNewTLAB":
                rows = [("memory:alloc_in_new_tlab_objects:count:space:bytes", 1),
                        ("memory:alloc_in_new_tlab_bytes:bytes:space:bytes", v["tlabSize"])]
            elif t == "jdk.ObjectAllocationOutsideTLAB":
                rows = [("memory:alloc_outside_tlab_objects:count:space:bytes", 1),
                        ("memory:alloc_outside_tlab_bytes:bytes:space:bytes", v["allocationSize"])]
            elif t == "jdk.ObjectAllocationSample":
                is_busy = False   # no context in Pyroscope either
                rows = [("memory:alloc_sample_objects:count:space:bytes", 1),
                        ("memory:alloc_sample_bytes:bytes:space:bytes", v["weight"])]
            elif t == "jdk.JavaMonitorEnter":
                rows = [("mutex:contentions:count:mutex:count", 1),
                        ("mutex:delay:nanoseconds:mutex:count", iso_ns(v["duration"]))]
            elif t == "jdk.ThreadPark":
                is_busy = False   # Pyroscope gives park events no context
                rows = [("block:contentions:count:block:count", 1),
                        ("block:delay:nanoseconds:block:count", iso_ns(v["duration"]))]
            for k, x in rows:
                add(tot, k, x)
                if is_busy:
                    add(busy, k, x)
    return tot, busy, jfr_event


class SdkJavaTest(h.ServerTestCase):

    @classmethod
    def setUpClass(cls):
        cls.agent, cls.classes = build()
        super().setUpClass()
        cls.proxy = su.RecordingProxy(cls.srv.port)
        cls.app = "sdk-java-app"
        t0 = h.now_ms()
        env = dict(os.environ, SDK_SECONDS=str(SECONDS),
                   PYROSCOPE_APPLICATION_NAME=cls.app, PYROSCOPE_SERVER_ADDRESS=cls.proxy.url,
                   PYROSCOPE_FORMAT="jfr", PYROSCOPE_PROFILER_EVENT="itimer",
                   PYROSCOPE_PROFILER_ALLOC="64k", PYROSCOPE_PROFILER_LOCK="1ms",
                   PYROSCOPE_UPLOAD_INTERVAL="2s", PYROSCOPE_LOG_LEVEL="info",
                   PYROSCOPE_LABELS="env=sdk-test")
        cls.run_out = su.run(["java", f"-javaagent:{cls.agent}", "-cp", cls.classes, "App"],
                             env=env, timeout=120, what="the Java agent program")
        cls.window = (t0 - 60_000, h.now_ms() + 60_000)

    @classmethod
    def tearDownClass(cls):
        cls.proxy.close()
        super().tearDownClass()

    def test_uploads_captured(self):
        ups = self.proxy.ingests()
        self.assertGreaterEqual(len(ups), 2, self.run_out.stderr[-2000:])
        self.assertTrue(all(u.status == 200 for u in ups),
                        [(u.status, u.answer[:200]) for u in ups])
        for u in ups:
            self.assertEqual(u.param("format"), "jfr")
            self.assertIn("jfr", u.parts())

    def test_totals_equal_what_was_sent(self):
        exp, _, _ = expected_from_jfr_uploads(self.proxy.ingests())
        for want in ("process_cpu:", "memory:alloc_in_new_tlab_bytes", "mutex:delay"):
            self.assertTrue(any(p.startswith(want) for p in exp), f"no {want} sent: {exp}")
        got = su.wait_totals(self.srv, self.app, exp, self.window)
        self.assertEqual(got, exp)
        types = {t.ID for t in self.srv.q("ProfileTypes", start=self.window[0],
                                          end=self.window[1]).profile_types}
        self.assertLessEqual(set(exp), types)

    def test_labels_wrapper(self):
        _, busy, events = expected_from_jfr_uploads(self.proxy.ingests())
        cpu = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        self.assertGreater(busy.get(cpu, 0), 0)
        sel = '{service_name="%s",request="busy"}' % self.app
        self.assertEqual(self.srv.series_sum(cpu, sel, *self.window), busy[cpu])
        kw = dict(matchers=['{service_name="%s"}' % self.app], start=self.window[0],
                  end=self.window[1])
        self.assertIn("sdk-test", self.srv.label_values("env", **kw))
        self.assertEqual(set(self.srv.label_values("jfr_event", **kw)), events)

    def test_top_frame(self):
        top = su.top_self(self.srv, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", self.app,
                          self.window)
        self.assertEqual(top, "App.emberBusyJava")
        top = su.top_self(self.srv, "mutex:contentions:count:mutex:count", self.app, self.window)
        self.assertEqual(top, "App.emberLockJava")


if __name__ == "__main__":
    unittest.main()


class JdkRecordingTest(h.ServerTestCase):
    """A recording made by the JDK's own Flight Recorder (not async-profiler:
    other metadata, String-pool strings, many more event types), uploaded raw
    and as the agent's multipart, judged by the JDK's `jfr` reader."""

    @classmethod
    def setUpClass(cls):
        for tool in ("java", "jfr"):
            if not su.shutil.which(tool):
                raise unittest.SkipTest(f"{tool} is not on this machine")
        super().setUpClass()
        cls.tmp = tempfile.mkdtemp(prefix="jdk-jfr-")
        path = os.path.join(cls.tmp, "burn.jfr")
        su.run(["java", "-XX:StartFlightRecording=duration=30s,filename=" + path
                + ",settings=profile,jdk.ObjectAllocationInNewTLAB#enabled=true,"
                "jdk.ObjectAllocationOutsideTLAB#enabled=true,jdk.JavaMonitorEnter#threshold=0ms,"
                "jdk.InitialEnvironmentVariable#enabled=false,jdk.InitialSystemProperty#enabled=false,"
                "jdk.SystemProcess#enabled=false",
                os.path.join(su.SDK_DIR, "java", "Burn.java"), "4"], timeout=120, what="java Burn.java")
        with open(path, "rb") as f:
            cls.jfr = f.read()
        cls.window = (h.now_ms() - 3600_000, h.now_ms() + 60_000)

    def expected(self):
        up = su.Upload("/ingest", {"sampleRate": ["100"]}, {}, b"", 200)
        up.parts = lambda: {"jfr": self.jfr}
        exp, _, _ = expected_from_jfr_uploads([up])
        return exp

    def test_raw_and_multipart(self):
        exp = self.expected()
        for want in ("process_cpu:", "memory:alloc_in_new", "memory:alloc_sample", "mutex:"):
            self.assertTrue(any(p.startswith(want) for p in exp), exp)
        q = {"format": "jfr", "sampleRate": 100, "spyName": "javaspy"}
        r = self.srv.ingest("jdk-raw", self.jfr, q, content_type="application/octet-stream")
        self.assertStatus(r, 200, "raw JDK recording")
        mp = h.Multipart([("jfr", "jfr", "application/octet-stream", gzip.compress(self.jfr))])
        self.assertStatus(self.srv.ingest("jdk-mp", mp, q), 200, "multipart JDK recording")
        for svc in ("jdk-raw", "jdk-mp"):
            got = su.wait_totals(self.srv, svc, exp, self.window)
            self.assertEqual(got, exp, svc)
        top = su.top_self(self.srv, "process_cpu:cpu:nanoseconds:cpu:nanoseconds", "jdk-raw",
                          self.window)
        self.assertEqual(top, "Burn.burn")
