"""Builds an OTLP ExportProfilesServiceRequest with the opentelemetry-proto
package from PyPI (not ember's protos) and posts it to an OTLP/HTTP receiver.
Prints, as JSON, what it sent: per profile type the total, and per stack
(root;...;leaf) the value, computed here.

usage: send_profiles.py URL SERVICE TIME_NS"""
import json
import sys
import urllib.request

from opentelemetry.proto.collector.profiles.v1development import profiles_service_pb2 as ps
from opentelemetry.proto.common.v1 import common_pb2 as common
from opentelemetry.proto.profiles.v1development import profiles_pb2 as pp

url, service, t0 = sys.argv[1], sys.argv[2], int(sys.argv[3])
PERIOD = 10_000_000
CPU_STACKS = {"main;work;spin": 7, "main;work;hash": 3, "main;idle": 1}       # timestamps per stack
OFF_STACKS = {"main;io;read": [1500, 2500], "main;lock": [400]}              # off-CPU ns values

req = ps.ExportProfilesServiceRequest()
d = req.dictionary
strings = [""]


def s(text):
    if text not in strings:
        strings.append(text)
    return strings.index(text)


d.mapping_table.add()                       # index 0: the empty mapping
d.mapping_table.add(filename_strindex=s("/usr/bin/busy"), memory_start=0x400000, memory_limit=0x500000)
d.function_table.add()
d.location_table.add()
d.stack_table.add()
d.link_table.add()
d.attribute_table.add()
d.attribute_table.add(key_strindex=s("thread.name"), value=common.AnyValue(string_value="busy-worker"))
fn_ids, loc_ids = {}, {}


def stack(path):
    idx = []
    for frame in reversed(path.split(";")):      # OTLP stacks are leaf first
        if frame not in loc_ids:
            fn_ids[frame] = len(d.function_table)
            d.function_table.add(name_strindex=s(frame), filename_strindex=s("busy.c"))
            loc_ids[frame] = len(d.location_table)
            loc = d.location_table.add(mapping_index=1, address=0x401000 + 16 * len(loc_ids))
            loc.lines.add(function_index=fn_ids[frame], line=10)
        idx.append(loc_ids[frame])
    d.stack_table.add(location_indices=idx)
    return len(d.stack_table) - 1


rp = req.resource_profiles.add()
rp.resource.attributes.add(key="service.name", value=common.AnyValue(string_value=service))
rp.resource.attributes.add(key="process.executable.name", value=common.AnyValue(string_value="busy"))
rp.resource.attributes.add(key="host.name", value=common.AnyValue(string_value="h2-test-host"))
sp = rp.scope_profiles.add()
sp.scope.name = "ember-test"

cpu = sp.profiles.add(time_unix_nano=t0, duration_nano=10_000_000_000, period=PERIOD)
cpu.sample_type.type_strindex, cpu.sample_type.unit_strindex = s("samples"), s("count")
cpu.period_type.type_strindex, cpu.period_type.unit_strindex = s("cpu"), s("nanoseconds")
for path, n in CPU_STACKS.items():
    cpu.samples.add(stack_index=stack(path), attribute_indices=[1],
                    timestamps_unix_nano=[t0 + i * PERIOD for i in range(n)])

off = sp.profiles.add(time_unix_nano=t0, duration_nano=10_000_000_000)
off.sample_type.type_strindex, off.sample_type.unit_strindex = s("off_cpu"), s("nanoseconds")
for path, vals in OFF_STACKS.items():
    off.samples.add(stack_index=stack(path), values=vals, timestamps_unix_nano=[t0 + i for i in range(len(vals))])

d.string_table.extend(strings)
body = req.SerializeToString()
r = urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST",
                                                  headers={"Content-Type": "application/x-protobuf"}), timeout=30)
assert r.status == 200, r.status
print(json.dumps({
    "cpu_total": sum(CPU_STACKS.values()) * PERIOD,
    "off_cpu_total": sum(sum(v) for v in OFF_STACKS.values()),
    "cpu_stacks": {k: v * PERIOD for k, v in CPU_STACKS.items()},
    "off_cpu_stacks": {k: sum(v) for k, v in OFF_STACKS.items()},
}))
