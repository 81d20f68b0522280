"""Arrow IPC streams in the Parca Agent's shapes, with random data, written by
pyarrow (the independent writer): the oracle for lc/arrow.h (via
tests/tools/arrow_dump) and the seed corpus of tests/fuzz/fuzz_arrow_ipc.c.

Shapes (docs/internals/arrow.md has the schemas):
- v2: the WriteArrow record — labels struct of run-end encoded dictionary
  strings, stacktrace list_view of a dictionary-encoded frame struct whose
  fields are dictionaries again (lines list_view of struct with a
  dictionary-encoded function struct, string_view name), arrow.uuid ids,
  run-end encoded constants, timestamp[ns].
- v1: the Write stacktrace record — binary ids, bool, plain list of structs
  with run-end encoded dictionary binaries and uint64s.
- misc: the other column types the reader accepts (int8..int64 signed and
  unsigned, large binary/list, dictionaries with int8/int16/int64 indices,
  run ends of int16/int64, nulls everywhere that allows them).

Each generator returns (schema, [record batches]); write() writes them as one
stream, LZ4_FRAME-compressed or not, with dictionary deltas or replacements.
canon() is the comparison form that arrow_dump prints.

Usage: arrow_gen.py corpus OUT_DIR SEED COUNT   writes COUNT streams
       arrow_gen.py check ARROW_DUMP SEED COUNT   writes, decodes, compares
       arrow_gen.py capture ARROW_DUMP FILE...    WriteArrowRequest captures
Exit 1 with the first difference."""
import json
import subprocess
import tempfile
import os
import random
import sys
import uuid

import pyarrow as pa

REE32 = pa.int32()


def runs(values):
    """(run ends, run values) of a python list: runs of equal values."""
    ends, vals = [], []
    for i, v in enumerate(values):
        if vals and vals[-1] == v:
            ends[-1] = i + 1
        else:
            vals.append(v)
            ends.append(i + 1)
    return ends, vals


def ree(values, typ, run_type=REE32):
    """Run-end encodes a python list."""
    ends, vals = runs(values)
    return pa.RunEndEncodedArray.from_arrays(pa.array(ends, run_type), pa.array(vals, typ))


def dict_array(rng, pool, n, index_type=pa.uint32(), null_rate=0.0):
    """n random entries of pool, dictionary-encoded over all of pool."""
    idx = [None if rng.random() < null_rate else rng.randrange(len(pool)) for _ in range(n)]
    return pa.DictionaryArray.from_arrays(pa.array(idx, index_type), pool)


def rand_name(rng, lo=1, hi=12):
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_./0123456789é")
                   for _ in range(rng.randint(lo, hi)))


def ree_dict_strings(rng, pool, n):
    """A label column: runs of dictionary strings (pool entries), some null."""
    vals = []
    while len(vals) < n:
        v = rng.randrange(len(pool)) if rng.random() > 0.1 else None
        vals.extend([v] * rng.randint(1, 5))
    ends, idx = runs(vals[:n])
    values = pa.DictionaryArray.from_arrays(pa.array(idx, pa.uint32()), pool)
    return pa.RunEndEncodedArray.from_arrays(pa.array(ends, REE32), values)


class V2Pools:
    """The dictionaries of a v2 stream; they grow batch by batch (deltas)."""

    def __init__(self, rng):
        self.rng = rng
        self.labels = {k: [rand_name(rng)] for k in ("comm", "cpu", "node", "thread_id", "thread_name")}
        self.frame_types = ["native", "kernel"]
        self.files = ["[kernel.kallsyms]"]
        self.build_ids = ["%032x" % rng.getrandbits(128)]
        self.filenames = ["vmlinux"]
        self.functions = []  # (system_name, filename index, start_line)
        self.frames = []     # (address, frame_type, file, build_id, lines)

    def grow(self):
        rng = self.rng
        for pool in self.labels.values():
            pool.extend(rand_name(rng) for _ in range(rng.randint(0, 3)))
        self.frame_types.extend(rand_name(rng) for _ in range(rng.randint(0, 1)))
        self.files.extend(rand_name(rng) for _ in range(rng.randint(0, 2)))
        self.build_ids.extend("%032x" % rng.getrandbits(128) for _ in range(rng.randint(0, 2)))
        self.filenames.extend(rand_name(rng) for _ in range(rng.randint(0, 2)))
        for _ in range(rng.randint(0, 4)):
            # system_name: views both inline (<= 12 bytes) and in data buffers
            self.functions.append((rand_name(rng, 1, 40), rng.randrange(len(self.filenames)),
                                   rng.getrandbits(rng.choice([8, 40, 64]))))
        for _ in range(rng.randint(1, 6)):
            lines = None
            if self.functions and rng.random() < 0.6:
                lines = [(rng.getrandbits(rng.choice([8, 64])), rng.getrandbits(16),
                          rng.randrange(len(self.functions))) for _ in range(rng.randint(0, 3))]
            self.frames.append((rng.getrandbits(64), rng.randrange(len(self.frame_types)),
                                rng.randrange(len(self.files)),
                                None if rng.random() < 0.2 else rng.randrange(len(self.build_ids)),
                                lines))


