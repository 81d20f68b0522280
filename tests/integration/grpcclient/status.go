// status.v1.StatusService and capabilities.v1.FeatureFlagsService (issue 29),
// checked against what the test knows independently of ember's code: the
// flags ember was started with (-flags: name=value pairs the harness passed),
// which must appear in the effective configuration and in its diff from the
// defaults, and not in the defaults; every YAML document is parsed with a
// YAML library, not matched as text.
package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sort"
	"strings"

	"connectrpc.com/connect"
	capabilitiesv1 "github.com/grafana/pyroscope/api/gen/proto/go/capabilities/v1"
	statusv1 "github.com/grafana/pyroscope/api/gen/proto/go/status/v1"
	"go.yaml.in/yaml/v3"
	"google.golang.org/genproto/googleapis/api/httpbody"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// startFlags: the settings the harness started ember with, name -> value.
var startFlags = map[string]string{}

func parseStartFlags(s string) {
	for _, kv := range strings.Split(s, ",") {
		if name, value, ok := strings.Cut(kv, "="); ok {
			startFlags[name] = value
		}
	}
}

func (r *run) yamlOf(b *httpbody.HttpBody, what string) map[string]any {
	where := r.where + " StatusService/" + what
	out := map[string]any{}
	if !r.c.check(b != nil && strings.HasPrefix(b.ContentType, "text/plain"), where,
		"content type %q", b.GetContentType()) {
		return out
	}
	err := yaml.Unmarshal(b.Data, &out)
	r.c.check(err == nil, where, "not YAML: %v", err)
	return out
}

// get: the body of a plain HTTP GET of path (Pyroscope's gateway routes).
func (r *run) get(ctx context.Context, path string) []byte {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.base+path, nil)
	resp, err := r.http.Do(req)
	if !r.ok(err, "GET "+path) {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	r.c.check(err == nil && resp.StatusCode == 200, r.where+" GET "+path, "status %d, %v",
		resp.StatusCode, err)
	return body
}

func (r *run) buildInfo(ctx context.Context) {
	bi, err := r.status.GetBuildInfo(ctx, connect.NewRequest(&statusv1.GetBuildInfoRequest{}))
	if !r.ok(err, "StatusService/GetBuildInfo") {
		return
	}
	d := bi.Msg.Data
	r.c.check(bi.Msg.Status == "success" && d != nil && d.Version != "" && d.Revision != "",
		r.where+" StatusService/GetBuildInfo", "got %v", bi.Msg)
	var viaGet statusv1.GetBuildInfoResponse
	err = protojson.Unmarshal(r.get(ctx, "/api/v1/status/buildinfo"), &viaGet)
	r.c.check(err == nil && proto.Equal(&viaGet, bi.Msg), r.where+" GET /api/v1/status/buildinfo",
		"got %v (%v), want %v", &viaGet, err, bi.Msg)
}

func (r *run) configs(ctx context.Context) {
	req := &statusv1.GetConfigRequest{}
	full, err := r.status.GetConfig(ctx, connect.NewRequest(req))
	if !r.ok(err, "StatusService/GetConfig") {
		return
	}
	diff, err := r.status.GetDiffConfig(ctx, connect.NewRequest(req))
	if !r.ok(err, "StatusService/GetDiffConfig") {
		return
	}
	def, err := r.status.GetDefaultConfig(ctx, connect.NewRequest(req))
	if !r.ok(err, "StatusService/GetDefaultConfig") {
		return
	}
	for path, b := range map[string]*httpbody.HttpBody{"": full.Msg, "/diff": diff.Msg, "/default": def.Msg} {
		r.c.check(bytes.Equal(r.get(ctx, "/api/v1/status/config"+path), b.Data),
			r.where+" GET /api/v1/status/config"+path, "differs from the RPC's answer")
	}
	f, d, dd := r.yamlOf(full.Msg, "GetConfig"), r.yamlOf(diff.Msg, "GetDiffConfig"),
		r.yamlOf(def.Msg, "GetDefaultConfig")
	for name, want := range startFlags {
		r.c.check(f[name] == want && d[name] == want && dd[name] != want,
			r.where+" StatusService config "+name,
			"effective %v, diff %v, default %v; started with %q", f[name], d[name], dd[name], want)
	}
	// the diff holds exactly the effective values that differ from the defaults
	for name, v := range f {
		_, inDiff := d[name]
		r.c.check(inDiff == (dd[name] != v), r.where+" StatusService diff "+name,
			"effective %v, default %v, in diff %v", v, dd[name], inDiff)
	}
	r.c.check(len(f) == len(dd) && len(f) > len(startFlags), r.where+" StatusService configs",
		"%d effective keys, %d default keys", len(f), len(dd))
}

// Flags that ember serves must be on; the list is sorted by name as Pyroscope sends it.
func (r *run) featureFlags(ctx context.Context) {
	ff, err := r.capabilities.GetFeatureFlags(ctx, connect.NewRequest(&capabilitiesv1.GetFeatureFlagsRequest{}))
	if !r.ok(err, "FeatureFlagsService/GetFeatureFlags") {
		return
	}
	on, names := map[string]bool{}, []string{}
	for _, f := range ff.Msg.FeatureFlags {
		on[f.Name] = f.Enabled
		names = append(names, f.Name)
	}
	r.c.check(on["utf8LabelNames"] && on["v2StorageLayer"] && sort.StringsAreSorted(names),
		r.where+" FeatureFlagsService/GetFeatureFlags", "got %v", ff.Msg.FeatureFlags)
}

func (r *run) statusService(ctx context.Context) {
	r.buildInfo(ctx)
	r.configs(ctx)
	r.featureFlags(ctx)
}
