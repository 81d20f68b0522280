"""The binary tree formats and speedscope through /ingest (pyroscope-api.md
§2.7, §2.9, §2.10), queried back with SelectMergeStacktraces (every stack's
self value, read off the flame graph) and SelectSeries (the total).

Tree and trie bodies are built here from lists of stacks with this file's own
varint writer. The four real speedscope files of testdata/speedscope/ all hold
the same stacks: a;b;c 5, a;b;d 4, a;b 5 units (simple.speedscope.json as
open/close events, the others as samples with weights; worked out by hand in
tests/unit/ingester/test_speedscope.c). Expected values below are those units
x 100 ticks (Pyroscope's precision multiplier; 1 for bytes) x the period
1e9 / rate, where the rate is the unit's own when sampleRate is the default
100: none 10,000/s, seconds 100/s.

Each upload gets its own service_name so every query is scoped to one upload.
"""
import json
import time
import unittest

import harness as h

CPU_NS = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
CPU_COUNT = "process_cpu:samples:count::"
WALL_NS = "wall:wall:nanoseconds:cpu:nanoseconds"
BYTES = "memory:samples:bytes::"
ALLOC_SPACE = "memory:alloc_space:bytes::"

ABCD_UNITS = {"a;b;c": 5, "a;b;d": 4, "a;b": 5}


def scaled(stacks, factor):
    return {k: v * factor for k, v in stacks.items()}


# ------------------------------------------------------------ tree writers

def uvarint(v):
    out = bytearray()
    while True:
        c, v = v & 0x7F, v >> 7
        out.append(c | (0x80 if v else 0))
        if not v:
            return bytes(out)


def node(name, value, children):
    name = name.encode()
    return uvarint(len(name)) + name + uvarint(value) + uvarint(children)


def tree_body(stacks):
    """Tree format: the empty-named root, one node per frame, self values."""
    root = {"self": 0, "kids": {}}
    for stack, value in stacks.items():
        n = root
        for frame in stack.split(";"):
            n = n["kids"].setdefault(frame, {"self": 0, "kids": {}})
        n["self"] += value

    def write(name, n):
        return node(name, n["self"], len(n["kids"])) + b"".join(
            write(k, c) for k, c in n["kids"].items())
    return write("", root)


def trie_body(stacks):
    """Transport trie: one child per stack under the root, its key cut into
    fragments of 3 bytes (so cuts fall inside frame names), the value on the
    last fragment."""
    out = node("", 0, len(stacks))
    for stack, value in stacks.items():
        frags = [stack[i:i + 3] for i in range(0, len(stack), 3)]
        for i, frag in enumerate(frags):
            last = i == len(frags) - 1
            out += node(frag, value if last else 0, 0 if last else 1)
    return out


# ------------------------------------------------------------ flame graphs

def fg_stacks(fg):
    """{"a;b;c": self} from a FlameGraph: each node's parent is the node one
    level up whose [x, x + total) holds it."""
    levels = h.decode_flamegraph(fg)
    paths = [[""] * len(lvl) for lvl in levels]
    out = {}
    for li in range(1, len(levels)):
        for ni, n in enumerate(levels[li]):
            parent = next(pi for pi, p in enumerate(levels[li - 1])
                          if p["x"] <= n["x"] < p["x"] + p["total"])
            up = paths[li - 1][parent]
            paths[li][ni] = f"{up};{n['name']}" if up else n["name"]
            if n["self"]:
                out[paths[li][ni]] = out.get(paths[li][ni], 0) + n["self"]
    return out


