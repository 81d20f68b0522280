// grpcclient calls ember with connect-go and Pyroscope's published API
// module (github.com/grafana/pyroscope/api), as a Go program that talks to
// Pyroscope would: each of the three protocols (Connect, gRPC, gRPC-Web) over
// HTTP/1.1 and over h2c (HTTP/2 without TLS).
//
// For every protocol and transport it pushes a CPU profile of its own
// (service_name grpcclient-<protocol>-<transport>) and then calls every
// querier.v1.QuerierService RPC, checking each answer against what it sent:
// the totals of the stacks, the labels, the span's share; then, with three
// profiles of known ids, values and times (exemplars.go), SelectSeries'
// exemplars (INDIVIDUAL and SPAN), SelectHeatmap and profile_id_selector;
// an async SelectMergeStacktraces submitted and polled (async.go); a
// recording rule created, read, replaced and deleted (rules.go); then
// status.v1.StatusService and capabilities.v1 (status.go) and
// adhocprofiles.v1 (adhoc.go).
// Parca's ShareService, a path ember has no route for, must fail with
// UNIMPLEMENTED. Each response's
// HTTP version is checked too, so a transport that quietly fell back to
// another is a failure.
//
// Usage: grpcclient -url http://127.0.0.1:PORT [-flags name=value,...]
// Prints one line per failed check; exit 0 when every check passed.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/grafana/pyroscope/api/gen/proto/go/adhocprofiles/v1/adhocprofilesv1connect"
	"github.com/grafana/pyroscope/api/gen/proto/go/capabilities/v1/capabilitiesv1connect"
	profilev1 "github.com/grafana/pyroscope/api/gen/proto/go/google/v1"
	pushv1 "github.com/grafana/pyroscope/api/gen/proto/go/push/v1"
	"github.com/grafana/pyroscope/api/gen/proto/go/push/v1/pushv1connect"
	querierv1 "github.com/grafana/pyroscope/api/gen/proto/go/querier/v1"
	"github.com/grafana/pyroscope/api/gen/proto/go/querier/v1/querierv1connect"
	"github.com/grafana/pyroscope/api/gen/proto/go/settings/v1/settingsv1connect"
	"github.com/grafana/pyroscope/api/gen/proto/go/status/v1/statusv1connect"
	typesv1 "github.com/grafana/pyroscope/api/gen/proto/go/types/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"
)

const (
	cpuType  = "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
	periodNs = 10_000_000
	spanID   = "9a3c5e7f0b1d2e4f"
)

// What one push sends: samples per stack (root first), and the stack
// carrying the span label.
var stacks = map[string]int64{
	"main;work;foo": 7,
	"main;work;bar": 5,
	"main;idle":     3,
}

const spanStack = "main;work;bar"

func totalNs() int64 {
	var n int64
	for _, c := range stacks {
		n += c * periodNs
	}
	return n
}

// ---------------------------------------------------------------- checks

type checker struct {
	mu     sync.Mutex
	failed []string
	passed int
}

func (c *checker) check(ok bool, where, format string, args ...any) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		c.passed++
		return true
	}
	c.failed = append(c.failed, where+": "+fmt.Sprintf(format, args...))
	return false
}

// ------------------------------------------------------------ transports

// protoRecorder remembers the HTTP version of every response it carries.
type protoRecorder struct {
	next  http.RoundTripper
	mu    sync.Mutex
	seen  map[string]int
	where string
}

func (r *protoRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		r.mu.Lock()
		r.seen[resp.Proto]++
		r.mu.Unlock()
	}
	return resp, err
}

func newTransport(h2c bool) *protoRecorder {
	t := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 4,
	}
	t.Protocols = new(http.Protocols)
	if h2c {
		t.Protocols.SetUnencryptedHTTP2(true)
	} else {
		t.Protocols.SetHTTP1(true)
	}
	return &protoRecorder{next: t, seen: map[string]int{}}
}

type protocol struct {
	name string
	opts []connect.ClientOption
}

var protocols = []protocol{
	{"connect", nil},
	{"grpc", []connect.ClientOption{connect.WithGRPC()}},
	{"grpcweb", []connect.ClientOption{connect.WithGRPCWeb()}},
}

// ------------------------------------------------------------- profiles

func cpuProfile(timeNs int64) []byte { return scaledProfile(timeNs, 1) }

