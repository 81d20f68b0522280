"""Symbols on the server (issue 31): frames stored without lines get names at
query time from debug files a debuginfod server has or a client uploaded.

A C program is compiled here with debug information, its debug file split
off (`objcopy --only-keep-debug`) and the binary stripped. A pprof (python
protobuf, not ember) samples addresses in the program's mapping without any
function or line, plus one frame in a mapping whose build id nobody has.
The expected names come from binutils, independently of libdw:
`addr2line -f -i` on the unstripped binary, innermost first. Then:
  - Debian's `debuginfod` serves the debug file: the flame graph has the
    program's functions (inlined ones too), stack by stack, and the unknown
    module stays module+0xoffset;
  - debuginfod down (nothing listens): module+0xoffset, and the query answers;
  - no debuginfod, the debug file uploaded through Pyroscope's API
    (ShouldInitiateUpload, POST .../Upload/<id>, UploadFinished, List,
    Delete) and through Parca's over gRPC on HTTP/2 (ShouldInitiateUpload,
    InitiateUpload, the Upload client stream, MarkUploadFinished): names;
    deleted: module+0xoffset again;
  - bad uploads (another build id, a truncated ELF, a decompression bomb, not
    ELF at all) are refused and nothing is stored."""
import collections
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
import unittest
import urllib.parse

import debuginfod_util
import distributed_harness as dh
import h2client
import harness as h

CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
PERIOD = 10_000_000
BASE = 0x555555554000
UNKNOWN_BUILD_ID = "c0ffee0123456789"
PYRO = "/debuginfo.v1alpha1.DebuginfoService"
PARCA = "/parca.debuginfo.v1alpha1.DebuginfoService"

PROGRAM = r"""
#include <stdio.h>
static volatile unsigned long sink;
static inline __attribute__((always_inline)) void mix(unsigned long i) { sink ^= i * 2654435761u; sink += i >> 3; }
__attribute__((noinline)) void burn_a(unsigned long n) { for (unsigned long i = 0; i < n; i++) sink += i * i; }
__attribute__((noinline)) void burn_b(unsigned long n) { for (unsigned long i = 0; i < n; i++) mix(i); }
int main(int argc, char **argv) { (void)argv; burn_a(1000u * argc); burn_b(1000u * argc); printf("%lu\n", sink); return 0; }
"""


def run(*cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


class Program:
    """The test program, its debug file, and binutils' answers about it."""

    def __init__(self, source=PROGRAM):
        d = h.temp_dir("ember-symbols-prog-")
        src = os.path.join(d, "burner.c")
        with open(src, "w") as f:
            f.write(source)
        self.full = os.path.join(d, "burner")
        run("gcc", "-g", "-O2", "-Wl,--build-id", "-o", self.full, src)
        self.debug_dir = os.path.join(d, "debug")
        os.makedirs(self.debug_dir)
        self.debug = os.path.join(self.debug_dir, "burner.debug")
        run("objcopy", "--only-keep-debug", self.full, self.debug)
        self.stripped = os.path.join(d, "burner.stripped")
        run("strip", "-o", self.stripped, self.full)
        self.build_id = re.search(r"Build ID: ([0-9a-f]+)", run("readelf", "-n", self.full)).group(1)
        self.loads = [(int(m[0], 16), int(m[1], 16), int(m[2], 16)) for m in re.findall(
            r"LOAD\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+0x[0-9a-f]+\s+(0x[0-9a-f]+)",
            run("readelf", "-lW", self.full))]     # (offset, vaddr, filesz)
        self.symbols = {}
        for line in run("nm", "-S", "--defined-only", self.full).splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[2] in "Tt":
                self.symbols[parts[3]] = (int(parts[0], 16), int(parts[1], 16))

    def file_offset(self, vaddr):
        for off, va, size in self.loads:
            if va <= vaddr < va + size:
                return vaddr - va + off
        raise AssertionError(f"0x{vaddr:x} in no PT_LOAD")

    def addr2line(self, vaddr):
        """Function names at vaddr, innermost first (binutils)."""
        out = run("addr2line", "-f", "-i", "-e", self.full, f"0x{vaddr:x}").splitlines()
        return out[0::2]

    def inlined_address(self):
        """An address in burn_b where binutils sees mix() inlined."""
        start, size = self.symbols["burn_b"]
        for a in range(start, start + size):
            if len(self.addr2line(a)) > 1:
                return a
        return start


def build_profile(prog, now_ns):
    """(pprof bytes, {root-first frames: cpu}, the unknown module's name)."""
    pb = h.pb().profile
    p = pb.Profile()
    strings = [""]

    def s(v):
        if v not in strings:
            strings.append(v)
        return strings.index(v)

    p.sample_type.add(type=s("cpu"), unit=s("nanoseconds"))
    p.period_type.type, p.period_type.unit, p.period = s("cpu"), s("nanoseconds"), PERIOD
    p.time_nanos, p.duration_nanos = now_ns, 10_000_000_000
    p.mapping.add(id=1, memory_start=BASE, memory_limit=BASE + 0x100000, file_offset=0,
                  filename=s("/opt/burner/burner"), build_id=s(prog.build_id))
    p.mapping.add(id=2, memory_start=0x7F0000000000, memory_limit=0x7F0000100000, file_offset=0,
                  filename=s("/usr/lib/libmystery.so"), build_id=s(UNKNOWN_BUILD_ID))
    vaddrs = {"main": prog.symbols["main"][0] + 4, "burn_a": prog.symbols["burn_a"][0] + 4,
              "burn_b": prog.inlined_address()}
    frames = {}
    for i, (name, va) in enumerate(vaddrs.items(), 1):
        p.location.add(id=i, mapping_id=1, address=BASE + prog.file_offset(va))
        frames[i] = list(reversed(prog.addr2line(va)))      # root side first
    p.location.add(id=4, mapping_id=2, address=0x7F0000001234)
    frames[4] = ["libmystery.so+0x1234"]
    stacks = [([2, 1], 30), ([3, 1], 10), ([4, 1], 5)]      # leaf first
    want = collections.Counter()
    for ids, n in stacks:
        p.sample.add(location_id=ids, value=[n * PERIOD])
        want[tuple(f for lid in reversed(ids) for f in frames[lid])] += n * PERIOD
    p.string_table.extend(strings)
    return p.SerializeToString(), want


def unsymbolized(want, prog):
    """The stacks as they show with no debug file: module+offset frames."""
    out = collections.Counter()
    names = {}
    for name in ("main", "burn_a"):
        names[name] = f"burner+0x{prog.file_offset(prog.symbols[name][0] + 4):x}"
    names["burn_b"] = f"burner+0x{prog.file_offset(prog.inlined_address()):x}"
    for stack, v in want.items():
        out[tuple(f for f in stack if f != "mix")] += v
    return collections.Counter({tuple(names.get(f, f) for f in k): v for k, v in out.items()})


def server_named(want):
    """The names the server gives the profile's frames (binutils' names: every frame of
    the stacks but the unknown module's, which nothing names)."""
    return {f for st in want for f in st if not f.startswith("libmystery.so+")}


def symbolized(fg):
    """The names a flame graph marks as named on the server (FlameGraph.symbolized)."""
    return {fg.names[i] for i in fg.symbolized}


class SymbolsCase(h.ServerTestCase):
    """One ember; the program's profile pushed once."""
    extra_args = ()

    @classmethod
    def setUpClass(cls):
        cls.prog = Program()
        cls.setUpDebuginfod()
        cls.server_args = tuple(cls.extra_args) + cls.symbol_args()
        super().setUpClass()
        now_ns = time.time_ns() - 60_000_000_000
        cls.raw, cls.want = build_profile(cls.prog, now_ns)
        cls.window = (now_ns // 1_000_000 - 60_000, now_ns // 1_000_000 + 60_000)
        r = cls.srv.push([({"__name__": "process_cpu", "service_name": "burner"}, [cls.raw])])
        assert r.status == 200, r.describe()
        cls.total = sum(cls.want.values())

    @classmethod
    def setUpDebuginfod(cls):
        pass

    @classmethod
    def symbol_args(cls):
        return ("--symbolizer.debuginfod-urls=none",)

    def stacks(self, headers=None):
        req = h.pb().querier.SelectMergeStacktracesRequest(
            profile_typeID=CPU, label_selector='{service_name="burner"}',
            start=self.window[0], end=self.window[1])
        fg = self.srv.call(f"{h.QUERIER}/SelectMergeStacktraces", req, headers=headers).msg.flamegraph
        self.assertEqual(fg.total, self.total)
        return h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels])

    def test_binutils_oracle_sees_the_functions(self):
        names = {f for st in self.want for f in st}
        self.assertTrue({"main", "burn_a", "burn_b"} <= names, names)


