"""WriteArrow requests in the Parca Agent's v2 schema with random shapes,
written by pyarrow, and what they add up to: the oracle of
test_parca_agent_write.py's property test and seeds for
tests/fuzz/corpus/parca_arrow.

Unlike arrow_gen.py (which checks every decoded value), the data here is
what an agent could send and ember must store: positive counts, timestamps in
the last minutes, label names Prometheus accepts, a few extra label fields
(Kubernetes metadata), frames with and without lines, shared list_view
ranges, LZ4 or not. The oracle is computed from the rows as generated:
per service (comm, or "parca_agent" without one) the value sum and the sum
per stack as Pyroscope's flame graph names it, root first: a location's
lines outermost first, a frame without lines "<mapping file>+0x<address>"
(the build id when the file is empty).

Usage: parca_write_gen.py OUT_DIR SEED COUNT   writes req-N.arrows (the
ipc_buffer of a WriteArrowRequest) and expected.json; parca_write_gen.py
corpus OUT_DIR SEED COUNT writes streams for the fuzz corpus;
parca_write_gen.py bad OUT_DIR writes streams ember must refuse
(bad-*.arrows) and prints their comm labels as JSON."""
import json
import os
import random
import sys
import time
import uuid

import pyarrow as pa

from arrow_gen import REE32, ree, v2_frames_dict, v2_schema

BASE_LABELS = ("comm", "cpu", "node", "thread_id", "thread_name")
EXTRA_LABELS = ("namespace", "pod", "container")


def word(rng, lo=3, hi=10):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_0123456789") for _ in range(rng.randint(lo, hi)))


class Shape:
    """Pools of one request: label values, functions, frames."""

    def __init__(self, rng):
        self.rng = rng
        self.label_names = list(BASE_LABELS) + rng.sample(EXTRA_LABELS, rng.randint(0, 3))
        self.label_pools = {k: [word(rng) for _ in range(rng.randint(1, 4))] for k in self.label_names}
        self.files = [word(rng) for _ in range(rng.randint(1, 4))] + [""]
        self.build_ids = ["%032x" % rng.getrandbits(128) for _ in range(3)]
        self.filenames = [word(rng) + ".c" for _ in range(3)]
        self.functions = [(word(rng, 3, 30), rng.randrange(3), rng.randint(0, 1000))
                          for _ in range(rng.randint(1, 8))]
        self.frame_types = ["native"]
        # arrow_gen.V2Pools' layout: (address, frame type, file, build id, lines
        # [(line, column, function)] or None), so v2_frames_dict writes them
        self.frames = []
        for _ in range(rng.randint(1, 20)):
            lines = None
            if rng.random() < 0.5:
                lines = [(rng.randint(0, 5000), 0, rng.randrange(len(self.functions)))
                         for _ in range(rng.randint(1, 3))]
            self.frames.append((rng.getrandbits(rng.choice([12, 32, 47])), 0, rng.randrange(len(self.files)),
                                rng.randrange(len(self.build_ids)), lines))

    def frame_names(self, i):
        """The flame graph names of frame i, outermost first."""
        addr, _, f, b, lines = self.frames[i]
        if lines:
            return [self.functions[fn][0] for _, _, fn in reversed(lines)]
        module = self.files[f] or self.build_ids[b]
        return [f"{module}+0x{addr:x}"]


def schema_of(s):
    return v2_schema(tuple(s.label_names))


def label_column(rng, pool, n, nullable):
    vals = []
    while len(vals) < n:
        v = None if nullable and rng.random() < 0.1 else rng.randrange(len(pool))
        vals.extend([v] * rng.randint(1, 6))
    vals = vals[:n]
    arr = ree(vals, pa.uint32())
    values = pa.DictionaryArray.from_arrays(arr.values, pa.array(pool, pa.string()))
    return pa.RunEndEncodedArray.from_arrays(arr.run_ends, values), vals