// scaledProfile is cpuProfile with every sample's value multiplied by scale.
func scaledProfile(timeNs, scale int64) []byte {
	p := &profilev1.Profile{StringTable: []string{""}, Period: periodNs, TimeNanos: timeNs}
	str := func(s string) int64 {
		for i, t := range p.StringTable {
			if t == s {
				return int64(i)
			}
		}
		p.StringTable = append(p.StringTable, s)
		return int64(len(p.StringTable) - 1)
	}
	p.SampleType = []*profilev1.ValueType{{Type: str("samples"), Unit: str("count")},
		{Type: str("cpu"), Unit: str("nanoseconds")}}
	p.PeriodType = &profilev1.ValueType{Type: str("cpu"), Unit: str("nanoseconds")}
	p.Mapping = []*profilev1.Mapping{{Id: 1, HasFunctions: true}}
	ids := map[string]uint64{}
	keys := make([]string, 0, len(stacks))
	for k := range stacks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, stack := range keys {
		frames := strings.Split(stack, ";")
		locs := make([]uint64, len(frames))
		for i, f := range frames {
			if ids[f] == 0 {
				id := uint64(len(ids) + 1)
				ids[f] = id
				p.Function = append(p.Function, &profilev1.Function{Id: id, Name: str(f)})
				p.Location = append(p.Location, &profilev1.Location{Id: id, MappingId: 1,
					Line: []*profilev1.Line{{FunctionId: id}}})
			}
			locs[len(frames)-1-i] = ids[f] // leaf first
		}
		n := stacks[stack] * scale
		s := &profilev1.Sample{LocationId: locs, Value: []int64{n, n * periodNs}}
		if stack == spanStack {
			s.Label = []*profilev1.Label{{Key: str("span_id"), Str: str(spanID)}}
		}
		p.Sample = append(p.Sample, s)
	}
	b, err := proto.Marshal(p)
	if err != nil {
		panic(err)
	}
	return b
}

// flameTotals sums each function's self value in a flame graph (levels of
// [x offset, total, self, name index] quadruples).
func flameSelf(fg *querierv1.FlameGraph) map[string]int64 {
	out := map[string]int64{}
	if fg == nil {
		return out
	}
	for _, l := range fg.Levels {
		for i := 0; i+3 < len(l.Values); i += 4 {
			if self := l.Values[i+2]; self != 0 {
				out[fg.Names[l.Values[i+3]]] += self
			}
		}
	}
	return out
}

func wantSelf() map[string]int64 {
	out := map[string]int64{}
	for stack, c := range stacks {
		frames := strings.Split(stack, ";")
		out[frames[len(frames)-1]] += c * periodNs
	}
	return out
}

func pprofSelf(p *profilev1.Profile) map[string]int64 {
	out := map[string]int64{}
	if p == nil {
		return out
	}
	vi := -1
	for i, st := range p.SampleType {
		if p.StringTable[st.Type] == "cpu" {
			vi = i
		}
	}
	fn := map[uint64]string{}
	for _, f := range p.Function {
		fn[f.Id] = p.StringTable[f.Name]
	}
	loc := map[uint64]string{}
	for _, l := range p.Location {
		if len(l.Line) > 0 {
			loc[l.Id] = fn[l.Line[0].FunctionId]
		}
	}
	for _, s := range p.Sample {
		if vi >= 0 && len(s.LocationId) > 0 {
			out[loc[s.LocationId[0]]] += s.Value[vi]
		}
	}
	return out
}

