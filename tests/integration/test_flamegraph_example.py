"""The worked flame-graph example of pyroscope-api.md §5.4, end to end:
folded stacks a;b=3, a;c=2, d=1 uploaded to /ingest come back from
SelectMergeStacktraces with exactly the documented names/levels/total/max_self,
over application/proto and application/json (int64 as JSON strings)."""
import time
import unittest

import harness as h

FOLDED = b"a;b 3\na;c 2\nd 1\n"
NAMES = ["total", "d", "a", "c", "b"]
LEVELS = [[0, 6, 0, 0], [0, 5, 0, 2, 0, 1, 1, 1], [0, 3, 3, 4, 0, 2, 2, 3]]


class FlamegraphExampleTest(h.ServerTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.from_s = int(time.time()) - 60
        cls.window = (cls.from_s * 1000 - 5000, cls.from_s * 1000 + 5000)
        params = {"from": cls.from_s, "until": cls.from_s + 10, "spyName": "perf_script"}
        # §2.10: suffix .cpu -> process_cpu samples:count; sampleRate=0 -> no scaling, no period type
        cls.r_count = cls.srv.ingest("flame-example.cpu{env=test}", FOLDED, dict(params, sampleRate=0))
        # sampleRate=100 -> period 1e7 ns, values x 1e7, cpu:nanoseconds:cpu:nanoseconds
        cls.r_rate = cls.srv.ingest("flame-rate.cpu{env=test}", FOLDED, dict(params, sampleRate=100))

    def fg(self, ptype, service, codec):
        srv = self.srv
        want = f'{{service_name="{service}"}}'
        h.wait_for(lambda: srv.flamegraph(ptype, want, *self.window).total > 0, timeout=15,
                   what=f"{service} to become queryable as {ptype}")
        return srv.call(f"{h.QUERIER}/SelectMergeStacktraces",
                        h.pb().querier.SelectMergeStacktracesRequest(
                            profile_typeID=ptype, label_selector=want,
                            start=self.window[0], end=self.window[1]),
                        codec=codec)

    def test_folded_upload_accepted(self):
        self.assertStatus(self.r_count, 200, "folded upload, sampleRate=0")
        self.assertStatus(self.r_rate, 200, "folded upload, sampleRate=100")

    def test_profile_type_from_suffix(self):
        got = {v for ls in self.srv.series_labels(['{service_name=~"flame-(example|rate)"}'],
                                                  ["service_name", "__profile_type__"], *self.window)
               for k, v in ls if k == "__profile_type__"}
        self.assertEqual(got, {"process_cpu:samples:count::",
                               "process_cpu:cpu:nanoseconds:cpu:nanoseconds"})

    def test_example_proto(self):
        fg = self.fg("process_cpu:samples:count::", "flame-example", "proto").msg.flamegraph
        self.assertEqual(list(fg.names), NAMES)
        self.assertEqual([list(l.values) for l in fg.levels], LEVELS)
        self.assertEqual(fg.total, 6)
        self.assertEqual(fg.max_self, 3)

    def test_example_json(self):
        r = self.fg("process_cpu:samples:count::", "flame-example", "json")
        fg = r.json["flamegraph"]
        self.assertEqual(fg["names"], NAMES)
        self.assertEqual([l["values"] for l in fg["levels"]], [[str(v) for v in l] for l in LEVELS],
                         "levels (int64 must be JSON strings)")
        self.assertEqual(fg["total"], "6")
        self.assertEqual(fg["maxSelf"], "3")

    def test_example_scaled_by_sample_rate(self):
        fg = self.fg("process_cpu:cpu:nanoseconds:cpu:nanoseconds", "flame-rate", "proto").msg.flamegraph
        self.assertEqual(list(fg.names), NAMES)
        scaled = [[v * 10_000_000 if k % 4 in (0, 1, 2) else v for k, v in enumerate(l)] for l in LEVELS]
        self.assertEqual([list(l.values) for l in fg.levels], scaled)
        self.assertEqual(fg.total, 60_000_000)
        self.assertEqual(fg.max_self, 30_000_000)

    def test_empty_result(self):
        """§5.4: no data -> names ["total"], levels [[0,0,0,0]] (or no flamegraph)."""
        r = self.srv.call(f"{h.QUERIER}/SelectMergeStacktraces",
                          h.pb().querier.SelectMergeStacktracesRequest(
                              profile_typeID="process_cpu:samples:count::",
                              label_selector='{service_name="no-such-service"}',
                              start=self.window[0], end=self.window[1]))
        if r.msg.HasField("flamegraph"):
            fg = r.msg.flamegraph
            self.assertEqual(fg.total, 0)
            self.assertEqual(list(fg.names), ["total"])
            self.assertEqual([list(l.values) for l in fg.levels], [[0, 0, 0, 0]])


if __name__ == "__main__":
    unittest.main()
