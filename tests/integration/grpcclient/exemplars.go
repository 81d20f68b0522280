// Exemplars, heatmaps and profile-id selection (issue 29), checked against
// what this program pushes: three profiles with ids, values and times of its
// own choosing, under a service of their own. The expected buckets, the
// order of the exemplars and the span sums are computed here from those
// inputs, not read back from ember.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sort"

	"connectrpc.com/connect"
	pushv1 "github.com/grafana/pyroscope/api/gen/proto/go/push/v1"
	querierv1 "github.com/grafana/pyroscope/api/gen/proto/go/querier/v1"
	typesv1 "github.com/grafana/pyroscope/api/gen/proto/go/types/v1"
)

const stepS = 60

// One pushed profile: its id, pod label, time (ms after the run's start)
// and scale (its values are the base profile's times scale).
type sent struct {
	id    string
	pod   string
	after int64
	scale int64
}

func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// Two profiles in one bucket, one in the next (a 60 s step from start).
func exemplarInputs() []sent {
	return []sent{
		{newUUID(), "a", 150_000, 1},
		{newUUID(), "b", 170_000, 3},
		{newUUID(), "a", 250_000, 2},
	}
}

func (r *run) exSelector() string { return fmt.Sprintf(`{service_name=%q}`, r.service+"-x") }

// The boundary (ms) of the bucket a time falls in: start + k*step, the
// first at or after it.
func (r *run) boundary(ms int64) int64 {
	step := int64(stepS * 1000)
	k := (ms - r.start + step - 1) / step
	return r.start + k*step
}

func (r *run) pushExemplars(ctx context.Context, in []sent) bool {
	req := &pushv1.PushRequest{}
	for _, p := range in {
		req.Series = append(req.Series, &pushv1.RawProfileSeries{
			Labels: []*typesv1.LabelPair{{Name: "__name__", Value: "process_cpu"},
				{Name: "service_name", Value: r.service + "-x"}, {Name: "pod", Value: p.pod}},
			Samples: []*pushv1.RawSample{{ID: p.id,
				RawProfile: scaledProfile((r.start+p.after)*1_000_000, p.scale)}},
		})
	}
	_, err := r.push.Push(ctx, connect.NewRequest(req))
	return r.ok(err, "Push with ids")
}

// What each bucket's exemplars must be: its profiles by value, highest first.
func (r *run) wantIndividual(in []sent) map[int64][]sent {
	want := map[int64][]sent{}
	for _, p := range in {
		b := r.boundary(r.start + p.after)
		want[b] = append(want[b], p)
	}
	for _, v := range want {
		sort.Slice(v, func(i, j int) bool { return v[i].scale > v[j].scale })
	}
	return want
}

func labelOf(ls []*typesv1.LabelPair, name string) string {
	for _, l := range ls {
		if l.Name == name {
			return l.Value
		}
	}
	return ""
}

func (r *run) checkIndividual(s *querierv1.SelectSeriesResponse, in []sent) {
	where := r.where + " SelectSeries INDIVIDUAL"
	want := r.wantIndividual(in)
	if !r.c.check(len(s.Series) == 1, where, "want 1 series, got %d", len(s.Series)) {
		return
	}
	for _, pt := range s.Series[0].Points {
		w := want[pt.Timestamp]
		r.c.check(len(pt.Exemplars) == len(w), where, "point %d: %d exemplars, want %d",
			pt.Timestamp, len(pt.Exemplars), len(w))
		for i := 0; i < len(w) && i < len(pt.Exemplars); i++ {
			e := pt.Exemplars[i]
			r.c.check(e.ProfileId == w[i].id && e.Value == totalNs()*w[i].scale &&
				e.Timestamp == r.start+w[i].after && labelOf(e.Labels, "pod") == w[i].pod &&
				labelOf(e.Labels, "__name__") == "", where,
				"point %d exemplar %d: got %v, want id %s value %d time %d pod %s",
				pt.Timestamp, i, e, w[i].id, totalNs()*w[i].scale, r.start+w[i].after, w[i].pod)
		}
		delete(want, pt.Timestamp)
	}
	r.c.check(len(want) == 0, where, "buckets without a point: %v", want)
}