LABEL_TYPE = pa.run_end_encoded(REE32, pa.dictionary(pa.uint32(), pa.string()))
FUNCTION_TYPE = pa.struct([("system_name", pa.string_view()),
                           ("filename", pa.dictionary(pa.uint32(), pa.string())),
                           pa.field("start_line", pa.uint64(), nullable=False)])
LINE_TYPE = pa.struct([pa.field("line", pa.uint64(), nullable=False),
                       pa.field("column", pa.uint64(), nullable=False),
                       pa.field("function", pa.dictionary(pa.uint32(), FUNCTION_TYPE), nullable=False)])
FRAME_TYPE = pa.struct([pa.field("address", pa.uint64(), nullable=False),
                        ("frame_type", pa.dictionary(pa.uint32(), pa.string())),
                        ("mapping_file", pa.dictionary(pa.uint32(), pa.string())),
                        ("mapping_build_id", pa.dictionary(pa.uint32(), pa.string())),
                        ("lines", pa.list_view(LINE_TYPE))])


def v2_schema(label_names=("comm", "cpu", "node", "thread_id", "thread_name")):
    labels = pa.struct([(k, LABEL_TYPE) for k in label_names])
    ree_str = pa.run_end_encoded(REE32, pa.string())
    return pa.schema([
        pa.field("labels", labels, nullable=False),
        pa.field("stacktrace", pa.list_view(pa.dictionary(pa.uint32(), FRAME_TYPE))),
        pa.field("stacktrace_id", pa.uuid(), nullable=False),
        pa.field("value", pa.int64(), nullable=False),
        pa.field("producer", ree_str, nullable=False),
        pa.field("sample_type", ree_str, nullable=False),
        pa.field("sample_unit", ree_str, nullable=False),
        pa.field("period_type", ree_str, nullable=False),
        pa.field("period_unit", ree_str, nullable=False),
        pa.field("temporality", ree_str),
        pa.field("period", pa.run_end_encoded(REE32, pa.int64()), nullable=False),
        pa.field("duration", pa.run_end_encoded(REE32, pa.uint64()), nullable=False),
        pa.field("timestamp", pa.timestamp("ns", tz="UTC"), nullable=False),
    ], metadata={"parca_write_schema_version": "v2"})


def v2_frames_dict(p):
    """The frame struct dictionary over every frame so far."""
    functions = pa.StructArray.from_arrays([
        pa.array([f[0] for f in p.functions], pa.string_view()),
        pa.DictionaryArray.from_arrays(pa.array([f[1] for f in p.functions], pa.uint32()),
                                       pa.array(p.filenames, pa.string())),
        pa.array([f[2] for f in p.functions], pa.uint64())], fields=list(FUNCTION_TYPE))
    all_lines, offsets, sizes, validity = [], [], [], []
    for fr in p.frames:
        offsets.append(len(all_lines))
        sizes.append(len(fr[4] or []))
        validity.append(fr[4] is not None)
        all_lines.extend(fr[4] or [])
    lines = pa.StructArray.from_arrays([
        pa.array([ln[0] for ln in all_lines], pa.uint64()),
        pa.array([ln[1] for ln in all_lines], pa.uint64()),
        pa.DictionaryArray.from_arrays(pa.array([ln[2] for ln in all_lines], pa.uint32()), functions)],
        fields=list(LINE_TYPE))
    mask = pa.array([not v for v in validity], pa.bool_())
    lines_view = pa.ListViewArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(sizes, pa.int32()),
                                              lines, mask=mask)
    d = lambda col, pool: pa.DictionaryArray.from_arrays(pa.array(col, pa.uint32()), pa.array(pool, pa.string()))
    return pa.StructArray.from_arrays([
        pa.array([fr[0] for fr in p.frames], pa.uint64()),
        d([fr[1] for fr in p.frames], p.frame_types),
        d([fr[2] for fr in p.frames], p.files),
        d([fr[3] for fr in p.frames], p.build_ids),
        lines_view], fields=list(FRAME_TYPE))


