#!/usr/bin/env python3
"""Independent oracle for captured Parca Agent pushes (issue 28): decodes them with pyarrow.

Reads the *.bin messages that parca_capture_proxy.py saved (serialized WriteArrowRequest, or
WriteRequest pairs write-NNN-0.bin / write-NNN-1.bin), and prints JSON with, per message: rows,
the sum of `value`, the schema version, the IPC message kinds, the body compression codec and
the delta dictionaries (read from the IPC flatbuffer headers, since pyarrow hides them); and
for one burner process (rows whose labels say comm=NAME, thread_id=PID): the value summed per
leaf function and per stack, with native addresses named from the burner's own ELF symbol table
(`nm`), since the agent pushes native frames unsymbolized.

usage: parca_arrow_totals.py CAPTURE_DIR --burner ELF --pid PID [--comm parca_burner]
needs: pip install pyarrow; nm (binutils).
"""
import argparse
import bisect
import glob
import json
import os
import struct
import subprocess
import sys

import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from parca_capture_proxy import bytes_field_1  # noqa: E402

HEADER_KINDS = {1: "schema", 2: "dictionary", 3: "record batch"}
CODECS = {0: "LZ4_FRAME", 1: "ZSTD"}


class FlatTable:
    """Just enough of a flatbuffers table reader for Arrow's Message.fbs."""

    def __init__(self, buf, pos):
        self.buf, self.pos = buf, pos
        vtable = pos - struct.unpack_from("<i", buf, pos)[0]
        size = struct.unpack_from("<H", buf, vtable)[0]
        self.fields = [struct.unpack_from("<H", buf, vtable + 4 + 2 * i)[0]
                       for i in range((size - 4) // 2)]

    def _at(self, index):
        return self.pos + self.fields[index] if index < len(self.fields) and self.fields[index] else None

    def scalar(self, index, fmt, default):
        at = self._at(index)
        return default if at is None else struct.unpack_from(fmt, self.buf, at)[0]

    def table(self, index):
        at = self._at(index)
        return None if at is None else FlatTable(self.buf, at + struct.unpack_from("<I", self.buf, at)[0])


def ipc_headers(ipc):
    """(kind, codec or None, is_delta) for each IPC message of a stream."""
    out = []
    for message in pa.ipc.MessageReader.open_stream(pa.BufferReader(ipc)):
        buf = message.metadata.to_pybytes()
        root = FlatTable(buf, struct.unpack_from("<I", buf, 0)[0])
        kind = root.scalar(1, "<B", 0)
        header = root.table(2)
        batch, is_delta = header, False
        if kind == 2:  # DictionaryBatch { id, data: RecordBatch, isDelta }
            batch, is_delta = header.table(1), bool(header.scalar(2, "<B", 0))
        codec = None
        if kind in (2, 3) and batch is not None:
            compression = batch.table(3)  # RecordBatch { length, nodes, buffers, compression }
            if compression is not None:
                codec = CODECS.get(compression.scalar(0, "<b", 0), "unknown")
        out.append((HEADER_KINDS.get(kind, str(kind)), codec, is_delta))
    return out


def symbol_table(elf):
    rows = []
    for line in subprocess.run(["nm", "--defined-only", "-S", elf], check=True,
                               capture_output=True, text=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "tTwW":
            rows.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
    rows.sort()
    return rows


def name_of(symbols, starts, address):
    i = bisect.bisect_right(starts, address) - 1
    if i >= 0 and address < symbols[i][0] + symbols[i][1]:
        return symbols[i][2]
    return hex(address)


def text(value):
    return value.decode() if isinstance(value, bytes) else value


def frame_names(frames, burner_file, symbols, starts):
    names = []
    for frame in frames:
        if text(frame["mapping_file"]) == burner_file:
            names.append(name_of(symbols, starts, frame["address"]))
        else:
            names.append("%s+%#x" % (text(frame["mapping_file"]), frame["address"]))
    return names


def rows_of(table):
    """Rows as dicts; a timestamp[ns] column is read as int64 (Python datetimes stop at µs)."""
    for i, field in enumerate(table.schema):
        if pa.types.is_timestamp(field.type):
            table = table.set_column(i, field.name, table.column(i).cast(pa.int64()))
    return table.to_pylist() if table.num_rows else []


def label(row, name):
    if "labels" in row:  # v2: one struct column
        return text((row["labels"] or {}).get(name))
    return text(row.get("labels." + name))  # v1: one column per label


def read_table(path):
    ipc = bytes_field_1(open(path, "rb").read())
    return ipc, pa.ipc.open_stream(ipc).read_all()


def describe(path, ipc, table):
    headers = ipc_headers(ipc)
    kinds = {}
    for kind, _, _ in headers:
        kinds[kind] = kinds.get(kind, 0) + 1
    meta = table.schema.metadata or {}
    return {"file": os.path.basename(path), "ipc_bytes": len(ipc), "rows": table.num_rows,
            "value_sum": sum(table.column("value").to_pylist()) if "value" in table.column_names else None,
            "schema_version": text(meta.get(b"parca_write_schema_version")),
            "ipc_messages": kinds,
            "compression": sorted({c or "none" for k, c, _ in headers if k != "schema"}),
            "delta_dictionaries": sum(1 for _, _, delta in headers if delta)}


def samples_with_stacks(capture_dir):
    """Yields (description list, [(row, frames)]) for the v2 or v1 files in capture_dir."""
    described, samples = [], []
    for path in sorted(glob.glob(os.path.join(capture_dir, "writearrow-*.bin"))):
        ipc, table = read_table(path)
        described.append(describe(path, ipc, table))
        samples += [(row, row["stacktrace"] or []) for row in rows_of(table)]
    for first in sorted(glob.glob(os.path.join(capture_dir, "write-*-0.bin"))):
        second = first[:-len("0.bin")] + "1.bin"
        ipc, table = read_table(first)
        described.append(describe(first, ipc, table))
        stacks = {}
        if os.path.exists(second):
            ipc2, table2 = read_table(second)
            described.append(describe(second, ipc2, table2))
            stacks = {row["stacktrace_id"]: row["locations"] or [] for row in rows_of(table2)}
        samples += [(row, stacks.get(row["stacktrace_id"])) for row in rows_of(table)]
    return described, samples


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("capture_dir")
    parser.add_argument("--burner", required=True, help="the burner ELF that ran")
    parser.add_argument("--pid", required=True, type=int)
    parser.add_argument("--comm", default=None, help="default: the burner file's name")
    args = parser.parse_args()
    burner_file = os.path.basename(args.burner)
    comm = args.comm or burner_file[:15]
    symbols = symbol_table(args.burner)
    starts = [s[0] for s in symbols]
    described, samples = samples_with_stacks(args.capture_dir)
    per_leaf, per_function, per_stack, total, unresolved = {}, {}, {}, 0, 0
    for row, frames in samples:
        if label(row, "comm") != comm or label(row, "thread_id") != str(args.pid):
            continue
        if frames is None:
            unresolved += row["value"]
            continue
        names = frame_names(frames, burner_file, symbols, starts)
        total += row["value"]
        leaf = names[0] if names else "<empty>"
        per_leaf[leaf] = per_leaf.get(leaf, 0) + row["value"]
        # innermost frame in the burner itself (a sample taken in the kernel lists kernel frames
        # first, the burner's under them)
        own = next((n for f, n in zip(frames, names) if text(f["mapping_file"]) == burner_file),
                   "<none>")
        per_function[own] = per_function.get(own, 0) + row["value"]
        key = ";".join(names)
        per_stack[key] = per_stack.get(key, 0) + row["value"]
    a, b = per_function.get("burn_three_quarters", 0), per_function.get("burn_one_quarter", 0)
    json.dump({"messages": described,
               "burner": {"comm": comm, "pid": args.pid, "value_total": total,
                          "value_without_stacktrace": unresolved,
                          "per_leaf_frame": dict(sorted(per_leaf.items(), key=lambda kv: -kv[1])),
                          "per_innermost_burner_function":
                              dict(sorted(per_function.items(), key=lambda kv: -kv[1])),
                          "per_stack": dict(sorted(per_stack.items(), key=lambda kv: -kv[1])),
                          "ratio_three_to_one": round(a / b, 3) if b else None}},
              sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