// SPAN: every profile carries spanID on spanStack, so a bucket has one span
// exemplar whose value is that stack's samples summed over its profiles.
func (r *run) checkSpan(s *querierv1.SelectSeriesResponse, in []sent) {
	where := r.where + " SelectSeries SPAN"
	want := map[int64]int64{}
	for _, p := range in {
		want[r.boundary(r.start+p.after)] += stacks[spanStack] * periodNs * p.scale
	}
	if !r.c.check(len(s.Series) == 1, where, "want 1 series, got %d", len(s.Series)) {
		return
	}
	for _, pt := range s.Series[0].Points {
		r.c.check(len(pt.Exemplars) == 1 && pt.Exemplars[0].SpanId == spanID &&
			pt.Exemplars[0].Value == want[pt.Timestamp], where, "point %d: got %v, want span %s value %d",
			pt.Timestamp, pt.Exemplars, spanID, want[pt.Timestamp])
		delete(want, pt.Timestamp)
	}
	r.c.check(len(want) == 0, where, "buckets without a point: %v", want)
}

func (r *run) seriesExemplars(ctx context.Context, in []sent, t typesv1.ExemplarType) *querierv1.SelectSeriesResponse {
	s, err := r.querier.SelectSeries(ctx, connect.NewRequest(&querierv1.SelectSeriesRequest{
		ProfileTypeID: cpuType, LabelSelector: r.exSelector(), Start: r.start, End: r.end,
		Step: stepS, ExemplarType: t}))
	if !r.ok(err, "SelectSeries "+t.String()) {
		return nil
	}
	return s.Msg
}

// The heatmap: one slot per bucket holding its profiles' count, each value
// in a row whose lower bound is at most the value.
func (r *run) checkHeatmap(ctx context.Context, in []sent) {
	where := r.where + " SelectHeatmap"
	h, err := r.querier.SelectHeatmap(ctx, connect.NewRequest(&querierv1.SelectHeatmapRequest{
		ProfileTypeID: cpuType, LabelSelector: r.exSelector(), Start: r.start, End: r.end,
		Step: stepS, QueryType: querierv1.HeatmapQueryType_HEATMAP_QUERY_TYPE_INDIVIDUAL,
		ExemplarType: typesv1.ExemplarType_EXEMPLAR_TYPE_INDIVIDUAL}))
	if !r.ok(err, "SelectHeatmap") || !r.c.check(len(h.Msg.Series) == 1, where,
		"want 1 series, got %d", len(h.Msg.Series)) {
		return
	}
	want := r.wantIndividual(in)
	for _, slot := range h.Msg.Series[0].Slots {
		w := want[slot.Timestamp]
		var n int32
		for _, c := range slot.Counts {
			n += c
		}
		r.c.check(int(n) == len(w) && len(slot.YMin) == len(slot.Counts), where,
			"slot %d: counts %v rows %v, want %d profiles", slot.Timestamp, slot.Counts, slot.YMin, len(w))
		low := w[len(w)-1].scale * totalNs() // the slot's lowest value
		r.c.check(len(slot.YMin) > 0 && slot.YMin[0] <= float64(low), where,
			"slot %d: lowest row %v above the lowest value %d", slot.Timestamp, slot.YMin, low)
		r.c.check(len(slot.Exemplars) > 0 && slot.Exemplars[0].ProfileId == w[0].id, where,
			"slot %d: top exemplar %v, want %s", slot.Timestamp, slot.Exemplars, w[0].id)
		delete(want, slot.Timestamp)
	}
	r.c.check(len(want) == 0, where, "buckets without a slot: %v", want)
}

// The SPAN heatmap: per bucket one span (spanID, in every profile), counted
// once, its value the span's samples summed over the bucket's profiles.
func (r *run) checkSpanHeatmap(ctx context.Context, in []sent) {
	where := r.where + " SelectHeatmap SPAN"
	h, err := r.querier.SelectHeatmap(ctx, connect.NewRequest(&querierv1.SelectHeatmapRequest{
		ProfileTypeID: cpuType, LabelSelector: r.exSelector(), Start: r.start, End: r.end,
		Step: stepS, QueryType: querierv1.HeatmapQueryType_HEATMAP_QUERY_TYPE_SPAN,
		ExemplarType: typesv1.ExemplarType_EXEMPLAR_TYPE_SPAN}))
	if !r.ok(err, "SelectHeatmap SPAN") || !r.c.check(len(h.Msg.Series) == 1, where,
		"want 1 series, got %d", len(h.Msg.Series)) {
		return
	}
	want := map[int64]int64{}
	for _, p := range in {
		want[r.boundary(r.start+p.after)] += stacks[spanStack] * periodNs * p.scale
	}
	for _, slot := range h.Msg.Series[0].Slots {
		r.c.check(len(slot.Counts) == 1 && slot.Counts[0] == 1 && len(slot.Exemplars) == 1 &&
			slot.Exemplars[0].SpanId == spanID && slot.Exemplars[0].Value == want[slot.Timestamp] &&
			slot.YMin[0] <= float64(want[slot.Timestamp]), where,
			"slot %d: counts %v rows %v exemplars %v, want one span %s of %d", slot.Timestamp,
			slot.Counts, slot.YMin, slot.Exemplars, spanID, want[slot.Timestamp])
		delete(want, slot.Timestamp)
	}
	r.c.check(len(want) == 0, where, "buckets without a slot: %v", want)
}