class DebuginfodTest(SymbolsCase):
    @classmethod
    def setUpDebuginfod(cls):
        why = debuginfod_util.available()
        if why:
            raise unittest.SkipTest(why)
        cls.dfd = debuginfod_util.Debuginfod(cls.prog.debug_dir)
        cls.dfd.wait_serving(cls.prog.build_id)

    @classmethod
    def symbol_args(cls):
        return (f"--symbolizer.debuginfod-urls={cls.dfd.url}", "--symbolizer.query-wait=60s")

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.dfd.stop()

    def test_flamegraph_names_the_stripped_programs_frames(self):
        self.assertEqual(self.stacks(), self.want)

    def test_server_named_frames_marked(self):
        fg = self.srv.flamegraph(CPU, '{service_name="burner"}', *self.window)
        self.assertEqual(symbolized(fg), server_named(self.want))

    def test_inlined_function_is_its_own_frame(self):
        inlined = [st for st in self.want if "burn_b" in st]
        self.assertTrue(inlined)
        if "mix" not in inlined[0]:
            self.skipTest("gcc inlined nothing binutils can see here")
        self.assertIn(inlined[0], self.stacks())

    def test_download_kept_in_the_cache(self):
        self.stacks()
        cache = os.path.join(self.srv.data_dir, "debuginfod-cache", self.prog.build_id, "debuginfo")
        self.assertTrue(os.path.exists(cache), os.listdir(os.path.dirname(os.path.dirname(cache))))


def pprof_stacks(p):
    """{root-first frame names: value} of a decoded pprof: a location's lines
    innermost first, as pprof lists them; a location without lines by its
    module+0xoffset name (lc/frame_name.h's rule, computed here)."""
    funcs = {f.id: p.string_table[f.name] for f in p.function}
    maps = {m.id: m for m in p.mapping}
    names = {}
    for loc in p.location:
        if loc.line:
            names[loc.id] = [funcs[l.function_id] for l in reversed(loc.line)]
        else:
            m = maps[loc.mapping_id]
            base = os.path.basename(p.string_table[m.filename])
            names[loc.id] = [f"{base}+0x{loc.address - m.memory_start + m.file_offset:x}"]
    out = collections.Counter()
    for smp in p.sample:
        out[tuple(f for lid in reversed(smp.location_id) for f in names[lid])] += smp.value[0]
    return out


def leaf_totals(stacks):
    out = collections.Counter()
    for st, v in stacks.items():
        out[st[-1]] += v
    return out


