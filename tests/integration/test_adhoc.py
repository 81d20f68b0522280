"""adhocprofiles.v1.AdHocProfileService (issue 29) on real profiles.

Every pprof file of the shared testdata (MANIFEST.jsonl lists each sample
type's total, computed by Go's pprof library: the independent oracle) is
uploaded; the flame graph of each sample type, read back with Get, must have
that total as numTicks, and profileTypes must be the file's sample types in
order. Diff of two uploads gives each side's total as its ticks. Files that
are not pprof (a JFR recording, text) are refused with invalid_argument and
nothing is stored (List is unchanged).
"""
import base64
import json
import os
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
            body = {"name": os.path.basename(path), "profile": base64.b64encode(f.read()).decode()}
        return self.rpc("Upload", body, check)

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

    def test_not_pprof_is_refused_and_nothing_stored(self):
        before = self.listed()
        jfr_dir = os.path.join(h.TESTDATA, "jfr")
        jfr = os.path.join(jfr_dir, sorted(os.listdir(jfr_dir))[0])
        text = os.path.join(h.TESTDATA, "MANIFEST.jsonl")
        for path in (jfr, text):
            r = self.upload(path, check=False)
            self.assertEqual(r.status, 400, r.body[:200])
            self.assertEqual(r.json["code"], "invalid_argument")
        r = self.rpc("Upload", {"name": "x", "profile": "not base64!"}, check=False)
        self.assertEqual((r.status, r.json["code"]), (400, "invalid_argument"))
        self.assertEqual(self.listed(), before)


if __name__ == "__main__":
    unittest.main()