// profile_id_selector: the merge holds exactly the profiles named.
func (r *run) checkProfileIDs(ctx context.Context, in []sent) {
	st, err := r.querier.SelectMergeStacktraces(ctx, connect.NewRequest(&querierv1.SelectMergeStacktracesRequest{
		ProfileTypeID: cpuType, LabelSelector: r.exSelector(), Start: r.start, End: r.end,
		ProfileIdSelector: []string{in[1].id}}))
	if r.ok(err, "SelectMergeStacktraces by id") {
		fg := st.Msg.Flamegraph
		r.c.check(fg != nil && fg.Total == totalNs()*in[1].scale, r.where+" profile_id_selector",
			"total %v, want %d", fg, totalNs()*in[1].scale)
	}
	pp, err := r.querier.SelectMergeProfile(ctx, connect.NewRequest(&querierv1.SelectMergeProfileRequest{
		ProfileTypeID: cpuType, LabelSelector: r.exSelector(), Start: r.start, End: r.end,
		ProfileIdSelector: []string{in[0].id, in[2].id}}))
	if r.ok(err, "SelectMergeProfile by id") {
		want := map[string]int64{}
		for k, v := range wantSelf() {
			want[k] = v * (in[0].scale + in[2].scale)
		}
		r.c.check(sameMap(pprofSelf(pp.Msg), want), r.where+" SelectMergeProfile profile_id_selector",
			"self %v, want %v", pprofSelf(pp.Msg), want)
	}
}

// The run's first profile was pushed without an ID: ember assigns one, which
// its exemplar names and profile_id_selector then finds (the whole profile).
func (r *run) checkAssignedID(ctx context.Context) {
	where := r.where + " assigned profile id"
	s, err := r.querier.SelectSeries(ctx, connect.NewRequest(&querierv1.SelectSeriesRequest{
		ProfileTypeID: cpuType, LabelSelector: r.selector(), Start: r.start, End: r.end,
		Step: stepS, ExemplarType: typesv1.ExemplarType_EXEMPLAR_TYPE_INDIVIDUAL}))
	if !r.ok(err, "SelectSeries INDIVIDUAL (no ID pushed)") {
		return
	}
	var ids []string
	for _, se := range s.Msg.Series {
		for _, p := range se.Points {
			for _, e := range p.Exemplars {
				ids = append(ids, e.ProfileId)
			}
		}
	}
	if !r.c.check(len(ids) == 1 && len(ids[0]) == 36, where, "want one exemplar with a UUID, got %v", ids) {
		return
	}
	st, err := r.querier.SelectMergeStacktraces(ctx, connect.NewRequest(&querierv1.SelectMergeStacktracesRequest{
		ProfileTypeID: cpuType, LabelSelector: r.selector(), Start: r.start, End: r.end,
		ProfileIdSelector: ids}))
	if r.ok(err, "SelectMergeStacktraces by assigned id") {
		fg := st.Msg.Flamegraph
		r.c.check(fg != nil && fg.Total == totalNs(), where, "total %v, want %d", fg, totalNs())
	}
}

func (r *run) exemplars(ctx context.Context) {
	r.checkAssignedID(ctx)
	in := exemplarInputs()
	if !r.pushExemplars(ctx, in) {
		return
	}
	if s := r.seriesExemplars(ctx, in, typesv1.ExemplarType_EXEMPLAR_TYPE_INDIVIDUAL); s != nil {
		r.checkIndividual(s, in)
	}
	if s := r.seriesExemplars(ctx, in, typesv1.ExemplarType_EXEMPLAR_TYPE_SPAN); s != nil {
		r.checkSpan(s, in)
	}
	r.checkHeatmap(ctx, in)
	r.checkSpanHeatmap(ctx, in)
	r.checkProfileIDs(ctx, in)
}
