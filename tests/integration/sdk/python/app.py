"""A program profiled by the official Python SDK (pyroscope-io) pushing to
ember: a CPU-bound function of known name under tag_wrapper. Driven by
tests/integration/test_sdk_python.py."""
import os
import time

import pyroscope


def ember_busy_py(n):
    h = 1469598103934665603
    for i in range(n):
        h = ((h ^ i) * 1099511628211) & 0xFFFFFFFFFFFFFFFF
    return h


def ember_alloc_py():
    return bytearray(256 * 1024)


keep = []


def main():
    pyroscope.configure(
        application_name=os.environ["SDK_APP"],
        server_address=os.environ["SDK_URL"],
        sample_rate=100,
        tags={"env": "sdk-test"},
        upload_interval=2,
        mem_enabled=True,
        mem_heap_sample_size=64 * 1024,
        oncpu=True,
        gil_only=True,
        enable_logging=True,
    )
    deadline = time.time() + float(os.environ.get("SDK_SECONDS", "6"))
    x = 0
    with pyroscope.tag_wrapper({"request": "busy"}):
        while time.time() < deadline:
            x ^= ember_busy_py(200_000)
            keep.append(ember_alloc_py())
    print(x)
    pyroscope.shutdown()


if __name__ == "__main__":
    main()
