"""lc/arrow.h, the Arrow IPC stream reader (issue 28), against pyarrow.

tests/tools/arrow_dump prints every value the reader decodes; arrow_gen.py
writes streams in the Parca Agent's shapes with random data through pyarrow
(pinned below, in a venv under ~/.cache/ember-sdk/arrow-python) and compares
each value with what pyarrow wrote. The real agent's captures
(tests/fixtures/parca-agent) are compared with pyarrow's reading of them and
with the row counts the agent itself logged. Malformed streams must be
refused with a message, never crash. Without PyPI the pyarrow tests skip."""
import glob
import json
import os
import random
import subprocess
import tempfile
import unittest

import harness as h
import sdk_util as su

PYARROW_VERSION = "26.0.1"
DUMP = os.path.join(h.BIN_DIR, "tests", "arrow_dump")
GEN = os.path.join(h.HERE, "arrow_gen.py")
FIXTURES = os.path.join(h.HERE, "..", "fixtures", "parca-agent")


def python_with_pyarrow():
    return su.python_with("arrow-python", "pyarrow", PYARROW_VERSION)


def dump(path, *args):
    return subprocess.run([DUMP, path, *args], capture_output=True, text=True, timeout=120)


class GeneratedStreams(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.py = python_with_pyarrow()

    def gen(self, *args):
        r = subprocess.run([self.py, GEN, *args], capture_output=True, text=True, timeout=600)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout

    def test_random_streams_decode_as_pyarrow_wrote_them(self):
        # v2 / v1 / misc shapes in turn, LZ4 and raw, deltas and replacements
        seed = random.randrange(1 << 30)
        out = self.gen("check", DUMP, str(seed), "240")
        print(f"seed {seed}: {out.strip()}")

    def test_agent_captures_decode_as_pyarrow_reads_them(self):
        files = sorted(glob.glob(os.path.join(FIXTURES, "v2", "*.bin")) +
                       glob.glob(os.path.join(FIXTURES, "v1", "*.bin")))
        self.assertGreater(len(files), 3)
        print(self.gen("capture", DUMP, *files))


class AgentCaptures(unittest.TestCase):
    """Independent of pyarrow: the rows the agent logged for each push."""

    def test_rows_match_what_the_agent_logged(self):
        with open(os.path.join(FIXTURES, "fixtures.json")) as f:
            meta = json.load(f)["v2"]
        for i, name in enumerate(meta["files"]):
            r = dump(os.path.join(FIXTURES, "v2", name), "--parca-request")
            self.assertEqual(r.returncode, 0, r.stderr)
            got = json.loads(r.stdout)
            self.assertEqual(got["metadata"], {"parca_write_schema_version": "v2"})
            (batch,) = got["batches"]
            self.assertEqual(len(batch["value"]), meta["agent_reported"]["rows_per_push"][i])
            self.assertEqual(sum(int(v) for v in batch["value"]), meta["pyarrow"]["messages"][i]["value_sum"])
            frames = [f for st in batch["stacktrace"] if st for f in st]
            self.assertTrue(any(f["mapping_file"] == b"burner".hex() for f in frames))


class MalformedStreams(unittest.TestCase):
    """Every cut and every flipped byte of a real push: refused with a message
    or decoded, never a crash (the fuzz target goes further)."""

    def test_truncated_and_corrupted_pushes_are_refused_cleanly(self):
        with open(sorted(glob.glob(os.path.join(FIXTURES, "v2", "*.bin")))[0], "rb") as f:
            req = f.read()
        n = req[1] & 0x7F | (req[2] & 0x7F) << 7 | (req[3] & 0x7F) << 14
        stream = req[4:4 + n] if req[3] < 0x80 else None
        self.assertIsNotNone(stream)
        rng = random.Random(28)
        cases = [stream[:k] for k in range(1, len(stream), max(1, len(stream) // 150))]
        for _ in range(150):
            b = bytearray(stream)
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
            cases.append(bytes(b))
        refused = 0
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "s.arrows")
            for c in cases:
                with open(path, "wb") as f:
                    f.write(c)
                r = dump(path)
                self.assertIn(r.returncode, (0, 1), r.stderr)
                if r.returncode == 1:
                    refused += 1
                    self.assertTrue(r.stderr.startswith("arrow_dump: arrow: "), r.stderr)
        # every cut before the end of the record batch must be refused
        self.assertGreater(refused, 140)


if __name__ == "__main__":
    unittest.main()
