// Recording rules (issue 29) through settings.v1.RecordingRulesService with
// Pyroscope's generated types: what `profilecli recording-rules
// create/list/get/delete` send. A rule is created without an id (the server
// makes one, generation 1), read back equal to what was sent, replaced with
// the stored generation (generation 2) and refused with a stale one
// (ALREADY_EXISTS), then deleted; after that Get is NOT_FOUND.
package main

import (
	"context"
	"regexp"
	"slices"

	"connectrpc.com/connect"
	settingsv1 "github.com/grafana/pyroscope/api/gen/proto/go/settings/v1"
	typesv1 "github.com/grafana/pyroscope/api/gen/proto/go/types/v1"
	"google.golang.org/protobuf/proto"
)

var ruleID = regexp.MustCompile(`^[a-zA-Z]{10}$`)

func (r *run) ruleRequest() *settingsv1.UpsertRecordingRuleRequest {
	return &settingsv1.UpsertRecordingRuleRequest{
		MetricName:     "profiles_recorded_grpcclient_gc_nanoseconds",
		Matchers:       []string{`{__profile_type__="` + cpuType + `"}`, r.selector()},
		GroupBy:        []string{"transport_check"},
		ExternalLabels: []*typesv1.LabelPair{{Name: "client", Value: r.where}},
		StacktraceFilter: &settingsv1.StacktraceFilter{FunctionName: &settingsv1.StacktraceFilterFunctionName{
			FunctionName: "work", MetricType: settingsv1.MetricType_TOTAL}},
	}
}

// sameRule compares a returned rule with the request that made it.
func sameRule(got *settingsv1.RecordingRule, sent *settingsv1.UpsertRecordingRuleRequest) bool {
	return got != nil && got.MetricName == sent.MetricName &&
		slices.Equal(got.Matchers, sent.Matchers) && slices.Equal(got.GroupBy, sent.GroupBy) &&
		len(got.ExternalLabels) == len(sent.ExternalLabels) &&
		proto.Equal(got.ExternalLabels[0], sent.ExternalLabels[0]) &&
		proto.Equal(got.StacktraceFilter, sent.StacktraceFilter) &&
		got.ProfileType == cpuType && !got.Provisioned
}

func (r *run) recordingRules(ctx context.Context) {
	where := r.where + " recording rules"
	sent := r.ruleRequest()
	made, err := r.rules.UpsertRecordingRule(ctx, connect.NewRequest(sent))
	if !r.ok(err, "UpsertRecordingRule") {
		return
	}
	rule := made.Msg.Rule
	r.c.check(sameRule(rule, sent) && ruleID.MatchString(rule.Id) && rule.Generation == 1, where+" create",
		"got %v", rule)
	got, err := r.rules.GetRecordingRule(ctx, connect.NewRequest(&settingsv1.GetRecordingRuleRequest{Id: rule.Id}))
	if r.ok(err, "GetRecordingRule") {
		r.c.check(proto.Equal(got.Msg.Rule, rule), where+" get", "got %v, want %v", got.Msg.Rule, rule)
	}
	list, err := r.rules.ListRecordingRules(ctx, connect.NewRequest(&settingsv1.ListRecordingRulesRequest{}))
	if r.ok(err, "ListRecordingRules") {
		found := slices.ContainsFunc(list.Msg.Rules, func(x *settingsv1.RecordingRule) bool { return proto.Equal(x, rule) })
		r.c.check(found, where+" list", "%s missing from %v", rule.Id, list.Msg.Rules)
	}
	r.ruleUpdates(ctx, rule.Id)
	_, err = r.rules.DeleteRecordingRule(ctx, connect.NewRequest(&settingsv1.DeleteRecordingRuleRequest{Id: rule.Id}))
	r.ok(err, "DeleteRecordingRule")
	_, err = r.rules.GetRecordingRule(ctx, connect.NewRequest(&settingsv1.GetRecordingRuleRequest{Id: rule.Id}))
	r.c.check(connect.CodeOf(err) == connect.CodeNotFound, where+" get deleted", "want not_found, got %v", err)
}

// ruleUpdates replaces rule id with generation 1 (the stored one), then
// tries generation 1 again, which is stale by then.
func (r *run) ruleUpdates(ctx context.Context, id string) {
	where := r.where + " recording rules update"
	upd := r.ruleRequest()
	upd.Id, upd.Generation, upd.GroupBy = id, 1, []string{"transport_check", "service_name"}
	done, err := r.rules.UpsertRecordingRule(ctx, connect.NewRequest(upd))
	if r.ok(err, "UpsertRecordingRule update") {
		r.c.check(sameRule(done.Msg.Rule, upd) && done.Msg.Rule.Id == id && done.Msg.Rule.Generation == 2,
			where, "got %v", done.Msg.Rule)
	}
	_, err = r.rules.UpsertRecordingRule(ctx, connect.NewRequest(upd))
	r.c.check(connect.CodeOf(err) == connect.CodeAlreadyExists, where+" stale", "want already_exists, got %v", err)
	bad := r.ruleRequest()
	bad.MetricName = "cpu_total" // without Pyroscope's profiles_recorded_ prefix
	_, err = r.rules.UpsertRecordingRule(ctx, connect.NewRequest(bad))
	r.c.check(connect.CodeOf(err) == connect.CodeInvalidArgument, where+" bad name", "want invalid_argument, got %v", err)
}