func sameMap(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// ------------------------------------------------------------------ calls

type run struct {
	c            *checker
	where        string
	service      string
	start        int64 // ms
	end          int64
	push         pushv1connect.PusherServiceClient
	querier      querierv1connect.QuerierServiceClient
	rules        settingsv1connect.RecordingRulesServiceClient
	unknown      *connect.Client[emptypb.Empty, emptypb.Empty]
	base         string
	http         *http.Client
	status       statusv1connect.StatusServiceClient
	capabilities capabilitiesv1connect.FeatureFlagsServiceClient
	adhoc        adhocprofilesv1connect.AdHocProfileServiceClient
}

func (r *run) selector() string { return fmt.Sprintf(`{service_name=%q}`, r.service) }

func (r *run) ok(err error, rpc string) bool {
	r.c.check(err == nil, r.where+" "+rpc, "error: %v", err)
	return err == nil
}

func (r *run) pushProfile(ctx context.Context) {
	req := &pushv1.PushRequest{Series: []*pushv1.RawProfileSeries{{
		Labels: []*typesv1.LabelPair{{Name: "__name__", Value: "process_cpu"},
			{Name: "service_name", Value: r.service}, {Name: "transport_check", Value: r.where}},
		Samples: []*pushv1.RawSample{{RawProfile: cpuProfile((r.start + 60_000) * 1_000_000)}},
	}}}
	_, err := r.push.Push(ctx, connect.NewRequest(req))
	r.ok(err, "Push")
}

func (r *run) labels(ctx context.Context) {
	names, err := r.querier.LabelNames(ctx, connect.NewRequest(&typesv1.LabelNamesRequest{
		Matchers: []string{r.selector()}, Start: r.start, End: r.end}))
	if r.ok(err, "LabelNames") {
		got := strings.Join(names.Msg.Names, ",")
		r.c.check(strings.Contains(","+got+",", ",transport_check,") &&
			strings.Contains(","+got+",", ",service_name,"), r.where+" LabelNames", "got %s", got)
	}
	values, err := r.querier.LabelValues(ctx, connect.NewRequest(&typesv1.LabelValuesRequest{
		Name: "transport_check", Matchers: []string{r.selector()}, Start: r.start, End: r.end}))
	if r.ok(err, "LabelValues") {
		r.c.check(len(values.Msg.Names) == 1 && values.Msg.Names[0] == r.where,
			r.where+" LabelValues", "got %v", values.Msg.Names)
	}
	types, err := r.querier.ProfileTypes(ctx, connect.NewRequest(&querierv1.ProfileTypesRequest{
		Start: r.start, End: r.end}))
	if r.ok(err, "ProfileTypes") {
		found := false
		for _, t := range types.Msg.ProfileTypes {
			found = found || t.ID == cpuType
		}
		r.c.check(found, r.where+" ProfileTypes", "%s missing", cpuType)
	}
	series, err := r.querier.Series(ctx, connect.NewRequest(&querierv1.SeriesRequest{
		Matchers: []string{r.selector()}, Start: r.start, End: r.end}))
	if r.ok(err, "Series") {
		// one series per sample type of the profile sent: samples and cpu
		types := map[string]bool{}
		for _, s := range series.Msg.LabelsSet {
			has := map[string]string{}
			for _, l := range s.Labels {
				has[l.Name] = l.Value
			}
			if has["service_name"] == r.service && has["transport_check"] == r.where {
				types[has["__profile_type__"]] = true
			}
		}
		r.c.check(len(series.Msg.LabelsSet) == 2 && types[cpuType] &&
			types["process_cpu:samples:count:cpu:nanoseconds"], r.where+" Series", "got %v",
			series.Msg.LabelsSet)
	}
}

func (r *run) mergeRequest() *querierv1.SelectMergeStacktracesRequest {
	return &querierv1.SelectMergeStacktracesRequest{ProfileTypeID: cpuType,
		LabelSelector: r.selector(), Start: r.start, End: r.end}
}

func (r *run) merges(ctx context.Context) {
	want := wantSelf()
	st, err := r.querier.SelectMergeStacktraces(ctx, connect.NewRequest(r.mergeRequest()))
	if r.ok(err, "SelectMergeStacktraces") {
		fg := st.Msg.Flamegraph
		r.c.check(fg != nil && fg.Total == totalNs() && sameMap(flameSelf(fg), want),
			r.where+" SelectMergeStacktraces", "self %v, want %v", flameSelf(fg), want)
	}
	pp, err := r.querier.SelectMergeProfile(ctx, connect.NewRequest(&querierv1.SelectMergeProfileRequest{
		ProfileTypeID: cpuType, LabelSelector: r.selector(), Start: r.start, End: r.end}))
	if r.ok(err, "SelectMergeProfile") {
		r.c.check(sameMap(pprofSelf(pp.Msg), want), r.where+" SelectMergeProfile",
			"self %v, want %v", pprofSelf(pp.Msg), want)
	}
	span, err := r.querier.SelectMergeSpanProfile(ctx, connect.NewRequest(&querierv1.SelectMergeSpanProfileRequest{
		ProfileTypeID: cpuType, LabelSelector: r.selector(), SpanSelector: []string{spanID},
		Start: r.start, End: r.end}))
	if r.ok(err, "SelectMergeSpanProfile") {
		fg := span.Msg.Flamegraph
		wantSpan := stacks[spanStack] * periodNs
		r.c.check(fg != nil && fg.Total == wantSpan, r.where+" SelectMergeSpanProfile",
			"total %v, want %d", fg, wantSpan)
	}
	diff, err := r.querier.Diff(ctx, connect.NewRequest(&querierv1.DiffRequest{
		Left: r.mergeRequest(), Right: r.mergeRequest()}))
	if r.ok(err, "Diff") {
		fg := diff.Msg.Flamegraph
		// Pyroscope's diff total is left plus right
		r.c.check(fg != nil && fg.Total == 2*totalNs() && fg.LeftTicks == totalNs() &&
			fg.RightTicks == totalNs(), r.where+" Diff", "got total/left/right %v", fg)
	}
}

func (r *run) series(ctx context.Context) {
	ss, err := r.querier.SelectSeries(ctx, connect.NewRequest(&querierv1.SelectSeriesRequest{
		ProfileTypeID: cpuType, LabelSelector: r.selector(), Start: r.start, End: r.end,
		Step: 60}))
	if r.ok(err, "SelectSeries") {
		var sum float64
		for _, s := range ss.Msg.Series {
			for _, p := range s.Points {
				sum += p.Value
			}
		}
		r.c.check(sum == float64(totalNs()), r.where+" SelectSeries", "sum %v, want %d", sum,
			totalNs())
	}
	stats, err := r.querier.GetProfileStats(ctx, connect.NewRequest(&typesv1.GetProfileStatsRequest{}))
	if r.ok(err, "GetProfileStats") {
		r.c.check(stats.Msg.DataIngested, r.where+" GetProfileStats", "data_ingested false")
	}
	an, err := r.querier.AnalyzeQuery(ctx, connect.NewRequest(&querierv1.AnalyzeQueryRequest{
		Start: r.start, End: r.end, Query: cpuType + r.selector()}))
	if r.ok(err, "AnalyzeQuery") {
		r.c.check(an.Msg.QueryImpact != nil && an.Msg.QueryImpact.TotalQueriedSeries >= 1,
			r.where+" AnalyzeQuery", "impact %v", an.Msg.QueryImpact)
	}
}

func (r *run) unimplemented(ctx context.Context) {
	_, err := r.unknown.CallUnary(ctx, connect.NewRequest(&emptypb.Empty{}))
	var ce *connect.Error
	r.c.check(errors.As(err, &ce) && ce.Code() == connect.CodeUnimplemented,
		r.where+" parca ShareService/Upload", "want unimplemented, got %v", err)
}

func newRun(c *checker, base string, p protocol, h2c bool, start, end int64) (*run, *protoRecorder) {
	transport := "http1"
	if h2c {
		transport = "h2c"
	}
	rec := newTransport(h2c)
	client := &http.Client{Transport: rec, Timeout: 60 * time.Second}
	where := p.name + "-" + transport
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	r := &run{c: c, where: where, service: "grpcclient-" + where + "-" + hex.EncodeToString(suffix),
		start: start, end: end,
		push:    pushv1connect.NewPusherServiceClient(client, base, p.opts...),
		querier: querierv1connect.NewQuerierServiceClient(client, base, p.opts...),
		rules:   settingsv1connect.NewRecordingRulesServiceClient(client, base, p.opts...),
		unknown: connect.NewClient[emptypb.Empty, emptypb.Empty](client,
			base+"/parca.share.v1alpha1.ShareService/Upload", p.opts...),
		base:         base,
		http:         client,
		status:       statusv1connect.NewStatusServiceClient(client, base, p.opts...),
		capabilities: capabilitiesv1connect.NewFeatureFlagsServiceClient(client, base, p.opts...),
		adhoc:        adhocprofilesv1connect.NewAdHocProfileServiceClient(client, base, p.opts...),
	}
	rec.where = where
	return r, rec
}

func main() {
	base := flag.String("url", "", "ember's base URL, http://host:port")
	flags := flag.String("flags", "", "settings ember was started with: name=value,...")
	flag.Parse()
	parseStartFlags(*flags)
	if *base == "" {
		fmt.Fprintln(os.Stderr, "usage: grpcclient -url http://127.0.0.1:PORT")
		os.Exit(2)
	}
	c := &checker{}
	now := time.Now().UnixMilli()
	start, end := now-3600_000, now+3600_000
	for _, p := range protocols {
		for _, h2c := range []bool{false, true} {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			r, rec := newRun(c, *base, p, h2c, start, end)
			r.pushProfile(ctx)
			r.labels(ctx)
			r.merges(ctx)
			r.series(ctx)
			r.exemplars(ctx)
			r.async(ctx)
			r.recordingRules(ctx)
			r.unimplemented(ctx)
			r.statusService(ctx)
			r.adhocProfiles(ctx)
			if p.name == protocols[len(protocols)-1].name && h2c {
				r.adhocBounds(ctx) // last: it evicts the other runs' uploads
			}
			cancel()
			want := "HTTP/1.1"
			if h2c {
				want = "HTTP/2.0"
			}
			c.check(len(rec.seen) == 1 && rec.seen[want] > 0, r.where+" transport",
				"responses came as %v, want only %s", rec.seen, want)
		}
	}
	for _, f := range c.failed {
		fmt.Println("FAIL", f)
	}
	fmt.Printf("%d checks passed, %d failed\n", c.passed, len(c.failed))
	if len(c.failed) > 0 {
		os.Exit(1)
	}
}