class DebuginfodQueryPathsTest(DebuginfodTest):
    """Every query path names the frames the flame graph names (issue 31):
    each of these showed module+0xoffset (or the outer function only) before."""

    def test_merged_pprof_has_the_functions(self):
        raw = h.gunzip_if(self.srv.merge_profile(CPU, '{service_name="burner"}', *self.window))
        p = h.pb().profile.Profile.FromString(raw)
        self.assertEqual(pprof_stacks(p), self.want)
        path = os.path.join(h.temp_dir("ember-symbols-merged-"), "merged.pprof")
        with open(path, "wb") as f:
            f.write(raw)
        # Go's pprof reads it, and sees the same total
        self.assertEqual(h.pprof_raw(path)["totals"][("cpu", "nanoseconds")], self.total)

    def parca(self, report, extra=None):
        body = {"mode": "MODE_MERGE", "reportType": report,
                "merge": {"query": f'{CPU}:delta{{service_name="burner"}}',
                          "start": {"seconds": str(self.window[0] // 1000), "nanos": 0},
                          "end": {"seconds": str(self.window[1] // 1000 + 1), "nanos": 0}}}
        body.update(extra or {})
        r = self.srv.request("POST", "/parca.query.v1alpha1.QueryService/Query",
                             json.dumps(body).encode(), {"content-type": "application/json"})
        self.assertStatus(r, 200, f"Parca Query {report}")
        return json.loads(r.body)

    def parca_flat(self, doc):
        flat = collections.Counter()
        for node in doc["top"]["list"]:
            flat[node["meta"]["function"]["name"]] += int(node.get("flat", 0))
        return +flat

    def test_parca_top_names_the_innermost_function(self):
        # the fold straight from store blocks (no filter)
        doc = self.parca("REPORT_TYPE_TOP")
        self.assertEqual(int(doc["total"]), self.total)
        self.assertEqual(self.parca_flat(doc), leaf_totals(self.want))

    def test_parca_top_through_the_merged_pprof(self):
        # a stack filter takes the merged pprof (parca_tree_add) instead of the fold
        # (every stack holds main: the filter keeps them all, by their names)
        doc = self.parca("REPORT_TYPE_TOP", {"filterQuery": "main"})
        self.assertEqual(self.parca_flat(doc), leaf_totals(self.want))

    def test_legacy_render_dot_names_the_functions(self):
        q = {"query": f'{CPU}{{service_name="burner"}}', "from": str(self.window[0]),
             "until": str(self.window[1]), "format": "dot"}
        r = self.srv.request("GET", "/pyroscope/render?" + urllib.parse.urlencode(q))
        self.assertStatus(r, 200, "render dot")
        for name in ("burn_a", "burn_b", "main"):
            self.assertIn(f'[label="{name}\\n', r.body.decode())

    def test_legacy_render_json_marks_server_named_frames(self):
        q = {"query": f'{CPU}{{service_name="burner"}}', "from": str(self.window[0]),
             "until": str(self.window[1])}
        r = self.srv.request("GET", "/pyroscope/render?" + urllib.parse.urlencode(q))
        self.assertStatus(r, 200, "render")
        fb = json.loads(r.body)["flamebearer"]
        self.assertEqual({fb["names"][i] for i in fb["symbolized"]}, server_named(self.want))


class RollupTest(DebuginfodTest):
    """A query over a whole 6-hour window that has a rollup: the rollup was
    summed with module+0xoffset names (no symbolizer in the background), so
    it must not answer a query that symbolizes; the blocks do."""

    @classmethod
    def setUpClass(cls):
        cls.prog = Program()
        cls.setUpDebuginfod()
        cls.server_args = cls.symbol_args()
        h.ServerTestCase.setUpClass.__func__(cls)
        six_h = 6 * 3600_000
        base = (h.now_ms() // six_h - 1) * six_h           # the last whole 6-hour window
        t_ns = (base + 60_000) * 1_000_000
        cls.raw, cls.want = build_profile(cls.prog, t_ns)
        cls.window = (base, base + six_h - 1)
        r = cls.srv.push([({"__name__": "process_cpu", "service_name": "burner"}, [cls.raw])])
        assert r.status == 200, r.describe()
        cls.total = sum(cls.want.values())
        h.wait_for(lambda: cls.srv.metrics().get(("ember_store_rollups_built_total", frozenset()), 0) >= 1,
                   timeout=120, what="the window's rollup built")

    def test_flamegraph_names_the_stripped_programs_frames(self):
        self.assertEqual(self.stacks(), self.want)


def start_cluster(cls, args):
    """Redis, two ember-ingesters with args and an ember-querier for a ClusterTestCase;
    cls.prog's profile pushed and consumed (cls.raw, cls.want, cls.window)."""
    cls.redis = dh.Redis()
    cls.redis.start()
    cls.ingesters = [dh.ingester(cls.redis.url, args=args) for _ in range(2)]
    cls.querier = dh.querier(cls.redis.url)
    for p in [*cls.ingesters, cls.querier]:
        cls.procs.append(p)
        p.start()
    dh.wait_members(cls.querier, 2)
    now_ns = time.time_ns() - 60_000_000_000
    cls.raw, cls.want = build_profile(cls.prog, now_ns)
    cls.window = (now_ns // 1_000_000 - 60_000, now_ns // 1_000_000 + 60_000)
    r = cls.ingesters[0].push([({"__name__": "process_cpu", "service_name": "burner"}, [cls.raw])])
    assert r.status == 200, r.describe()
    cls.redis.wait_drained()


class DistributedTest(dh.ClusterTestCase):
    """ember-ingester x 2 behind ember-querier: the ingesters name the frames
    (they hold the locations; the querier merges flame graphs by name and
    pprofs by content, so names must be final before the fan-out merge)."""

    @classmethod
    def set_up(cls):
        cls.prog = Program()
        why = debuginfod_util.available()
        if why:
            raise unittest.SkipTest(why)
        cls.dfd = debuginfod_util.Debuginfod(cls.prog.debug_dir)
        cls.dfd.wait_serving(cls.prog.build_id)
        start_cluster(cls, (f"--symbolizer.debuginfod-urls={cls.dfd.url}", "--symbolizer.query-wait=60s"))

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        if getattr(cls, "dfd", None):
            cls.dfd.stop()

    def test_flamegraph_through_the_querier(self):
        fg = self.querier.flamegraph(CPU, '{service_name="burner"}', *self.window)
        self.assertEqual(h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels]),
                         self.want)
        # the ingesters' marks reach the querier's merge beside the tree bytes
        self.assertEqual(symbolized(fg), server_named(self.want))

    def test_merged_pprof_through_the_querier(self):
        raw = self.querier.merge_profile(CPU, '{service_name="burner"}', *self.window)
        self.assertEqual(pprof_stacks(h.pb().profile.Profile.FromString(h.gunzip_if(raw))), self.want)


class BucketUploadTest(dh.ClusterTestCase):
    """ember-ingester x 2 with the filesystem object store behind ember-querier, no
    debuginfod: the debug file is uploaded to the ingester that does NOT hold the
    profile; the one that does names its frames through the bucket (issue 31). The
    object in the bucket is the uploaded file byte for byte (its header's SHA-256 is
    hashlib's); a delete through the uploader unnames them on the other ingester too."""

    @classmethod
    def set_up(cls):
        cls.prog = Program()
        cls.other = Program(source=PROGRAM.replace("1000u", "999u"))
        with open(cls.prog.debug, "rb") as f:
            cls.debug_bytes = f.read()
        with open(cls.other.debug, "rb") as f:
            cls.other_bytes = f.read()
        # a tenant may keep either file, not both (test_3)
        cls.tenant_bound = max(len(cls.debug_bytes), len(cls.other_bytes)) * 3 // 2
        cls.bucket = h.temp_dir("ember-symbols-bucket-")
        start_cluster(cls, ("--symbolizer.debuginfod-urls=none", "--storage.backend=filesystem",
                            f"--storage.filesystem.dir={cls.bucket}", "--storage.prefix=p1",
                            "--symbolizer.negative-cache-ttl=1s",
                            f"--debuginfo.max-tenant-bytes={cls.tenant_bound}"))
        total = sum(cls.want.values())
        holders = [i for i in cls.ingesters
                   if i.flamegraph(CPU, '{service_name="burner"}', *cls.window).total == total]
        assert len(holders) == 1, "one ingester holds the profile"
        cls.holder = holders[0]
        cls.uploader = next(i for i in cls.ingesters if i is not cls.holder)

    def stacks(self):
        fg = self.querier.flamegraph(CPU, '{service_name="burner"}', *self.window)
        return h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels]), fg

    def pyro(self, ing, method, msg):
        return ing.request("POST", f"{PYRO}/{method}", msg.SerializeToString(),
                           {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"})

    def bucket_files(self):
        return [f for _, _, fs in os.walk(os.path.join(self.bucket, "p1", "debuginfo")) for f in fs]

    def copies(self, ing):
        d = os.path.join(ing.data_dir, "debuginfo-bucket-copies")
        return [f for _, _, fs in os.walk(d) for f in fs]

    def upload(self, ing, build_id, body):
        return ing.request("POST", f"{PYRO}/Upload/{build_id}", body,
                           {"Content-Type": "application/octet-stream"})

    def test_1_bad_uploads_leave_the_bucket_empty(self):
        for body in (self.other_bytes, self.debug_bytes[:len(self.debug_bytes) // 2], b"not ELF" * 100):
            r = self.upload(self.uploader, self.prog.build_id, body)
            self.assertEqual(r.status, 400, r.describe())
        self.assertEqual(self.bucket_files(), [])
        self.assertEqual(self.copies(self.uploader), [])

    def test_3_tenant_bound_counts_every_ingesters_uploads(self):
        """Each file alone is within the tenant's bound, both are not: the second upload,
        to the other ingester (which has no copy of the first), is refused by the bucket's
        count, and nothing of it is stored."""
        r = self.upload(self.holder, self.prog.build_id, self.debug_bytes)
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual(self.copies(self.uploader), [])
        r = self.upload(self.uploader, self.other.build_id, self.other_bytes)
        self.assertEqual(r.status, 413, r.describe())
        self.assertEqual(self.bucket_files(), [f"{self.prog.build_id}.debug"])
        self.assertEqual(self.copies(self.uploader), [])
        m = h.compile_protos("debuginfo/v1alpha1/debuginfo.proto")["debuginfo.v1alpha1"]
        r = self.pyro(self.uploader, "DeleteDebuginfo", m.DeleteDebuginfoRequest(gnu_build_id=self.prog.build_id))
        self.assertEqual(r.status, 200, r.describe())
        r = self.upload(self.uploader, self.other.build_id, self.other_bytes)     # room again
        self.assertEqual(r.status, 200, r.describe())
        self.assertEqual(self.bucket_files(), [f"{self.other.build_id}.debug"])

    def test_2_upload_to_one_ingester_names_frames_on_another(self):
        self.assertEqual(self.stacks()[0], unsymbolized(self.want, self.prog))
        r = self.upload(self.uploader, self.prog.build_id, self.debug_bytes)
        self.assertEqual(r.status, 200, r.describe())
        # the object: the file as uploaded, under the build id (content-addressed)
        path = os.path.join(self.bucket, "p1", "debuginfo", "anonymous", f"{self.prog.build_id}.debug")
        with open(path, "rb") as f:
            line, _, body = f.read().partition(b"\n")
        self.assertEqual(body, self.debug_bytes)
        self.assertEqual(line, b"ember-obj1 " + hashlib.sha256(self.debug_bytes).hexdigest().encode())
        # the holder sees it (ShouldInitiateUpload, List) and names its frames
        m = h.compile_protos("debuginfo/v1alpha1/debuginfo.proto")["debuginfo.v1alpha1"]
        r = self.pyro(self.holder, "ShouldInitiateUpload",
                      m.ShouldInitiateUploadRequest(file=m.FileMetadata(gnu_build_id=self.prog.build_id)))
        self.assertEqual(r.status, 200, r.describe())
        self.assertFalse(m.ShouldInitiateUploadResponse.FromString(r.body).should_initiate_upload)
        r = self.pyro(self.holder, "ListDebuginfo", m.ListDebuginfoRequest())
        self.assertEqual({o.file.gnu_build_id: o.size_bytes
                          for o in m.ListDebuginfoResponse.FromString(r.body).object},
                         {self.prog.build_id: len(self.debug_bytes)})
        # (the holder believes its earlier "not in the bucket" for the negative TTL, 1 s)
        h.wait_for(lambda: self.stacks()[0] == self.want, timeout=30,
                   what="the holder to name its frames through the bucket")
        self.assertEqual(symbolized(self.stacks()[1]), server_named(self.want))
        # deleted through the uploader: the holder's copy goes at its next check of the bucket
        r = self.pyro(self.uploader, "DeleteDebuginfo", m.DeleteDebuginfoRequest(gnu_build_id=self.prog.build_id))
        self.assertEqual(r.status, 200, r.describe())
        self.assertFalse(os.path.exists(path))
        h.wait_for(lambda: self.stacks()[0] == unsymbolized(self.want, self.prog), timeout=30,
                   what="the holder to drop its copy of the deleted file")


CXX_PROGRAM = r"""
#include <cstdio>
static volatile unsigned long sink;
namespace geo {
struct Shape {
    __attribute__((noinline)) void area(unsigned long n);
};
void Shape::area(unsigned long n) { for (unsigned long i = 0; i < n; i++) sink += i * i; }
template <typename T> __attribute__((noinline)) T twice(T v) { for (T i = 0; i < v; i++) sink += i; return v; }
}
int main(int argc, char **) { geo::Shape s; s.area(1000u * argc); std::printf("%lu\n", geo::twice<unsigned long>(argc)); return 0; }
"""

RUST_PROGRAM = r"""
mod work {
    #[inline(never)]
    pub fn heavy(n: u64) -> u64 { (0..n).fold(0u64, |a, i| a.wrapping_add(i * i)) }
}
fn main() { println!("{}", work::heavy(std::env::args().count() as u64 * 1000)); }
"""


class Mangled:
    """A stripped C++ or Rust program, its debug file, and where its functions start."""

    def __init__(self, d, name, compile_cmd):
        self.full = os.path.join(d, name)
        run(*compile_cmd, self.full)
        self.debug_dir = os.path.join(d, name + "-debug")
        os.makedirs(self.debug_dir)
        run("objcopy", "--only-keep-debug", self.full, os.path.join(self.debug_dir, name + ".debug"))
        self.build_id = re.search(r"Build ID: ([0-9a-f]+)", run("readelf", "-n", self.full)).group(1)
        loads = [(int(m[0], 16), int(m[1], 16), int(m[2], 16)) for m in re.findall(
            r"LOAD\s+(0x[0-9a-f]+)\s+(0x[0-9a-f]+)\s+0x[0-9a-f]+\s+(0x[0-9a-f]+)",
            run("readelf", "-lW", self.full))]
        self.offsets = {}                         # mangled symbol -> file offset inside it
        for line in run("nm", "--defined-only", "--no-demangle", self.full).splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TtWw":      # W: a template's instance
                va = int(parts[0], 16) + 1
                for off, lva, size in loads:
                    if lva <= va < lva + size:
                        self.offsets[parts[2]] = va - lva + off

    def offset_of(self, *pieces):
        """The offset in the one mangled symbol holding every piece."""
        found = [o for sym, o in self.offsets.items() if all(p in sym for p in pieces)]
        assert len(found) == 1, (pieces, [s for s in self.offsets if pieces[-1] in s])
        return found[0]


class DemangleTest(h.ServerTestCase):
    """C++ and Rust (v0 mangling) frames named by the server come out
    demangled, as pprof shows them by default (no parameter list); the
    expected names are written from the sources above, by hand."""

    @classmethod
    def setUpClass(cls):
        why = debuginfod_util.available()
        if why:
            raise unittest.SkipTest(why)
        d = h.temp_dir("ember-symbols-mangled-")
        src = os.path.join(d, "shapes.cc")
        with open(src, "w") as f:
            f.write(CXX_PROGRAM)
        cls.cxx = Mangled(d, "shapes", ("g++", "-g", "-O1", "-Wl,--build-id", src, "-o"))
        cls.progs = [cls.cxx]
        cls.want = {("geo::Shape::area",): cls.cxx.offset_of("Shape", "area"),
                    ("geo::twice<unsigned long>",): cls.cxx.offset_of("twice")}
        if shutil.which("rustc"):
            rs = os.path.join(d, "heavy.rs")
            with open(rs, "w") as f:
                f.write(RUST_PROGRAM)
            # GNU ld, not rustc's default rust-lld: lld leaves a gap between file offsets and
            # addresses that a debug file alone cannot recover (docs/internals/symbols.md)
            cls.rust = Mangled(d, "heavy", ("rustc", "-g", "-O", "-C", "symbol-mangling-version=v0",
                                            "-C", "linker-features=-lld",
                                            "-C", "link-arg=-Wl,--build-id", rs, "-o"))
            cls.progs.append(cls.rust)
            cls.want[("heavy::work::heavy",)] = cls.rust.offset_of("_R", "work", "heavy")
        os.makedirs(os.path.join(d, "all-debug"))
        for p in cls.progs:
            for f in os.listdir(p.debug_dir):
                shutil.copy(os.path.join(p.debug_dir, f), os.path.join(d, "all-debug", f))
        cls.dfd = debuginfod_util.Debuginfod(os.path.join(d, "all-debug"))
        for p in cls.progs:
            cls.dfd.wait_serving(p.build_id)
        cls.server_args = (f"--symbolizer.debuginfod-urls={cls.dfd.url}", "--symbolizer.query-wait=60s")
        super().setUpClass()
        now_ns = time.time_ns() - 60_000_000_000
        cls.window = (now_ns // 1_000_000 - 60_000, now_ns // 1_000_000 + 60_000)
        r = cls.srv.push([({"__name__": "process_cpu", "service_name": "mangled"}, [cls.profile(now_ns)])])
        assert r.status == 200, r.describe()

    @classmethod
    def profile(cls, now_ns):
        pb = h.pb().profile
        p = pb.Profile()
        p.string_table.extend(["", "cpu", "nanoseconds"])
        p.sample_type.add(type=1, unit=2)
        p.period_type.type, p.period_type.unit, p.period = 1, 2, PERIOD
        p.time_nanos, p.duration_nanos = now_ns, 10_000_000_000
        by_prog = {id(prog): i for i, prog in enumerate(cls.progs, 1)}
        for prog, i in ((prog, by_prog[id(prog)]) for prog in cls.progs):
            p.string_table.extend([f"/opt/{os.path.basename(prog.full)}", prog.build_id])
            p.mapping.add(id=i, memory_start=BASE * i, memory_limit=BASE * i + 0x1000000, file_offset=0,
                          filename=len(p.string_table) - 2, build_id=len(p.string_table) - 1)
        for lid, (names, off) in enumerate(cls.want.items(), 1):
            prog = cls.rust if names[0].startswith("heavy::") else cls.cxx
            p.location.add(id=lid, mapping_id=by_prog[id(prog)], address=BASE * by_prog[id(prog)] + off)
            p.sample.add(location_id=[lid], value=[lid * PERIOD])
        return p.SerializeToString()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.dfd.stop()

    def test_names_demangled(self):
        fg = self.srv.flamegraph(CPU, '{service_name="mangled"}', *self.window)
        got = h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels])
        # each location's outermost frame is the function sampled (the frames above it, if
        # any, are what was inlined there: Rust's iterator adaptors), none left mangled
        roots = {stack[0]: v for stack, v in got.items()}
        self.assertEqual(roots, {names[0]: lid * PERIOD for lid, names in enumerate(self.want, 1)})
        mangled = [f for stack in got for f in stack if f.startswith(("_Z", "_R"))]
        self.assertEqual(mangled, [], got)


GO_PROGRAM = """package main

import (
	"fmt"
	"os"
)

var sink uint64

//go:noinline
func hotLoop(n uint64) {
	for i := uint64(0); i < n; i++ {
		sink += i * i
	}
}

//go:noinline
func coldLoop(n uint64) {
	for i := uint64(0); i < n; i++ {
		sink ^= i
	}
}

func main() {
	n := uint64(len(os.Args)) * 1000
	hotLoop(n)
	coldLoop(n)
	fmt.Println(sink)
}
"""


@unittest.skipUnless(shutil.which("go"), "go is not installed")
class GoPclntabTest(h.ServerTestCase):
    """A Go program built stripped (`-ldflags=-s -w`: no symbol table, no
    DWARF; `-B gobuildid` gives it a GNU build id) is named from its own
    .gopclntab once the binary is uploaded. The oracle is Go's own
    `go tool addr2line` on the stripped binary (debug/gosym), for addresses
    taken from `go tool nm` of the same program built unstripped."""
    server_args = ("--symbolizer.debuginfod-urls=none",)

    @classmethod
    def before_server(cls):
        """Once the binary is built, before ember starts (GoDebuginfodTest: debuginfod)."""

    @classmethod
    def setUpClass(cls):
        d = h.temp_dir("ember-symbols-go-")
        with open(os.path.join(d, "main.go"), "w") as f:
            f.write(GO_PROGRAM)
        env = dict(os.environ, GOFLAGS="", GO111MODULE="off", GOPATH=os.path.join(d, "gopath"),
                   GOCACHE=os.path.join(tempfile.gettempdir(), "ember-test-gocache"))
        full, cls.stripped = os.path.join(d, "gohot_full"), os.path.join(d, "gohot")
        run("go", "build", "-ldflags=-B gobuildid", "-o", full, "main.go", cwd=d, env=env)
        run("go", "build", "-ldflags=-s -w -B gobuildid", "-o", cls.stripped, "main.go", cwd=d, env=env)
        cls.build_id = re.search(r"Build ID: ([0-9a-f]+)", run("readelf", "-n", cls.stripped)).group(1)
        self_syms = {l.split()[2]: int(l.split()[0], 16) for l in run("go", "tool", "nm", full).splitlines()
                     if len(l.split()) == 3}
        cls.vaddrs = [self_syms["main.hotLoop"] + 5, self_syms["main.coldLoop"] + 5,
                      self_syms["main.main"] + 5]
        out = subprocess.run(["go", "tool", "addr2line", cls.stripped], check=True, capture_output=True,
                             text=True, env=env,
                             input="".join(f"0x{a:x}\n" for a in cls.vaddrs)).stdout.splitlines()
        cls.oracle = [(out[2 * i], out[2 * i + 1].rsplit(":", 1)) for i in range(len(cls.vaddrs))]
        cls.before_server()
        super().setUpClass()
        now_ns = time.time_ns() - 60_000_000_000
        cls.window = (now_ns // 1_000_000 - 60_000, now_ns // 1_000_000 + 60_000)
        pb = h.pb().profile
        p = pb.Profile()
        p.string_table.extend(["", "cpu", "nanoseconds", "/opt/gohot", cls.build_id])
        p.sample_type.add(type=1, unit=2)
        p.period_type.type, p.period_type.unit, p.period = 1, 2, PERIOD
        p.time_nanos, p.duration_nanos = now_ns, 10_000_000_000
        p.mapping.add(id=1, memory_start=0x400000, memory_limit=0x1000000, file_offset=0,
                      filename=3, build_id=4)
        for i, a in enumerate(cls.vaddrs, 1):
            p.location.add(id=i, mapping_id=1, address=a)
        p.sample.add(location_id=[1, 3], value=[30 * PERIOD])      # main.main -> hotLoop
        p.sample.add(location_id=[2, 3], value=[10 * PERIOD])      # main.main -> coldLoop
        r = cls.srv.push([({"__name__": "process_cpu", "service_name": "gohot"}, [p.SerializeToString()])])
        assert r.status == 200, r.describe()

    def stacks(self):
        fg = self.srv.flamegraph(CPU, '{service_name="gohot"}', *self.window)
        return h.flamegraph_stacks(list(fg.names), [list(l.values) for l in fg.levels])

    def test_oracle_names_the_functions(self):
        self.assertEqual([n for n, _ in self.oracle], ["main.hotLoop", "main.coldLoop", "main.main"])

    def named(self):
        return collections.Counter({(self.oracle[2][0], self.oracle[0][0]): 30 * PERIOD,
                                    (self.oracle[2][0], self.oracle[1][0]): 10 * PERIOD})

    def test_uploaded_binary_names_frames_from_its_pclntab(self):
        offs = [f"gohot+0x{a - 0x400000:x}" for a in self.vaddrs]
        self.assertEqual(self.stacks(), collections.Counter(
            {(offs[2], offs[0]): 30 * PERIOD, (offs[2], offs[1]): 10 * PERIOD}))
        with open(self.stripped, "rb") as f:
            r = self.srv.request("POST", f"{PYRO}/Upload/{self.build_id}", f.read(),
                                 {"Content-Type": "application/octet-stream"})
        self.assertEqual(r.status, 200, r.describe())
        names = [n for n, _ in self.oracle]
        self.assertEqual(self.stacks(), collections.Counter(
            {(names[2], names[0]): 30 * PERIOD, (names[2], names[1]): 10 * PERIOD}))
        # the merged pprof carries Go's file and line for each
        raw = h.gunzip_if(self.srv.merge_profile(CPU, '{service_name="gohot"}', *self.window))
        p = h.pb().profile.Profile.FromString(raw)
        funcs = {f.id: f for f in p.function}
        got = {(p.string_table[funcs[l.function_id].name], p.string_table[funcs[l.function_id].filename],
                str(l.line)) for loc in p.location for l in loc.line}
        self.assertEqual(got, {(n, fl[0], fl[1]) for n, fl in self.oracle})


@unittest.skipUnless(shutil.which("go"), "go is not installed")
class GoDebuginfodTest(GoPclntabTest):
    """The same stripped Go binary, nothing uploaded: debuginfod has no debug file for it
    (there is none) but serves the binary itself as its executable, which the server then
    reads the pclntab of."""

    @classmethod
    def setUpClass(cls):
        why = debuginfod_util.available()
        if why:
            raise unittest.SkipTest(why)
        super().setUpClass()

    @classmethod
    def before_server(cls):
        served = h.temp_dir("ember-symbols-go-served-")
        shutil.copy(cls.stripped, os.path.join(served, "gohot"))
        cls.dfd = debuginfod_util.Debuginfod(served)
        cls.dfd.wait_serving(cls.build_id, kind="executable")
        cls.server_args = (f"--symbolizer.debuginfod-urls={cls.dfd.url}", "--symbolizer.query-wait=60s")

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        cls.dfd.stop()

    test_uploaded_binary_names_frames_from_its_pclntab = None   # uploads: GoPclntabTest

    def test_debuginfod_executable_names_frames(self):
        self.assertEqual(self.stacks(), self.named())


class DebuginfodDownTest(SymbolsCase):
    @classmethod
    def symbol_args(cls):
        return (f"--symbolizer.debuginfod-urls=http://127.0.0.1:{h.free_port()}",)

    def test_frames_stay_module_plus_offset(self):
        self.assertEqual(self.stacks(), unsymbolized(self.want, self.prog))
        # asked again: the failure is remembered, the answer the same
        self.assertEqual(self.stacks(), unsymbolized(self.want, self.prog))
        self.assertEqual(symbolized(self.srv.flamegraph(CPU, '{service_name="burner"}', *self.window)),
                         set())


class FakeResponse:
    """An HTTP status for assertRefused where the refusal came over gRPC."""

    def __init__(self, status):
        self.status = status

    def describe(self):
        return f"status {self.status}"


def decompression_bomb(prog):
    """The program's debug file plus a 64 MiB section of zeros, zlib-compressed by
    objcopy: small on the wire, 64 MiB declared inflated."""
    d = h.temp_dir("ember-bomb-")
    zeros = os.path.join(d, "zeros")
    with open(zeros, "wb") as f:
        f.truncate(64 << 20)
    bomb = os.path.join(d, "bomb")
    run("objcopy", "--add-section", f".debug_bomb={zeros}", "--set-section-flags",
        ".debug_bomb=readonly,debug", prog.debug, bomb)
    run("objcopy", "--compress-debug-sections=zlib", bomb)
    with open(bomb, "rb") as f:
        return f.read()


def grpc_frames(*messages):
    return b"".join(b"\x00" + struct.pack(">I", len(m)) + m for m in messages)


class UploadTest(SymbolsCase):
    extra_args = ("--debuginfo.max-inflated-bytes=16MiB",)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dpb = h.compile_protos("debuginfo/v1alpha1/debuginfo.proto",
                                   "parca/debuginfo/v1alpha1/debuginfo.proto")
        with open(cls.prog.debug, "rb") as f:
            cls.debug_bytes = f.read()

    def pyro(self, method, msg, resp_cls, check=True):
        r = self.srv.request("POST", f"{PYRO}/{method}", msg.SerializeToString(),
                             {"Content-Type": "application/proto", "Connect-Protocol-Version": "1"})
        if check:
            self.assertEqual(r.status, 200, r.describe())
            return resp_cls.FromString(r.body)
        return r

    def listed(self):
        m = self.dpb["debuginfo.v1alpha1"]
        resp = self.pyro("ListDebuginfo", m.ListDebuginfoRequest(), m.ListDebuginfoResponse)
        return {o.file.gnu_build_id: o.size_bytes for o in resp.object}

    def should_upload(self, build_id):
        m = self.dpb["debuginfo.v1alpha1"]
        req = m.ShouldInitiateUploadRequest(file=m.FileMetadata(gnu_build_id=build_id))
        return self.pyro("ShouldInitiateUpload", req, m.ShouldInitiateUploadResponse)

    def delete(self, build_id):
        m = self.dpb["debuginfo.v1alpha1"]
        self.pyro("DeleteDebuginfo", m.DeleteDebuginfoRequest(gnu_build_id=build_id),
                  m.DeleteDebuginfoResponse)

    def pyro_upload(self, build_id, body):
        return self.srv.request("POST", f"{PYRO}/Upload/{build_id}", body,
                                {"Content-Type": "application/octet-stream"})

    def grpc(self, client, method, msg_bytes):
        r = client.request("POST", f"{PARCA}/{method}",
                           [("content-type", "application/grpc"), ("te", "trailers")], msg_bytes)
        status = r.trailers.get("grpc-status", r.header("grpc-status"))
        return r, status

    def test_1_pyroscope_upload_names_frames_then_delete_unnames_them(self):
        bid = self.prog.build_id
        self.assertEqual(self.stacks(), unsymbolized(self.want, self.prog))
        self.assertTrue(self.should_upload(bid).should_initiate_upload)
        r = self.pyro_upload(bid, self.debug_bytes)
        self.assertEqual(r.status, 200, r.describe())
        m = self.dpb["debuginfo.v1alpha1"]
        self.pyro("UploadFinished", m.UploadFinishedRequest(gnu_build_id=bid), m.UploadFinishedResponse)
        self.assertFalse(self.should_upload(bid).should_initiate_upload)
        self.assertEqual(self.listed(), {bid: len(self.debug_bytes)})
        self.assertEqual(self.stacks(), self.want)
        self.delete(bid)
        self.assertEqual(self.listed(), {})
        self.assertEqual(self.stacks(), unsymbolized(self.want, self.prog))

    def test_2_parca_grpc_upload_names_frames(self):
        bid = self.prog.build_id
        p = self.dpb["parca.debuginfo.v1alpha1"]
        c = h2client.H2Client(self.srv.port)
        try:
            r, st = self.grpc(c, "ShouldInitiateUpload", grpc_frames(
                p.ShouldInitiateUploadRequest(build_id=bid).SerializeToString()))
            self.assertEqual(st, "0", r)
            self.assertTrue(p.ShouldInitiateUploadResponse.FromString(bytes(r.body[5:])).should_initiate_upload)
            r, st = self.grpc(c, "InitiateUpload", grpc_frames(
                p.InitiateUploadRequest(build_id=bid, size=len(self.debug_bytes)).SerializeToString()))
            self.assertEqual(st, "0", r)
            ins = p.InitiateUploadResponse.FromString(bytes(r.body[5:])).upload_instructions
            self.assertEqual(ins.upload_strategy, p.UploadInstructions.UPLOAD_STRATEGY_GRPC)
            chunks = [p.UploadRequest(info=p.UploadInfo(build_id=bid, upload_id=ins.upload_id))]
            for i in range(0, len(self.debug_bytes), 64 << 10):
                chunks.append(p.UploadRequest(chunk_data=self.debug_bytes[i:i + (64 << 10)]))
            r, st = self.grpc(c, "Upload", grpc_frames(*(m.SerializeToString() for m in chunks)))
            self.assertEqual(st, "0", r)
            self.assertEqual(p.UploadResponse.FromString(bytes(r.body[5:])).size, len(self.debug_bytes))
            r, st = self.grpc(c, "MarkUploadFinished", grpc_frames(
                p.MarkUploadFinishedRequest(build_id=bid, upload_id=ins.upload_id).SerializeToString()))
            self.assertEqual(st, "0", r)
        finally:
            c.close()
        self.assertEqual(self.stacks(), self.want)
        self.delete(bid)

    def parca_upload(self, build_id, body, build_id_type):
        """InitiateUpload then the Upload stream; the Upload's grpc-status."""
        p = self.dpb["parca.debuginfo.v1alpha1"]
        c = h2client.H2Client(self.srv.port)
        try:
            r, st = self.grpc(c, "InitiateUpload", grpc_frames(p.InitiateUploadRequest(
                build_id=build_id, size=len(body), build_id_type=build_id_type).SerializeToString()))
            self.assertEqual(st, "0", r)
            ins = p.InitiateUploadResponse.FromString(bytes(r.body[5:])).upload_instructions
            chunks = [p.UploadRequest(info=p.UploadInfo(build_id=build_id, upload_id=ins.upload_id)),
                      p.UploadRequest(chunk_data=body)]
            return self.grpc(c, "Upload", grpc_frames(*(m.SerializeToString() for m in chunks)))[1]
        finally:
            c.close()

    def test_2_parca_file_hash_upload_stored_under_the_hash(self):
        """The Parca Agent names a binary by the OpenTelemetry profiler's file id (its frames
        carry the same id) with BUILD_ID_TYPE_HASH: stored under it; the same id claimed as a
        GNU build id is refused (the file's note says otherwise)."""
        p = self.dpb["parca.debuginfo.v1alpha1"]
        with open(self.prog.stripped, "rb") as f:
            binary = f.read()
        # the profiler's file id: SHA-256 of the first and last 4 KiB and the size (big-endian
        # 64 bits), its first 16 bytes (opentelemetry-ebpf-profiler libpf/fileid.go)
        file_id = hashlib.sha256(binary[:4096] + binary[-min(len(binary), 4096):]
                                 + struct.pack(">Q", len(binary))).digest()[:16].hex()
        self.assertNotEqual(self.parca_upload(file_id, self.debug_bytes, p.BUILD_ID_TYPE_GNU), "0")
        self.assertEqual(self.listed(), {})
        self.assertEqual(self.parca_upload(file_id, self.debug_bytes, p.BUILD_ID_TYPE_HASH), "0")
        self.assertEqual(self.listed(), {file_id: len(self.debug_bytes)})
        self.delete(file_id)

    def assertRefused(self, r, statuses=(400,)):
        self.assertIn(r.status, statuses, r.describe())
        self.assertEqual(self.listed(), {})
        debuginfo = os.path.join(self.srv.data_dir, "debuginfo")
        leftovers = [f for _, _, fs in os.walk(debuginfo) for f in fs]
        self.assertEqual(leftovers, [])

    def test_3_wrong_build_id_refused(self):
        self.assertRefused(self.pyro_upload("ab" * 20, self.debug_bytes))

    def test_3_truncated_elf_refused(self):
        self.assertRefused(self.pyro_upload(self.prog.build_id, self.debug_bytes[:len(self.debug_bytes) // 2]))

    def test_3_not_elf_refused(self):
        self.assertRefused(self.pyro_upload(self.prog.build_id, b"hello, not an ELF file" * 100))

    def test_3_decompression_bomb_refused(self):
        body = decompression_bomb(self.prog)
        self.assertLess(len(body), 16 << 20)       # small on the wire, 64 MiB inflated
        self.assertRefused(self.pyro_upload(self.prog.build_id, body), (413,))

    def assertParcaRefused(self, body, want_status):
        """Parca's InitiateUpload + Upload stream of body under the program's build id:
        refused with want_status (a gRPC code), nothing listed, nothing on disk."""
        p = self.dpb["parca.debuginfo.v1alpha1"]
        self.assertEqual(self.parca_upload(self.prog.build_id, body, p.BUILD_ID_TYPE_GNU), want_status)
        self.assertRefused(FakeResponse(400))

    def test_3_parca_truncated_elf_refused(self):
        self.assertParcaRefused(self.debug_bytes[:len(self.debug_bytes) // 2], "3")   # INVALID_ARGUMENT

    def test_3_parca_not_elf_refused(self):
        self.assertParcaRefused(b"hello, not an ELF file" * 100, "3")

    def test_3_parca_decompression_bomb_refused(self):
        self.assertParcaRefused(decompression_bomb(self.prog), "8")              # RESOURCE_EXHAUSTED

    def test_3_parca_another_programs_file_refused(self):
        """The upload names the program's build id, the file's note is another's."""
        other = Program(source=PROGRAM.replace("1000u", "999u"))
        with open(other.debug, "rb") as f:
            self.assertParcaRefused(f.read(), "3")

    def test_3_parca_upload_of_another_build_id_refused(self):
        p = self.dpb["parca.debuginfo.v1alpha1"]
        c = h2client.H2Client(self.srv.port)
        try:
            r, st = self.grpc(c, "Upload", grpc_frames(
                p.UploadRequest(info=p.UploadInfo(build_id="ab" * 20)).SerializeToString(),
                p.UploadRequest(chunk_data=self.debug_bytes).SerializeToString()))
        finally:
            c.close()
        self.assertEqual(st, "3", r)       # INVALID_ARGUMENT
        self.assertEqual(self.listed(), {})


if __name__ == "__main__":
    unittest.main()
