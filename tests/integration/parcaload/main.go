// parcaload drives ember's Parca API the way parca-load does (parca.md §5.1:
// the request matrix of its current version), through connect-go with
// connect.WithGRPCWeb(), the client and transport parca-load uses. It stands
// in for parca-load itself, which the Go module proxy does not serve (nor the
// buf.build generated client it depends on).
//
// Per round, 5 goroutines in parallel, each sequential inside:
// ProfileTypes per range; Labels per type x range; Values per label x type x
// range; QueryRange per type x range x selector (step = range/7680); Query
// merge FLAMEGRAPH_ARROW per type x range x selector (node_trim_threshold =
// 1/7680). With -pyroscope every request is followed by its counterpart on
// ember's Pyroscope API (Connect protocol): ProfileTypes, LabelNames,
// LabelValues, SelectSeries, SelectMergeStacktraces (twice: with the default
// max_nodes, and whole, api "pyroscope-whole"), so both paths are measured in
// the same run on the same data.
//
// Output: one JSON object on stdout: per API, RPC and range, the count of
// each status code (connect's names, "ok" on success) and latency
// percentiles in seconds.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	queryv1alpha1 "ember.local/parcaload/gen/parca/query/v1alpha1"
	"ember.local/parcaload/gen/parca/query/v1alpha1/queryv1alpha1connect"
	querierv1 "ember.local/parcaload/gen/querier/v1"
	"ember.local/parcaload/gen/querier/v1/querierv1connect"
	typesv1 "ember.local/parcaload/gen/types/v1"
)

type key struct{ api, rpc, rng string }

type stats struct {
	mu    sync.Mutex
	codes map[key]map[string]int
	lat   map[key][]float64
}

func (s *stats) record(api, rpc, rng string, start time.Time, err error) {
	code := "ok"
	if err != nil {
		code = connect.CodeOf(err).String()
		fmt.Fprintf(os.Stderr, "%s %s %s: %v\n", api, rpc, rng, err)
	}
	k := key{api, rpc, rng}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.codes[k] == nil {
		s.codes[k] = map[string]int{}
	}
	s.codes[k][code]++
	if err == nil {
		s.lat[k] = append(s.lat[k], time.Since(start).Seconds())
	}
}

func pct(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	c := append([]float64(nil), v...)
	sort.Float64s(c)
	i := int(p * float64(len(c)-1))
	return c[i]
}

type runner struct {
	parca    queryv1alpha1connect.QueryServiceClient
	pyro     querierv1connect.QuerierServiceClient
	withPyro bool
	ranges   []time.Duration
	labels   []string
	values   []string
	types    []string
	st       *stats
}

func rangeName(d time.Duration) string { return d.String() }

func (r *runner) profileTypes(ctx context.Context) {
	for _, d := range r.ranges {
		now := time.Now()
		t := time.Now()
		_, err := r.parca.ProfileTypes(ctx, connect.NewRequest(&queryv1alpha1.ProfileTypesRequest{
			Start: timestamppb.New(now.Add(-d)), End: timestamppb.New(now)}))
		r.st.record("parca", "profiletypes", rangeName(d), t, err)
		if r.withPyro {
			t = time.Now()
			_, err = r.pyro.ProfileTypes(ctx, connect.NewRequest(&querierv1.ProfileTypesRequest{
				Start: now.Add(-d).UnixMilli(), End: now.UnixMilli()}))
			r.st.record("pyroscope", "profiletypes", rangeName(d), t, err)
		}
	}
}

// typeID is the Pyroscope id of a Parca type string (no ":delta").
func typeID(t string) string { return strings.TrimSuffix(t, ":delta") }

func typeMatcher(t string) string { return fmt.Sprintf(`{__profile_type__="%s"}`, typeID(t)) }

func (r *runner) labelsRound(ctx context.Context) {
	for _, typ := range r.types {
		for _, d := range r.ranges {
			now := time.Now()
			t := time.Now()
			_, err := r.parca.Labels(ctx, connect.NewRequest(&queryv1alpha1.LabelsRequest{
				Start: timestamppb.New(now.Add(-d)), End: timestamppb.New(now), ProfileType: typ}))
			r.st.record("parca", "labels", rangeName(d), t, err)
			if r.withPyro {
				t = time.Now()
				_, err = r.pyro.LabelNames(ctx, connect.NewRequest(&typesv1.LabelNamesRequest{
					Matchers: []string{typeMatcher(typ)}, Start: now.Add(-d).UnixMilli(), End: now.UnixMilli()}))
				r.st.record("pyroscope", "labels", rangeName(d), t, err)
			}
		}
	}
}

