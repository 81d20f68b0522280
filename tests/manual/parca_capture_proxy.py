#!/usr/bin/env python3
"""Recording stand-in for a Parca server, for capturing the real Parca Agent's pushes (issue 28).

Serves parca.profilestore.v1alpha1.ProfileStoreService over h2c gRPC (grpcio) and writes every
request message, byte for byte, to OUT_DIR:

  WriteArrow (unary, the agent's default v2 path): answered with an empty WriteArrowResponse,
    status OK. Saved as writearrow-NNN.bin = the serialized WriteArrowRequest (field 1
    `bytes ipc_buffer`, an Arrow IPC stream).
  Write (bidirectional stream, `--remote-store-use-v2-schema=false`): the agent sends one
    WriteRequest whose `record` holds samples that reference stacktraces by `stacktrace_id`;
    a fresh Parca server knows no stacktrace yet, so like one this proxy answers with a
    WriteResponse whose `record` is an Arrow IPC stream of one binary column `stacktrace_id`
    listing every id in the request; the agent then sends a second WriteRequest with the full
    stacktraces (reporter/parca_reporter.go, arrowReporter write path). The proxy then ends
    the call with status OK: the agent drains the stream until EOF before it returns.
    Saved as write-NNN-0.bin, write-NNN-resp.bin, write-NNN-1.bin (serialized messages).

Each call also gets a line in OUT_DIR/calls.jsonl (method, files, sizes, invocation metadata
such as grpc-encoding and user-agent). No decoding happens in the WriteArrow path, so the
capture is what the agent sent; pyarrow (the independent oracle) is used only to read the ids
that the Write answer must list.

usage: parca_capture_proxy.py --listen 127.0.0.1:PORT --out OUT_DIR [--max-calls N]
  --max-calls: keep only the first N calls of each method (later ones are still answered OK),
  so a capture stays small. needs: pip install grpcio pyarrow.
"""
import argparse
import json
import os
import threading
from concurrent import futures

import grpc
import pyarrow as pa

SERVICE = "parca.profilestore.v1alpha1.ProfileStoreService"


def read_varint(buf, pos):
    """(value, next position); a varint is at most 10 bytes, so a longer one is an error."""
    value = 0
    for shift in range(0, 70, 7):
        value |= (buf[pos] & 0x7F) << shift
        pos += 1
        if buf[pos - 1] < 0x80:
            return value, pos
    raise ValueError("varint longer than 10 bytes at %d" % pos)


def bytes_field_1(message):
    """Returns field 1 (bytes) of a serialized WriteRequest/WriteArrowRequest, or b''."""
    pos, found = 0, b""
    while pos < len(message):
        key, pos = read_varint(message, pos)
        wire_type = key & 7
        if wire_type == 2:
            length, pos = read_varint(message, pos)
            if key >> 3 == 1:
                found = message[pos:pos + length]
            pos += length
        elif wire_type == 0:
            _, pos = read_varint(message, pos)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        else:
            raise ValueError("unsupported wire type %d" % wire_type)
    return found


def encode_bytes_field_1(payload):
    out, length = bytearray(b"\x0a"), len(payload)
    while length >= 0x80:
        out.append((length & 0x7F) | 0x80)
        length >>= 7
    out.append(length)
    return bytes(out) + payload


def requested_stacktraces(record_ipc):
    """The WriteResponse record a server that knows no stacktrace sends: every id, once."""
    table = pa.ipc.open_stream(record_ipc).read_all()
    column = table.column("stacktrace_id").combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    ids = pa.array(list(dict.fromkeys(column.to_pylist())), type=pa.binary())
    batch = pa.record_batch([ids], names=["stacktrace_id"])
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as writer:
        writer.write_batch(batch)
    return sink.getvalue().to_pybytes()


class Recorder:
    def __init__(self, out_dir, max_calls):
        self.out_dir, self.max_calls = out_dir, max_calls
        self.lock = threading.Lock()
        self.counts = {}
        os.makedirs(out_dir, exist_ok=True)

    def next_index(self, method):
        with self.lock:
            index = self.counts.get(method, 0)
            self.counts[method] = index + 1
            return index

    def save(self, name, data):
        with open(os.path.join(self.out_dir, name), "wb") as f:
            f.write(data)
        return {"file": name, "bytes": len(data)}

    def log(self, entry):
        with self.lock, open(os.path.join(self.out_dir, "calls.jsonl"), "a") as f:
            f.write(json.dumps(entry) + "\n")

    def write_arrow(self, request, context):
        index = self.next_index("WriteArrow")
        entry = {"method": "WriteArrow", "index": index,
                 "metadata": dict(context.invocation_metadata())}
        if index < self.max_calls:
            entry["request"] = self.save("writearrow-%03d.bin" % index, request)
        else:
            entry["request_bytes"] = len(request)
        self.log(entry)
        return b""  # empty WriteArrowResponse

    def write(self, request_iterator, context):
        index = self.next_index("Write")
        keep = index < self.max_calls
        entry = {"method": "Write", "index": index,
                 "metadata": dict(context.invocation_metadata()), "messages": []}
        try:
            first = next(request_iterator)
            entry["messages"].append(self.save("write-%03d-0.bin" % index, first)
                                     if keep else {"bytes": len(first)})
            response = encode_bytes_field_1(requested_stacktraces(bytes_field_1(first)))
            if keep:
                entry["response"] = self.save("write-%03d-resp.bin" % index, response)
            yield response
            second = next(request_iterator)
            entry["messages"].append(self.save("write-%03d-1.bin" % index, second)
                                     if keep else {"bytes": len(second)})
        except StopIteration:
            entry["ended_early"] = True
        finally:
            self.log(entry)


def identity(data):
    return data


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--listen", required=True, help="127.0.0.1:PORT")
    parser.add_argument("--out", required=True)
    parser.add_argument("--max-calls", type=int, default=1000)
    args = parser.parse_args()
    recorder = Recorder(args.out, args.max_calls)
    handlers = {
        "WriteArrow": grpc.unary_unary_rpc_method_handler(
            recorder.write_arrow, request_deserializer=identity, response_serializer=identity),
        "Write": grpc.stream_stream_rpc_method_handler(
            recorder.write, request_deserializer=identity, response_serializer=identity),
    }
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8),
                         options=[("grpc.max_receive_message_length", 64 << 20)])
    server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, handlers)])
    if server.add_insecure_port(args.listen) == 0:
        raise SystemExit("cannot listen on " + args.listen)
    server.start()
    print("listening on", args.listen, flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