def v2_stacktraces(rng, p, n):
    """list_view rows sharing ranges, as the agent sends: offsets not monotonic."""
    stacks, offsets, sizes, flat = [], [], [], []
    for _ in range(n):
        if stacks and rng.random() < 0.4:
            o, s = rng.choice(stacks)
        else:
            frames = [rng.randrange(len(p.frames)) for _ in range(rng.randint(0, 6))]
            o, s = len(flat), len(frames)
            flat.extend(frames)
            stacks.append((o, s))
        offsets.append(o)
        sizes.append(s)
    values = pa.DictionaryArray.from_arrays(pa.array(flat, pa.uint32()), v2_frames_dict(p))
    mask = pa.array([rng.random() < 0.05 for _ in range(n)], pa.bool_())
    return pa.ListViewArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(sizes, pa.int32()),
                                        values, mask=mask)


def v2_batch(rng, p, schema):
    n = rng.choice([0, 1, 2, 7, rng.randint(1, 300)])
    const = lambda v, t=pa.string(): ree([v] * n, t)
    labels = pa.StructArray.from_arrays([ree_dict_strings(rng, pa.array(pool, pa.string()), n)
                                         for pool in p.labels.values()],
                                        fields=list(schema.field("labels").type))
    ids = pa.array([uuid.UUID(int=rng.getrandbits(128)).bytes for _ in range(n)], pa.binary(16))
    temporality = [None if rng.random() < 0.3 else "delta" for _ in range(n)]
    cols = [labels, v2_stacktraces(rng, p, n), pa.ExtensionArray.from_storage(pa.uuid(), ids),
            pa.array([rng.randint(-2**63, 2**63 - 1) for _ in range(n)], pa.int64()),
            const("parca_agent"), const("samples"), const("count"), const("cpu"), const("nanoseconds"),
            ree(temporality, pa.string()), const(10309278, pa.int64()),
            const(rng.getrandbits(64), pa.uint64()),
            pa.array([rng.getrandbits(62) for _ in range(n)], pa.timestamp("ns", tz="UTC"))]
    return pa.record_batch(cols, schema=schema)


def gen_v2(rng):
    schema, pools, batches = v2_schema(), None, []
    pools = V2Pools(rng)
    for _ in range(rng.randint(1, 3)):
        pools.grow()
        batches.append(v2_batch(rng, pools, schema))
    return schema, batches


def gen_v1_stacks(rng):
    ree_bin = pa.run_end_encoded(REE32, pa.dictionary(pa.uint32(), pa.binary()))
    line = pa.struct([pa.field("line", pa.int64(), nullable=False), ("column", pa.uint64()),
                      ("function_name", pa.dictionary(pa.uint32(), pa.binary())),
                      ("function_filename", ree_bin)])
    loc = pa.struct([pa.field("address", pa.uint64(), nullable=False), ("frame_type", ree_bin),
                     ("mapping_start", pa.run_end_encoded(REE32, pa.uint64())),
                     ("lines", pa.list_(line))])
    schema = pa.schema([pa.field("stacktrace_id", pa.binary(), nullable=False),
                        pa.field("is_complete", pa.bool_(), nullable=False),
                        pa.field("locations", pa.list_(loc))])
    pool = pa.array([rand_name(rng).encode() for _ in range(rng.randint(1, 8))], pa.binary())
    batches = []
    for _ in range(rng.randint(1, 3)):
        n = rng.randint(0, 40)
        locs = []
        for _ in range(n):
            locs.append(None if rng.random() < 0.1 else [
                {"address": rng.getrandbits(64),
                 "lines": [{"line": rng.randint(-5, 10**6), "column": rng.getrandbits(64)}
                           for _ in range(rng.randint(0, 3))]}
                for _ in range(rng.randint(0, 5))])
        flat = [l for ls in locs if ls for l in ls]
        flat_lines = [ln for l in flat for ln in l["lines"]]
        m = len(flat_lines)
        lines = pa.StructArray.from_arrays([
            pa.array([ln["line"] for ln in flat_lines], pa.int64()),
            pa.array([ln["column"] for ln in flat_lines], pa.uint64()),
            dict_array(rng, pool, m, null_rate=0.2),
            pa.RunEndEncodedArray.from_arrays(pa.array([m] if m else [], REE32),
                                              dict_array(rng, pool, 1 if m else 0))], fields=list(line))
        offs, o = [], 0
        for l in flat:
            offs.append(o)
            o += len(l["lines"])
        offs.append(o)
        k = len(flat)
        fl = pa.StructArray.from_arrays([
            pa.array([l["address"] for l in flat], pa.uint64()),
            pa.RunEndEncodedArray.from_arrays(pa.array([k] if k else [], REE32), dict_array(rng, pool, 1 if k else 0)),
            ree([rng.choice([0, 4096]) for _ in range(k)], pa.uint64()),
            pa.ListArray.from_arrays(pa.array(offs, pa.int32()), lines)], fields=list(loc))
        offs, o = [], 0
        for ls in locs:
            offs.append(o)
            o += len(ls or [])
        offs.append(o)
        mask = pa.array([ls is None for ls in locs], pa.bool_())
        cols = [pa.array([os.urandom(16) for _ in range(n)], pa.binary()),
                pa.array([rng.random() < 0.5 for _ in range(n)], pa.bool_()),
                pa.ListArray.from_arrays(pa.array(offs, pa.int32()), fl, mask=mask)]
        batches.append(pa.record_batch(cols, schema=schema))
    return schema, batches