func (r *runner) valuesRound(ctx context.Context) {
	for _, label := range r.values {
		for _, typ := range r.types {
			for _, d := range r.ranges {
				now := time.Now()
				t := time.Now()
				_, err := r.parca.Values(ctx, connect.NewRequest(&queryv1alpha1.ValuesRequest{
					LabelName: label, Start: timestamppb.New(now.Add(-d)), End: timestamppb.New(now), ProfileType: typ}))
				r.st.record("parca", "values", rangeName(d), t, err)
				if r.withPyro {
					t = time.Now()
					_, err = r.pyro.LabelValues(ctx, connect.NewRequest(&typesv1.LabelValuesRequest{
						Name: label, Matchers: []string{typeMatcher(typ)}, Start: now.Add(-d).UnixMilli(), End: now.UnixMilli()}))
					r.st.record("pyroscope", "values", rangeName(d), t, err)
				}
			}
		}
	}
}

func selectorOf(sel string) string {
	if sel == "all" {
		return ""
	}
	return sel
}

func (r *runner) queryRangeRound(ctx context.Context) {
	for _, typ := range r.types {
		for _, d := range r.ranges {
			for _, sel := range r.labels {
				now := time.Now()
				step := d / 7680
				t := time.Now()
				_, err := r.parca.QueryRange(ctx, connect.NewRequest(&queryv1alpha1.QueryRangeRequest{
					Query: typ + selectorOf(sel), Start: timestamppb.New(now.Add(-d)), End: timestamppb.New(now),
					Step: durationpb.New(step)}))
				r.st.record("parca", "queryrange", rangeName(d), t, err)
				if r.withPyro {
					s := selectorOf(sel)
					if s == "" {
						s = "{}"
					}
					t = time.Now()
					_, err = r.pyro.SelectSeries(ctx, connect.NewRequest(&querierv1.SelectSeriesRequest{
						ProfileTypeID: typeID(typ), LabelSelector: s, Start: now.Add(-d).UnixMilli(),
						End: now.UnixMilli(), Step: step.Seconds(),
						Aggregation: typesv1.TimeSeriesAggregationType_TIME_SERIES_AGGREGATION_TYPE_SUM}))
					r.st.record("pyroscope", "queryrange", rangeName(d), t, err)
				}
			}
		}
	}
}

func (r *runner) mergeRound(ctx context.Context) {
	for _, typ := range r.types {
		for _, d := range r.ranges {
			for _, sel := range r.labels {
				now := time.Now()
				t := time.Now()
				thr := float32(1.0 / 7680)
				_, err := r.parca.Query(ctx, connect.NewRequest(&queryv1alpha1.QueryRequest{
					Mode: queryv1alpha1.QueryRequest_MODE_MERGE,
					Options: &queryv1alpha1.QueryRequest_Merge{Merge: &queryv1alpha1.MergeProfile{
						Query: typ + selectorOf(sel), Start: timestamppb.New(now.Add(-d)), End: timestamppb.New(now)}},
					ReportType:        queryv1alpha1.QueryRequest_REPORT_TYPE_FLAMEGRAPH_ARROW,
					NodeTrimThreshold: thr}))
				r.st.record("parca", "query_merge", rangeName(d), t, err)
				if r.withPyro {
					s := selectorOf(sel)
					if s == "" {
						s = "{}"
					}
					t = time.Now()
					_, err = r.pyro.SelectMergeStacktraces(ctx, connect.NewRequest(&querierv1.SelectMergeStacktracesRequest{
						ProfileTypeID: typeID(typ), LabelSelector: s, Start: now.Add(-d).UnixMilli(), End: now.UnixMilli()}))
					r.st.record("pyroscope", "query_merge", rangeName(d), t, err)
					// The same merge without truncation: Parca's answer at
					// parca-load's threshold keeps (nearly) every node, so this is
					// the like-for-like reference (max_nodes at ember's maximum).
					t = time.Now()
					_, err = r.pyro.SelectMergeStacktraces(ctx, connect.NewRequest(&querierv1.SelectMergeStacktracesRequest{
						ProfileTypeID: typeID(typ), LabelSelector: s, Start: now.Add(-d).UnixMilli(), End: now.UnixMilli(),
						MaxNodes: 1 << 20}))
					r.st.record("pyroscope-whole", "query_merge", rangeName(d), t, err)
				}
			}
		}
	}
}