class IngestFormatsTest(h.ServerTestCase):
    TREE_STACKS = {"main;work;sort": 7, "main;work": 2, "main;io read": 3, "gc": 1}
    TRIE_STACKS = {"main;alloc;grow": 4096, "main;alloc": 512, "init": 64}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.from_s = int(time.time()) - 60
        cls.window = (cls.from_s * 1000 - 5000, cls.from_s * 1000 + 5000)
        cls.responses = {}
        for what, name, body, params, ctype in cls.uploads():
            q = {"from": cls.from_s, "until": cls.from_s + 10, "spyName": "ember-it"}
            q.update(params)
            cls.responses[what] = cls.srv.ingest(name, body, q, content_type=ctype)
        stored = {"ss-simple", "ss-simple-norate", "ss-two", "ss-bytes", "ss-dup", "tree-app",
                  "trie-app"}
        h.wait_for(lambda: stored <= set(cls.srv.label_values("service_name", start=cls.window[0],
                                                              end=cls.window[1])),
                   timeout=30, what="every accepted upload in LabelValues(service_name)")

    @classmethod
    def uploads(cls):
        """(what, name, body, extra params, content type) of every upload."""
        ss = lambda f: h.read_testdata(f"speedscope/{f}")
        js = "application/json"
        octet = "application/octet-stream"
        tree_stacks, trie_stacks = cls.TREE_STACKS, cls.TRIE_STACKS
        return [
            ("simple", "ss-simple", ss("simple.speedscope.json"), {"format": "speedscope"}, js),
            ("simple-norate", "ss-simple-norate", ss("simple.speedscope.json"),
             {"format": "speedscope", "sampleRate": 0}, js),
            ("two", "ss-two{env=it}", ss("two-sampled.speedscope.json"),
             {"format": "speedscope"}, js),
            ("bytes", "ss-bytes", ss("two-sampled-bytes.speedscope.json"),
             {"format": "speedscope"}, js),
            ("dup", "ss-dup", ss("duplicates.speedscope.json"), {"format": "speedscope"}, js),
            ("tree", "tree-app.cpu", tree_body(tree_stacks), {"format": "tree", "sampleRate": 100},
             octet),
            ("trie", "trie-app.alloc_space", trie_body(trie_stacks), {},
             "binary/octet-stream+trie"),
            ("tree-pid", "pid-app{profile_id=0123456789abcdef}", tree_body(tree_stacks),
             {"format": "tree"}, octet),
            ("tree-truncated", "bad-tree", tree_body(tree_stacks)[:-1], {"format": "tree"}, octet),
            ("tree-suffix", "my.app", tree_body(tree_stacks), {"format": "tree"}, octet),
            ("trie-trailing", "bad-trie", trie_body(trie_stacks) + b"\x00", {"format": "trie"},
             octet),
            ("ss-schema", "bad-ss", b'{"$schema":"x","profiles":[]}', {"format": "speedscope"},
             js),
        ]

    # ------------------------------------------------------------ helpers

    def stacks(self, ptype, selector):
        fg = self.srv.flamegraph(ptype, selector, *self.window)
        return fg_stacks(fg), fg.total

    def check_upload(self, ptype, selector, want):
        got, total = self.stacks(ptype, selector)
        self.assertEqual(got, want, f"{selector} {ptype}: stacks from SelectMergeStacktraces")
        self.assertEqual(total, sum(want.values()), f"{selector} {ptype}: flamegraph.total")
        self.assertEqual(self.srv.series_sum(ptype, selector, *self.window), sum(want.values()),
                         f"{selector} {ptype}: SelectSeries sum")

    def series(self, service):
        return self.srv.series_labels([f'{{service_name="{service}"}}'],
                                      ["service_name", "profile_name", "__profile_type__", "env"],
                                      *self.window)

    # ------------------------------------------------------------ tests

    def test_statuses(self):
        want = {"simple": 200, "simple-norate": 200, "two": 200, "bytes": 200, "dup": 200,
                "tree": 200, "trie": 200, "tree-pid": 200, "tree-truncated": 422,
                "tree-suffix": 400, "trie-trailing": 422, "ss-schema": 422}
        for what, status in want.items():
            with self.subTest(upload=what):
                self.assertStatus(self.responses[what], status, what)
        self.assertIn("unknown profile type", self.responses["tree-suffix"].json["message"])
        self.assertEqual(self.responses["tree-truncated"].json["code"], "unknown")
        self.assertIn("trailing bytes", self.responses["trie-trailing"].json["message"])
        self.assertIn("unknown $schema", self.responses["ss-schema"].json["message"])

    def test_rejected_and_dropped_store_nothing(self):
        services = set(self.srv.label_values("service_name", start=self.window[0],
                                             end=self.window[1]))
        for svc in ("pid-app", "bad-tree", "my", "bad-trie", "bad-ss"):
            self.assertNotIn(svc, services)

    def test_tree(self):
        """sampleRate=100: values x 1e7 ns."""
        self.check_upload(CPU_NS, '{service_name="tree-app"}', scaled(self.TREE_STACKS, 10**7))

    def test_trie(self):
        """alloc_space: no rate scaling; keys split on ';' whatever the fragments."""
        self.check_upload(ALLOC_SPACE, '{service_name="trie-app"}', self.TRIE_STACKS)

    def test_speedscope_evented(self):
        """One profile, unit none: the app name keeps its type (cpu); rate 10,000/s, so
        x 100 ticks x 1e5 ns; profile_name is the profile's name."""
        self.check_upload(CPU_NS, '{service_name="ss-simple"}', scaled(ABCD_UNITS, 100 * 10**5))
        self.assertEqual(self.series("ss-simple"),
                         [(("__profile_type__", CPU_NS), ("profile_name", "simple.txt"),
                           ("service_name", "ss-simple"))])

    def test_speedscope_sample_rate_zero(self):
        """sampleRate=0 (not the default): no scaling, ticks are counts."""
        self.check_upload(CPU_COUNT, '{service_name="ss-simple-norate"}', scaled(ABCD_UNITS, 100))

    def test_speedscope_two_profiles(self):
        """Two profiles: app name "ss-two.seconds" (wall), one series per
        profile_name; seconds x 100 ticks x 1e7 ns = 1e9 ns per second."""
        for name in ("one", "two"):
            with self.subTest(profile=name):
                self.check_upload(WALL_NS, f'{{service_name="ss-two",profile_name="{name}"}}',
                                  scaled(ABCD_UNITS, 10**9))
        self.assertEqual(self.series("ss-two"),
                         [(("__profile_type__", WALL_NS), ("env", "it"), ("profile_name", p),
                           ("service_name", "ss-two")) for p in ("one", "two")])

    def test_speedscope_bytes(self):
        """Two profiles in bytes: "ss-bytes.bytes" is memory samples:bytes, unscaled."""
        for name in ("one", "two"):
            with self.subTest(profile=name):
                self.check_upload(BYTES, f'{{service_name="ss-bytes",profile_name="{name}"}}',
                                  ABCD_UNITS)

    def test_speedscope_duplicates_merged(self):
        """Three profiles with one name, type, unit and startValue are one profile
        (so the app name keeps its type: cpu), every sample three times."""
        self.check_upload(CPU_NS, '{service_name="ss-dup"}', scaled(ABCD_UNITS, 3 * 10**9))
        self.assertEqual(self.series("ss-dup"),
                         [(("__profile_type__", CPU_NS), ("profile_name", "one"),
                           ("service_name", "ss-dup"))])


if __name__ == "__main__":
    unittest.main()