MISC_INTS = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


def rand_int(rng, t):
    bits = t.bit_width
    return rng.randint(-2**(bits - 1), 2**(bits - 1) - 1) if pa.types.is_signed_integer(t) \
        else rng.randint(0, 2**bits - 1)


def gen_misc(rng):
    fields = [pa.field(f"i{t}", t) for t in MISC_INTS]
    fields += [pa.field("large_bin", pa.large_binary()), pa.field("large_str", pa.large_string()),
               pa.field("bin_view", pa.binary_view()), pa.field("fsb", pa.binary(3)),
               pa.field("large_list", pa.large_list(pa.int16())),
               pa.field("large_list_view", pa.large_list_view(pa.string())),
               pa.field("d8", pa.dictionary(pa.int8(), pa.binary())),
               pa.field("d16", pa.dictionary(pa.uint16(), pa.large_string())),
               pa.field("d64", pa.dictionary(pa.int64(), pa.int32())),
               pa.field("ree16", pa.run_end_encoded(pa.int16(), pa.int64())),
               pa.field("ree64", pa.run_end_encoded(pa.int64(), pa.string())),
               pa.field("ts", pa.timestamp("us")), pa.field("flag", pa.bool_())]
    schema = pa.schema(fields)
    strs = [rand_name(rng) for _ in range(5)]
    bins = [os.urandom(rng.randint(0, 9)) for _ in range(7)]
    intpool = pa.array([rng.randint(-9, 9) for _ in range(4)], pa.int32())
    batches = []
    for _ in range(rng.randint(1, 3)):
        n = rng.randint(0, 60)
        # growing pools: pyarrow sends the new entries as a delta when asked to
        strs += [rand_name(rng) for _ in range(rng.randint(0, 3))]
        bins += [os.urandom(rng.randint(0, 9)) for _ in range(rng.randint(0, 3))]
        strpool, binpool = pa.array(strs, pa.large_string()), pa.array(bins[:120], pa.binary())
        maybe = lambda f: [None if rng.random() < 0.15 else f() for _ in range(n)]
        cols = [pa.array(maybe(lambda t=t: rand_int(rng, t)), t) for t in MISC_INTS]
        cols += [pa.array(maybe(lambda: os.urandom(rng.randint(0, 20))), pa.large_binary()),
                 pa.array(maybe(lambda: rand_name(rng, 0, 20)), pa.large_string()),
                 pa.array(maybe(lambda: os.urandom(rng.randint(0, 30))), pa.binary_view()),
                 pa.array(maybe(lambda: os.urandom(3)), pa.binary(3)),
                 pa.array(maybe(lambda: [rand_int(rng, pa.int16()) for _ in range(rng.randint(0, 4))]),
                          pa.large_list(pa.int16())),
                 pa.array(maybe(lambda: [rand_name(rng) for _ in range(rng.randint(0, 4))]),
                          pa.large_list_view(pa.string())),
                 dict_array(rng, binpool, n, pa.int8(), 0.15),
                 dict_array(rng, strpool, n, pa.uint16(), 0.15),
                 dict_array(rng, intpool, n, pa.int64(), 0.15),
                 ree(maybe(lambda: rng.choice([1, 2, -2**63])), pa.int64(), pa.int16()),
                 ree(maybe(lambda: rng.choice(["x", "yy"])), pa.string(), pa.int64()),
                 pa.array(maybe(lambda: rng.getrandbits(50)), pa.timestamp("us")),
                 pa.array(maybe(lambda: rng.random() < 0.5), pa.bool_())]
        batches.append(pa.record_batch(cols, schema=schema))
    return schema, batches


GENERATORS = {"v2": gen_v2, "v1": gen_v1_stacks, "misc": gen_misc}


