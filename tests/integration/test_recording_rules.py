"""settings.v1.RecordingRulesService (issue 29) over Connect JSON, against
ember's real settings store (LMDB under the data dir).

The oracle is what each test sent and Pyroscope's rules for recording rules
(pkg/settings/recording: an id is [a-zA-Z]+, generated as 10 letters when
absent; a new rule has generation 1; an update must carry the stored
generation and stores the next one; metric names start with
profiles_recorded_; exactly one __profile_type__ matcher, an equality; a
tenant has at most 25 rules; deleting a missing id is not_found). Bad input
must be refused with invalid_argument and leave the stored rules unchanged;
rules must survive a restart. The Go client with Pyroscope's own generated
types (grpcclient/rules.go) covers the three wire protocols."""
import json
import re
import threading
import unittest

import distributed_harness as dh
import harness as h

SVC = "/settings.v1.RecordingRulesService/"
CPU = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"


def rule(metric="profiles_recorded_cpu_total", **extra):
    body = {"metricName": metric,
            "matchers": [f'{{__profile_type__="{CPU}", service_name="checkout"}}'],
            "groupBy": ["region"],
            "externalLabels": [{"name": "team", "value": "payments"}]}
    body.update(extra)
    return body


class RecordingRulesTest(h.ServerTestCase):

    def rpc(self, method, body):
        r = self.srv.request("POST", SVC + method, json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
        return r.status, json.loads(r.body or b"{}")

    def ok(self, method, body):
        status, out = self.rpc(method, body)
        self.assertEqual(status, 200, f"{method}: {out}")
        return out

    def rules(self):
        return self.ok("ListRecordingRules", {}).get("rules", [])

    def tearDown(self):
        for r in self.rules():
            self.ok("DeleteRecordingRule", {"id": r["id"]})

    def test_create_get_list_delete(self):
        sent = rule(stacktraceFilter={"functionName": {"functionName": "runtime.gcBgMarkWorker"}})
        made = self.ok("UpsertRecordingRule", sent)["rule"]
        self.assertRegex(made["id"], r"^[a-zA-Z]{10}$")
        self.assertEqual(made["generation"], "1")
        self.assertEqual(made["profileType"], CPU)
        for field in ("metricName", "matchers", "groupBy", "externalLabels", "stacktraceFilter"):
            self.assertEqual(made[field], sent[field], field)
        self.assertNotIn("provisioned", made)  # false: omitted in proto3 JSON
        self.assertEqual(self.ok("GetRecordingRule", {"id": made["id"]})["rule"], made)
        self.assertEqual(self.ok("GetRecordingRule", {"id": f"  {made['id']} "})["rule"], made)
        self.assertEqual(self.rules(), [made])
        self.ok("DeleteRecordingRule", {"id": made["id"]})
        self.assertEqual(self.rules(), [])
        for method in ("GetRecordingRule", "DeleteRecordingRule"):
            status, out = self.rpc(method, {"id": made["id"]})
            self.assertEqual((status, out.get("code")), (404, "not_found"), method)

    def test_generation_guards_updates(self):
        made = self.ok("UpsertRecordingRule", rule())["rule"]
        stale = rule(metric="profiles_recorded_other", id=made["id"], generation="7")
        status, out = self.rpc("UpsertRecordingRule", stale)
        self.assertEqual((status, out.get("code")), (409, "already_exists"), out)
        self.assertEqual(self.rules(), [made])
        fresh = rule(metric="profiles_recorded_other", id=made["id"], generation="1",
                     groupBy=["region", "pod"])
        updated = self.ok("UpsertRecordingRule", fresh)["rule"]
        self.assertEqual((updated["id"], updated["generation"], updated["metricName"],
                          updated["groupBy"]),
                         (made["id"], "2", "profiles_recorded_other", ["region", "pod"]))
        self.assertEqual(self.rules(), [updated])

    def test_new_rule_with_own_id_starts_at_generation_one(self):
        made = self.ok("UpsertRecordingRule", rule(id="MyRule", generation="41"))["rule"]
        self.assertEqual((made["id"], made["generation"]), ("MyRule", "1"))

    def test_bad_rules_are_refused_and_change_nothing(self):
        kept = self.ok("UpsertRecordingRule", rule())["rule"]
        two_types = [f'{{__profile_type__="{CPU}"}}', '{__profile_type__="memory:x:y:z:w"}']
        bad = {
            "no metric name": rule(metric="  "),
            "metric name without the prefix": rule(metric="cpu_total"),
            "metric name syntax": rule(metric="profiles_recorded_cpu-total"),
            "no profile type matcher": rule(matchers=['{service_name="x"}']),
            "two profile type matchers": rule(matchers=two_types),
            "regex profile type": rule(matchers=['{__profile_type__=~"process_cpu.*"}']),
            "matcher syntax": rule(matchers=[f'{{__profile_type__="{CPU}", service_name=}}']),
            "group_by syntax": rule(groupBy=["k8s-pod"]),
            "group_by reserved": rule(groupBy=["__name__"]),
            "external label syntax": rule(externalLabels=[{"name": "a b", "value": "x"}]),
            "external label is the rule id": rule(
                externalLabels=[{"name": "profiles_rule_id", "value": "x"}]),
            "id syntax": rule(id="rule1"),
            "negative generation": rule(id=kept["id"], generation="-1"),
            "too many matchers": rule(matchers=[f'{{__profile_type__="{CPU}"}}'] * 17),
            "label value too long": rule(externalLabels=[{"name": "a", "value": "v" * 1025}]),
        }
        for what, body in bad.items():
            status, out = self.rpc("UpsertRecordingRule", body)
            self.assertEqual((status, out.get("code")), (400, "invalid_argument"),
                             f"{what}: {out}")
            self.assertTrue(out.get("message"), what)
        self.assertEqual(self.rules(), [kept])
        for method in ("GetRecordingRule", "DeleteRecordingRule"):
            status, out = self.rpc(method, {"id": " "})
            self.assertEqual((status, out.get("code")), (400, "invalid_argument"), method)

    def test_per_tenant_cap(self):
        made = [self.ok("UpsertRecordingRule", rule(metric=f"profiles_recorded_n{i}"))["rule"]
                for i in range(25)]
        status, out = self.rpc("UpsertRecordingRule", rule(metric="profiles_recorded_n25"))
        self.assertEqual((status, out.get("code")), (429, "resource_exhausted"), out)
        self.assertEqual(len(self.rules()), 25)
        # replacing an existing rule is not a new one
        again = self.ok("UpsertRecordingRule", rule(id=made[0]["id"], generation="1"))["rule"]
        self.assertEqual(again["generation"], "2")

    def test_rules_are_not_settings(self):
        self.ok("UpsertRecordingRule", rule())
        r = self.srv.request("POST", "/settings.v1.SettingsService/Get", b"{}",
                             {"Content-Type": "application/json"})
        self.assertEqual(r.status, 200)
        names = [s["name"] for s in json.loads(r.body).get("settings", [])]
        self.assertFalse([n for n in names if n.startswith("recording_rule")], names)
        for method, body in (("Set", {"setting": {"name": "recording_rule.v1/abc", "value": "{}"}}),
                             ("Delete", {"name": "recording_rule.v1/abc"})):
            r = self.srv.request("POST", "/settings.v1.SettingsService/" + method,
                                 json.dumps(body).encode(), {"Content-Type": "application/json"})
            self.assertEqual(r.status, 400, method)
        self.assertEqual(len(self.rules()), 1)


class RecordingRulesDurableTest(unittest.TestCase):
    def test_rules_survive_restart(self):
        srv = h.Ember().start()
        try:
            r = srv.request("POST", SVC + "UpsertRecordingRule", json.dumps(rule()).encode(),
                            {"Content-Type": "application/json"})
            self.assertEqual(r.status, 200, r.describe())
            made = json.loads(r.body)["rule"]
            srv.restart()
            r = srv.request("POST", SVC + "ListRecordingRules", b"{}",
                            {"Content-Type": "application/json"})
            self.assertEqual(r.status, 200, r.describe())
            self.assertEqual(json.loads(r.body)["rules"], [made])
            self.assertTrue(re.fullmatch(r"[a-zA-Z]{10}", made["id"]))
        finally:
            srv.cleanup()


class RecordingRulesSharedTest(dh.ClusterTestCase):
    """Two ember-querier processes sharing one Redis (the distributed mode):
    both see one rule, and two updates of one generation sent at once, one to
    each, must never both win — the generation check holds across processes
    (a conditional write in Redis), not only inside one."""

    @classmethod
    def set_up(cls):
        cls.redis = dh.Redis(aof=False).start()
        ing = dh.ingester(cls.redis.url)  # a querier is ready once it sees an ingester
        cls.procs.append(ing)
        ing.start()
        cls.queriers = []
        for _ in range(2):
            q = dh.querier(cls.redis.url)
            cls.procs.append(q)
            cls.queriers.append(q.start())

    def rpc(self, q, method, body):
        r = q.request("POST", SVC + method, json.dumps(body).encode(),
                      {"Content-Type": "application/json"})
        return r.status, json.loads(r.body or b"{}")

    def test_one_generation_one_winner_across_queriers(self):
        a, b = self.queriers
        status, out = self.rpc(a, "UpsertRecordingRule", rule(id="Shared"))
        self.assertEqual(status, 200, out)
        self.assertEqual(self.rpc(b, "GetRecordingRule", {"id": "Shared"})[1]["rule"], out["rule"])
        generation = 1
        for round_ in range(25):
            results = [None, None]

            def update(i, q):
                body = rule(metric=f"profiles_recorded_q{i}_{round_}", id="Shared",
                            generation=str(generation))
                results[i] = self.rpc(q, "UpsertRecordingRule", body)

            threads = [threading.Thread(target=update, args=(i, q)) for i, q in enumerate((a, b))]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            statuses = sorted(st for st, _ in results)
            self.assertIn(statuses, ([200, 409], [409, 409]), f"round {round_}: {results}")
            won = [out["rule"] for st, out in results if st == 200]
            stored = self.rpc(a, "GetRecordingRule", {"id": "Shared"})[1]["rule"]
            if won:
                generation += 1
                self.assertEqual(stored, won[0], f"round {round_}")
            self.assertEqual(stored["generation"], str(generation))


if __name__ == "__main__":
    unittest.main()