def batch(rng, s, schema, now_ns, totals):
    n = rng.randint(1, 400)
    label_cols, label_vals = [], {}
    for k in s.label_names:
        col, vals = label_column(rng, s.label_pools[k], n, nullable=k != "comm" or rng.random() < 0.3)
        label_cols.append(col)
        label_vals[k] = vals
    labels = pa.StructArray.from_arrays(label_cols, fields=list(schema.field("labels").type))
    stacks, offsets, sizes, flat, mask = [], [], [], [], []
    values = [rng.randint(1, 1000) for _ in range(n)]
    for row in range(n):
        if stacks and rng.random() < 0.5:
            o, sz, frames = rng.choice(stacks)
        else:
            frames = [rng.randrange(len(s.frames)) for _ in range(rng.randint(1, 8))]
            o, sz = len(flat), len(frames)
            flat.extend(frames)
            stacks.append((o, sz, frames))
        offsets.append(o)
        sizes.append(sz)
        mask.append(False)
        comm = label_vals["comm"][row]
        service = s.label_pools["comm"][comm] if comm is not None else "parca_agent"
        path = ";".join(name for i in reversed(frames) for name in s.frame_names(i))
        svc = totals.setdefault(service, {"total": 0, "stacks": {}})
        svc["total"] += values[row]
        svc["stacks"][path] = svc["stacks"].get(path, 0) + values[row]
    stack_col = pa.ListViewArray.from_arrays(
        pa.array(offsets, pa.int32()), pa.array(sizes, pa.int32()),
        pa.DictionaryArray.from_arrays(pa.array(flat, pa.uint32()), v2_frames_dict(s)))
    ids = pa.array([uuid.UUID(int=rng.getrandbits(128)).bytes for _ in range(n)], pa.binary(16))
    const = lambda v, t=pa.string(): ree([v] * n, t)
    stamps = [now_ns - rng.randrange(120 * 10**9) for _ in range(n)]
    cols = [labels, stack_col, pa.ExtensionArray.from_storage(pa.uuid(), ids), pa.array(values, pa.int64()),
            const("parca_agent"), const("samples"), const("count"), const("cpu"), const("nanoseconds"),
            const("delta"), const(10309278, pa.int64()), const(10**9, pa.uint64()),
            pa.array(stamps, pa.timestamp("ns", tz="UTC"))]
    return pa.record_batch(cols, schema=schema)


def stream(rng, now_ns, totals):
    s = Shape(rng)
    schema = schema_of(s)
    sink = pa.BufferOutputStream()
    opts = pa.ipc.IpcWriteOptions(compression="lz4" if rng.random() < 0.7 else None)
    with pa.ipc.new_stream(sink, schema, options=opts) as w:
        for _ in range(rng.randint(1, 2)):
            w.write_batch(batch(rng, s, schema, now_ns, totals))
    return sink.getvalue().to_pybytes()


def bad_requests(out):
    """Requests ember must refuse whole, each with its own comm (to show
    nothing was stored): bad-<what>.bin."""
    rng = random.Random(28)
    cases = {}
    for what in ("nul_label", "string_value", "no_stacktrace", "null_timestamp"):
        s = Shape(rng)
        s.label_pools = {k: ["bad_" + what] for k in s.label_names}
        if what == "nul_label":
            s.label_pools["comm"] = ["bad_nul\x00label"]
        schema = schema_of(s)
        b = batch(rng, s, schema, time.time_ns(), {})
        cols = {name: b.column(name) for name in schema.names}
        if what == "string_value":
            cols["value"] = pa.array([str(v) for v in cols["value"].to_pylist()], pa.string())
        elif what == "no_stacktrace":
            del cols["stacktrace"]
        elif what == "null_timestamp":
            ts = cols["timestamp"].cast(pa.int64()).to_pylist()
            ts[len(ts) // 2] = None
            cols["timestamp"] = pa.array(ts, pa.int64()).cast(pa.timestamp("ns", tz="UTC"))
        b = pa.record_batch(list(cols.values()), names=list(cols))
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, b.schema.with_metadata(schema.metadata)) as w:
            w.write_batch(b)
        ipc = sink.getvalue().to_pybytes()
        with open(os.path.join(out, f"bad-{what}.arrows"), "wb") as f:
            f.write(ipc)
        cases[what] = "bad_nul\x00label" if what == "nul_label" else "bad_" + what
    return cases


def main():
    if sys.argv[1] == "bad":
        os.makedirs(sys.argv[2], exist_ok=True)
        print(json.dumps(bad_requests(sys.argv[2])))
        return
    if sys.argv[1] == "corpus":
        out, seed, count = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        rng = random.Random(seed)
        os.makedirs(out, exist_ok=True)
        for i in range(count):
            with open(os.path.join(out, f"gen-v2-{seed}-{i:03d}"), "wb") as f:
                f.write(stream(rng, time.time_ns(), {}))
        return
    out, seed, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rng, totals, now_ns = random.Random(seed), {}, time.time_ns()
    os.makedirs(out, exist_ok=True)
    for i in range(count):
        ipc = stream(rng, now_ns, totals)
        with open(os.path.join(out, f"req-{i:03d}.arrows"), "wb") as f:
            f.write(ipc)
    with open(os.path.join(out, "expected.json"), "w") as f:
        json.dump({"count": count, "now_ns": now_ns, "services": totals}, f)


if __name__ == "__main__":
    main()