def write(path, schema, batches, lz4, deltas):
    opts = pa.ipc.IpcWriteOptions(compression="lz4" if lz4 else None, emit_dictionary_deltas=deltas)
    with pa.OSFile(path, "wb") as f, pa.ipc.new_stream(f, schema, options=opts) as w:
        for b in batches:
            w.write_batch(b)


def canon(v):
    """The form arrow_dump prints: ints as strings, bytes and text as hex."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return v.encode().hex()
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, uuid.UUID):
        return v.bytes.hex()
    if isinstance(v, dict):
        return {k: canon(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [canon(x) for x in v]
    raise TypeError(f"no canonical form for {type(v)}")


def as_ints(arr):
    """Timestamps as their int64 (to_pylist would lose the nanoseconds)."""
    if pa.types.is_timestamp(arr.type):
        return arr.cast(pa.int64())
    return arr


def expected(batches):
    return [{name: canon(as_ints(b.column(i)).to_pylist()) for i, name in enumerate(b.schema.names)}
            for b in batches]


def generate(rng, i):
    kind = list(GENERATORS)[i % len(GENERATORS)]
    schema, batches = GENERATORS[kind](rng)
    return kind, schema, batches, i % 2 == 0, i % 4 < 2


def decode(dump, path, *args):
    r = subprocess.run([dump, path, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{path}: arrow_dump failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def compare(path, got, schema, batches):
    want = expected(batches)
    meta = {k.decode(): v.decode() for k, v in (schema.metadata or {}).items()}
    if got["metadata"] != meta:
        raise SystemExit(f"{path}: metadata {got['metadata']} != {meta}")
    if len(got["batches"]) != len(want):
        raise SystemExit(f"{path}: {len(got['batches'])} batches, pyarrow wrote {len(want)}")
    for k, (g, w) in enumerate(zip(got["batches"], want)):
        for name in w:
            for row, (gv, wv) in enumerate(zip(g.get(name, []), w[name])):
                if gv != wv:
                    raise SystemExit(f"{path}: batch {k} column {name} row {row}: {gv!r} != {wv!r}")
            if len(g.get(name, [])) != len(w[name]):
                raise SystemExit(f"{path}: batch {k} column {name}: {len(g.get(name, []))} rows, "
                                 f"pyarrow wrote {len(w[name])}")
    return sum(b.num_rows for b in batches)


def check(dump, seed, count):
    rng = random.Random(seed)
    rows = deltas = replaced = 0
    with tempfile.TemporaryDirectory() as d:
        for i in range(count):
            kind, schema, batches, lz4, emit_deltas = generate(rng, i)
            path = os.path.join(d, f"{kind}-{i}.arrows")
            write(path, schema, batches, lz4, emit_deltas)
            rows += compare(path, decode(dump, path), schema, batches)
            with pa.ipc.open_stream(path) as r:
                r.read_all()
                deltas += r.stats.num_dictionary_deltas
                replaced += r.stats.num_replaced_dictionaries
    print(f"{count} streams, {rows} rows, {deltas} dictionary deltas, {replaced} replaced "
          f"dictionaries: every value as pyarrow wrote it")
    if count >= 8 and (deltas == 0 or replaced == 0):
        raise SystemExit("the streams exercised no dictionary deltas or replacements")


def ipc_buffer(request):
    """Field 1 of a WriteArrowRequest (protobuf: tag 0x0a, varint length)."""
    if request[:1] != b"\x0a":
        raise SystemExit("not a WriteArrowRequest")
    n, shift, i = 0, 0, 1
    while True:
        n |= (request[i] & 0x7F) << shift
        shift += 7
        i += 1
        if not request[i - 1] & 0x80:
            return request[i:i + n]


def capture(dump, files):
    for f in files:
        with open(f, "rb") as fh:
            stream = ipc_buffer(fh.read())
        reader = pa.ipc.open_stream(stream)
        batches = list(reader)
        rows = compare(f, decode(dump, f, "--parca-request"), reader.schema, batches)
        print(f"{os.path.basename(f)}: {rows} rows as pyarrow reads them")


def main():
    mode = sys.argv[1]
    if mode == "corpus":
        out, seed, count = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
        os.makedirs(out, exist_ok=True)
        rng = random.Random(seed)
        for i in range(count):
            kind, schema, batches, lz4, deltas = generate(rng, i)
            write(os.path.join(out, f"gen-{kind}-{i:03d}"), schema, batches, lz4, deltas)
    elif mode == "check":
        check(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "capture":
        capture(sys.argv[2], sys.argv[3:])


if __name__ == "__main__":
    main()
