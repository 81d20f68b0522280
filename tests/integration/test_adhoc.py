"""adhocprofiles.v1.AdHocProfileService (issue 29) on real profiles.

Every pprof file of the shared testdata (MANIFEST.jsonl lists each sample
type's total, computed by Go's pprof library: the independent oracle) is
uploaded; the flame graph of each sample type, read back with Get, must have
that total as numTicks, and profileTypes must be the file's sample types in
order. Diff of two uploads gives each side's total as its ticks.

A JFR recording (testdata/jfr/dump1.jfr.gz) gives one sample type per event
kind, named "<metric>:<type>"; its cpu total must equal Pyroscope's own
converter's output beside it (dump1.jfr.gz.process_cpu*.pb.gz, read by `go
tool pprof -raw`) at the Java agent's 100 Hz. Folded text (Pyroscope's older
output of the same recording, dump1.json.gz) must total the sum of its
counts. Files that are none of these (JSON text, random bytes, a truncated
recording) are refused with invalid_argument and nothing is stored (List is
unchanged).
"""
import base64
import gzip
import json
import os
import random
import unittest

import harness as h

SERVICE = "adhocprofiles.v1.AdHocProfileService"


class AdHocProfilesTest(h.ServerTestCase):
    def rpc(self, method, body, check=True):
        """Connect JSON, read with json: no generated classes involved."""
        r = self.srv.request("POST", f"/{SERVICE}/{method}", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
        if check:
            self.assertEqual(r.status, 200, r.body[:300])
        r.json = json.loads(r.body)
        return r

    def upload(self, path, check=True):
        with open(path, "rb") as f:
            return self.upload_bytes(os.path.basename(path), f.read(), check)

    def upload_bytes(self, name, data, check=True):
        body = {"name": name, "profile": base64.b64encode(data).decode()}
        return self.rpc("Upload", body, check)

    def ticks(self, pid, profile_type):
        got = self.rpc("Get", {"id": pid, "profileType": profile_type}).json
        self.assertEqual(got["profileType"], profile_type)
        return json.loads(got["flamebearerProfile"])["flamebearer"]["numTicks"]

    def listed(self):
        return {p["id"] for p in self.rpc("List", {}).json.get("profiles", [])}

    def test_totals_per_sample_type_match_the_manifest(self):
        files = {k: v for k, v in h.manifest().items()
                 if k.startswith("pprof/") and v["sample_types"] and v["samples"] > 0}
        self.assertGreater(len(files), 3)
        for rel, entry in sorted(files.items())[:12]:  # under the per-tenant count bound
            with self.subTest(file=rel):
                up = self.upload(os.path.join(h.TESTDATA, rel)).json
                types = [st["type"] for st in entry["sample_types"]]
                self.assertEqual(up["profileTypes"], types)
                for st in entry["sample_types"]:
                    got = self.rpc("Get", {"id": up["id"], "profileType": st["type"]}).json
                    fb = json.loads(got["flamebearerProfile"])
                    self.assertEqual(got["profileType"], st["type"])
                    self.assertEqual(fb["flamebearer"]["numTicks"], st["total"], st["type"])

    def test_diff_of_two_uploads(self):
        """Diff of two uploads of one sample type: left and right ticks are
        each file's total of it (MANIFEST.jsonl), the graph is a diff (7
        numbers per node); a type the right lacks, or an unknown id, is
        refused."""
        man = h.manifest()
        cpu = sorted(k for k, v in man.items() if k.startswith("pprof/") and v["samples"] > 0
                     and [st["type"] for st in v["sample_types"]][:2] == ["samples", "cpu"])
        self.assertGreaterEqual(len(cpu), 2, "two cpu pprofs in the testdata")
        left, right = cpu[0], cpu[1]
        lid = self.upload(os.path.join(h.TESTDATA, left)).json["id"]
        rid = self.upload(os.path.join(h.TESTDATA, right)).json["id"]
        got = self.rpc("Diff", {"leftId": lid, "rightId": rid, "profileType": "cpu"}).json
        fb = json.loads(got["flamebearerProfile"])
        want = {k: next(st["total"] for st in man[k]["sample_types"] if st["type"] == "cpu")
                for k in (left, right)}
        self.assertEqual(fb["leftTicks"], want[left], fb.keys())
        self.assertEqual(fb["rightTicks"], want[right])
        self.assertEqual(fb["metadata"]["format"], "double")
        self.assertTrue(all(len(level) % 7 == 0 for level in fb["flamebearer"]["levels"]))
        self.assertEqual(got["profileTypes"], [st["type"] for st in man[left]["sample_types"]])
        r = self.rpc("Diff", {"leftId": lid, "rightId": rid, "profileType": "no-such-type"}, check=False)
        self.assertEqual((r.status, r.json["code"]), (400, "invalid_argument"))
        r = self.rpc("Diff", {"leftId": lid, "rightId": "nope"}, check=False)
        self.assertEqual((r.status, r.json["code"]), (404, "not_found"))

    def test_jfr_recording_totals_match_pyroscopes_converter(self):
        jfr_dir = os.path.join(h.TESTDATA, "jfr")
        cpu = [h.pprof_raw(os.path.join(jfr_dir, f))["totals"][("cpu", "nanoseconds")]
               for f in sorted(os.listdir(jfr_dir))
               if f.startswith("dump1.jfr.gz.process_cpu") and f.endswith(".pb.gz")]
        self.assertTrue(cpu, "Pyroscope's pprofs beside dump1")
        with open(os.path.join(jfr_dir, "dump1.jfr.gz"), "rb") as f:
            recording = f.read()
        for name, data in (("dump1.jfr.gz", recording), ("dump1.jfr", gzip.decompress(recording))):
            with self.subTest(file=name):
                up = self.upload_bytes(name, data).json
                self.assertIn("process_cpu:cpu", up["profileTypes"])
                # the file has no labels part: one profile holds every sample
                self.assertEqual(self.ticks(up["id"], "process_cpu:cpu"), max(cpu))
        other = self.upload(os.path.join(h.TESTDATA, "pprof", sorted(
            k for k in os.listdir(os.path.join(h.TESTDATA, "pprof")) if "cpu" in k)[0])).json
        r = self.rpc("Diff", {"leftId": up["id"], "rightId": other["id"]}, check=False)
        self.assertEqual((r.status, r.json.get("code")), (400, "invalid_argument"))
        self.assertIn("process_cpu:cpu", r.json.get("message", ""))

    def test_folded_text_totals_its_counts(self):
        older = json.load(gzip.open(os.path.join(h.TESTDATA, "jfr", "dump1.json.gz")))
        key, folded = max(older.items(), key=lambda kv: len(kv[1]))
        want = sum(int(line.rsplit(" ", 1)[1]) for line in folded.strip().splitlines())
        self.assertGreater(want, 0)
        for name, data in (("a.folded", folded.encode()), ("a.folded.gz", gzip.compress(folded.encode()))):
            with self.subTest(file=name):
                up = self.upload_bytes(name, data).json
                self.assertEqual(up["profileTypes"], ["samples"])
                self.assertEqual(self.ticks(up["id"], "samples"), want)
        left = self.upload_bytes("left.folded", b"main;a 3\nmain;b 1\n").json["id"]
        right = self.upload_bytes("right.folded", b"main;a 1\nmain;b 5\n").json["id"]
        fb = json.loads(self.rpc("Diff", {"leftId": left, "rightId": right}).json["flamebearerProfile"])
        self.assertEqual((fb["leftTicks"], fb["rightTicks"]), (4, 6))

    def test_not_a_profile_is_refused_and_nothing_stored(self):
        before = self.listed()
        with open(os.path.join(h.TESTDATA, "jfr", "dump1.jfr.gz"), "rb") as f:
            recording = gzip.decompress(f.read())
        with open(os.path.join(h.TESTDATA, "MANIFEST.jsonl"), "rb") as f:
            json_text = f.read()[:4096]
        bad = {"json text": json_text, "random bytes": random.Random(7).randbytes(4096),
               "truncated jfr": recording[:len(recording) // 3], "empty text": b"\n\n",
               "gzip of junk": gzip.compress(b"\x00\x01\x02 not a profile")}
        for name, data in bad.items():
            with self.subTest(input=name):
                r = self.upload_bytes(name, data, check=False)
                self.assertEqual(r.status, 400, r.body[:200])
                self.assertEqual(r.json["code"], "invalid_argument")
        r = self.rpc("Upload", {"name": "x", "profile": "not base64!"}, check=False)
        self.assertEqual((r.status, r.json["code"]), (400, "invalid_argument"))
        self.assertEqual(self.listed(), before)


if __name__ == "__main__":
    unittest.main()