func splitList(s string) []string {
	var out []string
	for _, x := range strings.Split(s, ";") {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func main() {
	url := flag.String("url", "http://localhost:7070", "ember base URL (Parca API)")
	rounds := flag.Int("rounds", 3, "query rounds")
	interval := flag.Duration("query-interval", 0, "pause between rounds")
	rangesFlag := flag.String("query-range", "15m;12h;168h", "ranges, ';'-separated")
	labelsFlag := flag.String("labels", "all", "selectors, ';'-separated; all = none")
	valuesFlag := flag.String("values-for-labels", "", "label names for Values, ';'-separated")
	typesFlag := flag.String("types", "", "profile types; empty = discover over the longest range")
	timeout := flag.Duration("client-timeout", 10*time.Second, "per-request timeout")
	withPyro := flag.Bool("pyroscope", false, "also run each request's Pyroscope counterpart")
	flag.Parse()

	client := &http.Client{Timeout: *timeout}
	r := &runner{
		parca:    queryv1alpha1connect.NewQueryServiceClient(client, *url, connect.WithGRPCWeb()),
		pyro:     querierv1connect.NewQuerierServiceClient(client, *url),
		withPyro: *withPyro,
		labels:   splitList(*labelsFlag),
		values:   splitList(*valuesFlag),
		types:    splitList(*typesFlag),
		st:       &stats{codes: map[key]map[string]int{}, lat: map[key][]float64{}},
	}
	for _, s := range splitList(*rangesFlag) {
		d, err := time.ParseDuration(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bad range:", s)
			os.Exit(2)
		}
		r.ranges = append(r.ranges, d)
	}
	ctx := context.Background()
	if len(r.types) == 0 {
		longest := r.ranges[0]
		for _, d := range r.ranges {
			if d > longest {
				longest = d
			}
		}
		now := time.Now()
		resp, err := r.parca.ProfileTypes(ctx, connect.NewRequest(&queryv1alpha1.ProfileTypesRequest{
			Start: timestamppb.New(now.Add(-longest)), End: timestamppb.New(now)}))
		if err != nil || len(resp.Msg.Types) == 0 {
			fmt.Fprintln(os.Stderr, "profile type discovery failed:", err)
			os.Exit(1)
		}
		for _, t := range resp.Msg.Types {
			s := fmt.Sprintf("%s:%s:%s:%s:%s", t.Name, t.SampleType, t.SampleUnit, t.PeriodType, t.PeriodUnit)
			if t.Delta {
				s += ":delta"
			}
			r.types = append(r.types, s)
		}
	}
	started := time.Now()
	for i := 0; i < *rounds; i++ {
		var wg sync.WaitGroup
		for _, f := range []func(context.Context){r.profileTypes, r.labelsRound, r.valuesRound, r.queryRangeRound, r.mergeRound} {
			wg.Add(1)
			go func(f func(context.Context)) { defer wg.Done(); f(ctx) }(f)
		}
		wg.Wait()
		if *interval > 0 && i+1 < *rounds {
			time.Sleep(*interval)
		}
	}
	type row struct {
		API   string         `json:"api"`
		RPC   string         `json:"rpc"`
		Range string         `json:"range"`
		Codes map[string]int `json:"codes"`
		N     int            `json:"n"`
		P50   float64        `json:"p50"`
		P90   float64        `json:"p90"`
		Mean  float64        `json:"mean"`
	}
	var rows []row
	for k, codes := range r.st.codes {
		l := r.st.lat[k]
		mean := 0.0
		for _, v := range l {
			mean += v
		}
		if len(l) > 0 {
			mean /= float64(len(l))
		}
		rows = append(rows, row{k.api, k.rpc, k.rng, codes, len(l), pct(l, 0.5), pct(l, 0.9), mean})
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.RPC != b.RPC {
			return a.RPC < b.RPC
		}
		if a.Range != b.Range {
			return a.Range < b.Range
		}
		return a.API < b.API
	})
	json.NewEncoder(os.Stdout).Encode(map[string]any{
		"types": r.types, "rounds": *rounds, "seconds": time.Since(started).Seconds(), "rows": rows})
}
