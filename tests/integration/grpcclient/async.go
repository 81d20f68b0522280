// Async SelectMergeStacktraces (issue 29): a FORCE request is answered with
// a request id and status SUCCESS; polling that id returns the same answer
// (the run's pushed totals), an unknown id is NOT_FOUND.
package main

import (
	"context"

	"connectrpc.com/connect"
	querierv1 "github.com/grafana/pyroscope/api/gen/proto/go/querier/v1"
)

func (r *run) checkAsyncAnswer(m *querierv1.SelectMergeStacktracesResponse, id, what string) string {
	where := r.where + " async " + what
	a := m.GetAsync()
	r.c.check(a != nil && a.RequestId != "" && (id == "" || a.RequestId == id) &&
		a.Status == querierv1.AsyncQueryStatus_ASYNC_QUERY_STATUS_SUCCESS, where,
		"async %v, want SUCCESS (id %q)", a, id)
	fg := m.Flamegraph
	r.c.check(fg != nil && fg.Total == totalNs() && sameMap(flameSelf(fg), wantSelf()), where,
		"flame graph %v, want total %d", fg, totalNs())
	return a.GetRequestId()
}

func (r *run) async(ctx context.Context) {
	submit := r.mergeRequest()
	submit.Async = &querierv1.AsyncQueryRequest{Type: querierv1.AsyncQueryType_ASYNC_QUERY_TYPE_FORCE}
	s, err := r.querier.SelectMergeStacktraces(ctx, connect.NewRequest(submit))
	if !r.ok(err, "SelectMergeStacktraces async submit") {
		return
	}
	id := r.checkAsyncAnswer(s.Msg, "", "submit")
	if id == "" {
		return
	}
	poll := r.mergeRequest()
	poll.Async = &querierv1.AsyncQueryRequest{RequestId: id}
	p, err := r.querier.SelectMergeStacktraces(ctx, connect.NewRequest(poll))
	if r.ok(err, "SelectMergeStacktraces async poll") {
		r.checkAsyncAnswer(p.Msg, id, "poll")
	}
	poll.Async.RequestId = newUUID()
	_, err = r.querier.SelectMergeStacktraces(ctx, connect.NewRequest(poll))
	r.c.check(connect.CodeOf(err) == connect.CodeNotFound, r.where+" async unknown id",
		"want not_found, got %v", err)
}
