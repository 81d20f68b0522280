// adhocprofiles.v1.AdHocProfileService (issue 29): the run uploads its own
// CPU profile (base64, as the proto says) and reads the flame graph back as
// Pyroscope returns it, flamebearer JSON, decoded here with encoding/json:
// each function's self value must be what the profile holds, for each of
// its sample types; List must name the upload; unknown ids, bad base64 and
// files that are not profiles are refused. adhocBounds (once, at the end)
// uploads one more than the per-tenant count bound and checks the oldest is
// evicted and the rest kept.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"

	"connectrpc.com/connect"
	adhocv1 "github.com/grafana/pyroscope/api/gen/proto/go/adhocprofiles/v1"
	querierv1 "github.com/grafana/pyroscope/api/gen/proto/go/querier/v1"
)

const adhocMaxPerTenant = 64 // ember's bound (services/querier/src/adhoc.h)

// The parts of a flamebearer document the checks read.
type flamebearerDoc struct {
	Flamebearer struct {
		Names    []string  `json:"names"`
		Levels   [][]int64 `json:"levels"`
		NumTicks int64     `json:"numTicks"`
	} `json:"flamebearer"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

// fbSelf: each function's self value in a flamebearer JSON document.
func fbSelf(doc string) (map[string]int64, int64, error) {
	var d flamebearerDoc
	if err := json.Unmarshal([]byte(doc), &d); err != nil {
		return nil, 0, err
	}
	fg := &querierv1.FlameGraph{Names: d.Flamebearer.Names}
	for _, l := range d.Flamebearer.Levels {
		fg.Levels = append(fg.Levels, &querierv1.Level{Values: l})
	}
	return flameSelf(fg), d.Flamebearer.NumTicks, nil
}

// wantSamplesSelf: wantSelf for the "samples" sample type (counts, not ns).
func wantSamplesSelf() map[string]int64 {
	out := map[string]int64{}
	for k, v := range wantSelf() {
		out[k] = v / periodNs
	}
	return out
}

func (r *run) checkView(m *adhocv1.AdHocProfilesGetResponse, typ string, want map[string]int64, what string) {
	where := r.where + " AdHocProfileService/" + what
	self, ticks, err := fbSelf(m.FlamebearerProfile)
	var total int64
	for _, v := range want {
		total += v
	}
	r.c.check(err == nil && m.ProfileType == typ && sameMap(self, want) && ticks == total, where,
		"type %q, self %v, ticks %d (%v); want %q, %v", m.ProfileType, self, ticks, err, typ, want)
	r.c.check(len(m.ProfileTypes) == 2 && m.ProfileTypes[0] == "samples" && m.ProfileTypes[1] == "cpu",
		where, "profile types %v", m.ProfileTypes)
}

func (r *run) adhocUpload(ctx context.Context, name string) *adhocv1.AdHocProfilesGetResponse {
	up, err := r.adhoc.Upload(ctx, connect.NewRequest(&adhocv1.AdHocProfilesUploadRequest{
		Name: name, Profile: base64.StdEncoding.EncodeToString(cpuProfile(r.start * 1_000_000))}))
	if !r.ok(err, "AdHocProfileService/Upload") {
		return nil
	}
	return up.Msg
}

func (r *run) adhocList(ctx context.Context) map[string]string {
	l, err := r.adhoc.List(ctx, connect.NewRequest(&adhocv1.AdHocProfilesListRequest{}))
	names := map[string]string{}
	if r.ok(err, "AdHocProfileService/List") {
		for _, p := range l.Msg.Profiles {
			names[p.Id] = p.Name
		}
	}
	return names
}

func (r *run) adhocRefused(ctx context.Context, profile string, want connect.Code, what string) {
	_, err := r.adhoc.Upload(ctx, connect.NewRequest(&adhocv1.AdHocProfilesUploadRequest{
		Name: "bad", Profile: profile}))
	r.c.check(connect.CodeOf(err) == want, r.where+" AdHocProfileService/Upload "+what,
		"want %v, got %v", want, err)
}

func (r *run) adhocProfiles(ctx context.Context) {
	up := r.adhocUpload(ctx, r.service+" cpu.pprof")
	if up == nil {
		return
	}
	// Pyroscope keeps [A-Za-z0-9._-] of a name: the space becomes '_'
	r.c.check(up.Id != "" && up.Name == r.service+"_cpu.pprof" && up.UploadedAt > 0,
		r.where+" AdHocProfileService/Upload", "id %q name %q at %d", up.Id, up.Name, up.UploadedAt)
	r.checkView(up, "samples", wantSamplesSelf(), "Upload") // the first sample type
	get, err := r.adhoc.Get(ctx, connect.NewRequest(&adhocv1.AdHocProfilesGetRequest{
		Id: up.Id, ProfileType: protoString("cpu")}))
	if r.ok(err, "AdHocProfileService/Get") {
		r.checkView(get.Msg, "cpu", wantSelf(), "Get cpu")
		r.c.check(get.Msg.Id == up.Id && get.Msg.Name == up.Name && get.Msg.UploadedAt == up.UploadedAt,
			r.where+" AdHocProfileService/Get", "got %q %q %d", get.Msg.Id, get.Msg.Name, get.Msg.UploadedAt)
	}
	r.c.check(r.adhocList(ctx)[up.Id] == up.Name, r.where+" AdHocProfileService/List",
		"upload %s missing", up.Id)
	_, err = r.adhoc.Get(ctx, connect.NewRequest(&adhocv1.AdHocProfilesGetRequest{Id: "no-such-id"}))
	r.c.check(connect.CodeOf(err) == connect.CodeNotFound, r.where+" AdHocProfileService/Get unknown",
		"want not_found, got %v", err)
	r.adhocRefused(ctx, "not base64!", connect.CodeInvalidArgument, "bad base64")
	r.adhocRefused(ctx, base64.StdEncoding.EncodeToString([]byte("hello, not a profile")),
		connect.CodeInvalidArgument, "not a profile")
}

// adhocBounds: one more upload than the bound evicts exactly the oldest.
func (r *run) adhocBounds(ctx context.Context) {
	var ids []string
	for i := 0; i <= adhocMaxPerTenant; i++ {
		up := r.adhocUpload(ctx, "bound")
		if up == nil {
			return
		}
		ids = append(ids, up.Id)
	}
	listed := r.adhocList(ctx)
	kept := 0
	for _, id := range ids[1:] {
		if _, ok := listed[id]; ok {
			kept++
		}
	}
	_, oldest := listed[ids[0]]
	r.c.check(len(listed) == adhocMaxPerTenant && kept == adhocMaxPerTenant && !oldest,
		r.where+" AdHocProfileService bound", "listed %d, kept %d of the newest, oldest listed %v",
		len(listed), kept, oldest)
}

func protoString(s string) *string { return &s }
