/*
 * adhoc.c — adhocprofiles.v1.AdHocProfileService (adhoc.h): the bounded
 * per-tenant store of uploaded files, and their flame graphs as the
 * flamebearer JSON Pyroscope's Upload and Get return (one sample type at a
 * time; profile_types lists the file's sample types by name, as Pyroscope's
 * Metadata.Name does for pprof). adhoc_file.c reads the formats (pprof, JFR,
 * folded).
 */
#include <stdio.h>
#include <string.h>

#include <uv.h>

#include "adhoc.h"
#include "adhoc_file.h"
#include "adhocprofiles/v1/adhocprofiles.pb-c.h"
#include "lc/base64.h"
#include "lc/clock.h"
#include "lc/log.h"
#include "lc/pprof.h"
#include "lc/query.h"
#include "lc/tenant.h"
#include "lc/transport.h"
#include "lc/uuid.h"
#include "querier_int.h"

#define ADHOC_MAX_FRAMES 4096 /* deeper stacks keep their root side, as lc_pprof_validate */
#define ADHOC_METHODS 4

typedef struct adhoc_entry_s {
    char *tenant;
    char id[LC_UUID_TEXT_LEN + 1]; /* random, as async query ids */
    char *name;
    int64_t uploaded_ms;
    uint8_t *data; /* the decoded file */
    size_t len;
} adhoc_entry_t;

struct qry_adhoc_s {
    bool multitenancy;
    uv_mutex_t mu;
    adhoc_entry_t *entries; /* upload order, oldest first */
    size_t n, cap;
    size_t total_bytes;
    qry_route_t routes[ADHOC_METHODS];
};

/* ------------------------------------------------------------ the store */

qry_adhoc_t *qry_adhoc_new(bool multitenancy)
{
    qry_adhoc_t *a = lc_xcalloc(1, sizeof(*a));
    a->multitenancy = multitenancy;
    LC_ASSERT(uv_mutex_init(&a->mu) == 0);
    return a;
}

static void adhoc_entry_free(adhoc_entry_t *e)
{
    lc_free(e->tenant);
    lc_free(e->name);
    lc_free(e->data);
}

void qry_adhoc_free(qry_adhoc_t *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++)
        adhoc_entry_free(&a->entries[i]);
    lc_free(a->entries);
    uv_mutex_destroy(&a->mu);
    lc_free(a);
}

static void remove_at(qry_adhoc_t *a, size_t i)
{
    a->total_bytes -= a->entries[i].len;
    adhoc_entry_free(&a->entries[i]);
    memmove(&a->entries[i], &a->entries[i + 1], (a->n - i - 1) * sizeof(*a->entries));
    a->n--;
}

/* The tenant's count and bytes; its oldest entry's index in *oldest (n if none). */
static void tenant_usage(const qry_adhoc_t *a, const char *tenant, size_t *count, size_t *bytes,
                         size_t *oldest)
{
    *count = *bytes = 0;
    *oldest = a->n;
    for (size_t i = 0; i < a->n; i++) {
        if (strcmp(a->entries[i].tenant, tenant) != 0)
            continue;
        if (*oldest == a->n)
            *oldest = i;
        (*count)++;
        *bytes += a->entries[i].len;
    }
}

/* Makes room for len more bytes of tenant's: its oldest go first, then
 * anyone's oldest for the process bound. Called with the mutex held. */
static void adhoc_make_room(qry_adhoc_t *a, const char *tenant, size_t len)
{
    for (;;) {
        size_t count, bytes, oldest;
        tenant_usage(a, tenant, &count, &bytes, &oldest);
        if (count < ADHOC_MAX_PROFILES && bytes + len <= ADHOC_MAX_BYTES)
            break;
        remove_at(a, oldest);
    }
    while (a->n && a->total_bytes + len > ADHOC_MAX_TOTAL_BYTES)
        remove_at(a, 0);
}

static void store_add(qry_adhoc_t *a, const adhoc_entry_t *e)
{
    uv_mutex_lock(&a->mu);
    adhoc_make_room(a, e->tenant, e->len);
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 16;
        a->entries = lc_xrealloc(a->entries, a->cap * sizeof(*a->entries));
    }
    a->entries[a->n++] = *e;
    a->total_bytes += e->len;
    uv_mutex_unlock(&a->mu);
}

/* A copy of tenant's entry id (metadata and data in the arena), or false. */
static bool store_get(qry_adhoc_t *a, const char *tenant, const char *id, lc_arena_t *arena,
                      adhoc_entry_t *out)
{
    bool found = false;
    uv_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->n && !found; i++) {
        const adhoc_entry_t *e = &a->entries[i];
        if (strcmp(e->tenant, tenant) != 0 || strcmp(e->id, id) != 0)
            continue;
        *out = *e;
        out->tenant = NULL;
        out->name = lc_arena_strdup(arena, e->name);
        out->data = lc_arena_alloc(arena, e->len ? e->len : 1);
        found = out->name && out->data;
        if (found)
            memcpy(out->data, e->data, e->len);
    }
    uv_mutex_unlock(&a->mu);
    return found;
}

/* ------------------------------------------------------ the flame graph */

/* The root-first function names of one sample (pprof lists locations leaf
 * first, and a location's inlined lines innermost first). */
static size_t stack_names(const lc_pprof_t *p, const lc_pprof_index_t *ix,
                          const Google__V1__Sample *s, const char **frames)
{
    size_t n = 0;
    for (size_t i = s->n_location_id; i-- > 0 && n < ADHOC_MAX_FRAMES;) {
        const Google__V1__Location *loc = lc_pprof_location(ix, s->location_id[i]);
        for (size_t l = loc ? loc->n_line : 0; l-- > 0 && n < ADHOC_MAX_FRAMES;) {
            const Google__V1__Function *f = lc_pprof_function(ix, loc->line[l]->function_id);
            frames[n++] = f ? lc_pprof_str(p, f->name) : "";
        }
    }
    return n;
}

/* The tree of the file's flattened sample type `type`. */
static int fill_tree(lc_ftree_t *t, const adhoc_file_t *f, size_t type, lc_arena_t *arena)
{
    const lc_pprof_t *p = f->profiles[f->profile_of[type]];
    size_t in = f->type_in[type];
    lc_pprof_index_t *ix;
    const char **frames = lc_arena_alloc(arena, ADHOC_MAX_FRAMES * sizeof(*frames));
    int rc = frames ? lc_pprof_index_new(p, arena, &ix) : LC_ETOOBIG;
    for (size_t i = 0; i < p->n_sample && rc == 0; i++) {
        const Google__V1__Sample *s = p->sample[i];
        size_t n = stack_names(p, ix, s, frames);
        rc = lc_ftree_insert(t, frames, n, s->value[in]);
    }
    return rc;
}

/* fb as FlamebearerProfile JSON into *out (arena, NUL-terminated). */
static int flamebearer_text(lc_http_req_t *req, const qry_flamebearer_t *fb, char **out,
                            lc_status_t *st)
{
    lc_buf_t json;
    lc_buf_init(&json, LC_BUF_UNLIMITED);
    int rc = qry_flamebearer_json(fb, &json);
    if (rc == 0)
        rc = lc_buf_putc(&json, '\0');
    *out = rc == 0 ? lc_arena_strdup(req->arena, (const char *)json.data) : NULL;
    lc_buf_fini(&json);
    if (!*out)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "building the flame graph: %s",
                             lc_strerror(rc ? rc : LC_ETOOBIG));
    return 0;
}

static int64_t nodes_or_default(int64_t max_nodes)
{
    return max_nodes > 0 ? max_nodes : ADHOC_DEFAULT_MAX_NODES;
}

/* The response's view fields (profile types, the chosen one, the flame
 * graph JSON) from a file's bytes. */
static int describe(lc_http_req_t *req, const uint8_t *data, size_t len, const char *want_type,
                    int64_t max_nodes, Adhocprofiles__V1__AdHocProfilesGetResponse *resp,
                    lc_status_t *st)
{
    adhoc_file_t f;
    if (adhoc_file_decode(data, len, req->arena, &f, st))
        return -1;
    size_t type = adhoc_file_type(&f, want_type);
    type = type < f.n_types ? type : 0; /* an unknown type shows the first, as before */
    lc_ftree_t *t = lc_ftree_new(0);
    Querier__V1__FlameGraph *fg = NULL;
    int rc = fill_tree(t, &f, type, req->arena);
    if (rc == 0)
        rc = lc_ftree_flamegraph(t, nodes_or_default(max_nodes), req->arena, &fg);
    lc_ftree_free(t);
    if (rc)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "building the flame graph: %s",
                             lc_strerror(rc));
    qry_flamebearer_t fb = {.sample_type = f.names[type], .sample_unit = f.units[type]};
    qry_flamebearer_set_graph(&fb, fg);
    if (flamebearer_text(req, &fb, &resp->flamebearer_profile, st))
        return -1;
    resp->profile_types = f.names;
    resp->n_profile_types = f.n_types;
    resp->profile_type = f.names[type];
    return 0;
}

/* ------------------------------------------------------------ handlers */

/* Reads act for exactly one tenant too (a credential of read scope may ask):
 * an ad-hoc profile belongs to the one that uploaded it. */
static int read_tenant(lc_http_req_t *req, const qry_adhoc_t *a, const char **tenant,
                       lc_status_t *st)
{
    const char *const *tenants;
    size_t n;
    if (lc_tenants_read(req, a->multitenancy, &tenants, &n, st))
        return -1;
    if (n != 1)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "ad-hoc profiles belong to one tenant: name exactly one");
    *tenant = tenants[0];
    return 0;
}

static Adhocprofiles__V1__AdHocProfilesGetResponse *new_response(lc_http_req_t *req,
                                                                 lc_status_t *st)
{
    Adhocprofiles__V1__AdHocProfilesGetResponse *r = lc_arena_alloc(req->arena, sizeof(*r));
    if (!r)
        lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
    else
        adhocprofiles__v1__ad_hoc_profiles_get_response__init(r);
    return r;
}

/* Pyroscope keeps [A-Za-z0-9._-] of a name and turns the rest into '_'. */
static char *clean_name(const char *name)
{
    size_t len = strnlen(name, ADHOC_MAX_NAME_BYTES);
    char *out = lc_xmalloc(len + 1);
    for (size_t i = 0; i < len; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '.' || c == '_' || c == '-';
        out[i] = ok ? c : '_';
    }
    out[len] = '\0';
    return out;
}

static int adhoc_upload(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                        lc_status_t *st, void *data)
{
    qry_adhoc_t *a = data;
    const Adhocprofiles__V1__AdHocProfilesUploadRequest *r = (const void *)in;
    const char *tenant = NULL;
    if (lc_tenant_write(req, a->multitenancy, &tenant, st))
        return -1;
    size_t b64_len = strlen(r->profile);
    uint8_t *file = lc_arena_alloc(req->arena, b64_len / 4 * 3 + 1);
    ptrdiff_t len = file ? lc_base64_decode_padded(r->profile, b64_len, file) : -1;
    if (len < 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "profile: not standard base64 with padding");
    if ((size_t)len > ADHOC_MAX_BYTES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "profile of %td bytes exceeds the ad-hoc limit of %u bytes", len,
                             ADHOC_MAX_BYTES);
    Adhocprofiles__V1__AdHocProfilesGetResponse *resp = new_response(req, st);
    if (!resp || describe(req, file, (size_t)len, NULL, r->max_nodes, resp, st))
        return -1; /* bad input: nothing stored */
    adhoc_entry_t e = {.tenant = lc_xstrdup(tenant),
                       .name = clean_name(r->name),
                       .uploaded_ms = lc_realtime_ns() / 1000000,
                       .data = lc_xmalloc((size_t)len + 1),
                       .len = (size_t)len};
    uint8_t rnd[LC_INGEST_ID_BYTES];
    if (lc_ingest_id_new(rnd)) {
        adhoc_entry_free(&e);
        return lc_status_set(st, LC_CODE_INTERNAL, "no random id for the ad-hoc profile");
    }
    lc_uuid_format(rnd, e.id);
    memcpy(e.data, file, (size_t)len);
    resp->id = lc_arena_strdup(req->arena, e.id);
    resp->name = lc_arena_strdup(req->arena, e.name);
    resp->uploaded_at = e.uploaded_ms;
    store_add(a, &e);
    if (!resp->id || !resp->name)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
    *out = &resp->base;
    return 0;
}

static int adhoc_get(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                     lc_status_t *st, void *data)
{
    qry_adhoc_t *a = data;
    const Adhocprofiles__V1__AdHocProfilesGetRequest *r = (const void *)in;
    const char *tenant = NULL;
    adhoc_entry_t e;
    if (read_tenant(req, a, &tenant, st))
        return -1;
    if (!store_get(a, tenant, r->id, req->arena, &e))
        return lc_status_set(st, LC_CODE_NOT_FOUND,
                             "no ad-hoc profile with id \"%.64s\" (they are kept in memory, "
                             "up to %d per tenant, and forgotten on restart)",
                             r->id, ADHOC_MAX_PROFILES);
    Adhocprofiles__V1__AdHocProfilesGetResponse *resp = new_response(req, st);
    if (!resp || describe(req, e.data, e.len, r->profile_type, r->max_nodes, resp, st))
        return -1;
    resp->id = lc_arena_strdup(req->arena, e.id);
    resp->name = e.name;
    resp->uploaded_at = e.uploaded_ms;
    *out = &resp->base;
    return resp->id ? 0 : lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
}

static int list_into(qry_adhoc_t *a, const char *tenant, lc_arena_t *arena,
                     Adhocprofiles__V1__AdHocProfilesListResponse *resp)
{
    int rc = 0;
    uv_mutex_lock(&a->mu);
    resp->profiles = lc_arena_calloc(arena, a->n ? a->n : 1, sizeof(*resp->profiles));
    for (size_t i = 0; i < a->n && resp->profiles && rc == 0; i++) {
        const adhoc_entry_t *e = &a->entries[i];
        if (strcmp(e->tenant, tenant) != 0)
            continue;
        Adhocprofiles__V1__AdHocProfilesProfileMetadata *m = lc_arena_alloc(arena, sizeof(*m));
        char *id = lc_arena_strdup(arena, e->id), *name = lc_arena_strdup(arena, e->name);
        if (!m || !id || !name) {
            rc = LC_ETOOBIG;
            break;
        }
        adhocprofiles__v1__ad_hoc_profiles_profile_metadata__init(m);
        m->id = id;
        m->name = name;
        m->uploaded_at = e->uploaded_ms;
        resp->profiles[resp->n_profiles++] = m;
    }
    uv_mutex_unlock(&a->mu);
    return resp->profiles ? rc : LC_ETOOBIG;
}

static int adhoc_list(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                      lc_status_t *st, void *data)
{
    qry_adhoc_t *a = data;
    const char *tenant = NULL;
    LC_UNUSED(in);
    if (read_tenant(req, a, &tenant, st))
        return -1;
    Adhocprofiles__V1__AdHocProfilesListResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    if (!resp)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
    adhocprofiles__v1__ad_hoc_profiles_list_response__init(resp);
    if (list_into(a, tenant, req->arena, resp))
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
    *out = &resp->base;
    return 0;
}

/* One side of a diff: the stored profile id's tree of sample type want
 * (the first when empty); *f the file, *type the type's index in it. */
static int adhoc_diff_side(lc_http_req_t *req, qry_adhoc_t *a, const char *tenant, const char *id,
                           const char *want, lc_ftree_t *t, adhoc_file_t *f, size_t *type,
                           lc_status_t *st)
{
    adhoc_entry_t e;
    if (!store_get(a, tenant, id, req->arena, &e))
        return lc_status_set(st, LC_CODE_NOT_FOUND, "no ad-hoc profile with id \"%.64s\"", id);
    if (adhoc_file_decode(e.data, e.len, req->arena, f, st))
        return -1;
    *type = adhoc_file_type(f, want);
    if (*type == f->n_types)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "ad-hoc profile \"%.64s\" has no sample type \"%.64s\"", id, want);
    int rc = fill_tree(t, f, *type, req->arena);
    return rc ? lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "building the flame graph: %s",
                              lc_strerror(rc))
              : 0;
}

/* The diff flame graph of two uploads (left as the baseline), of the
 * request's sample type or else the left's first, which the right must have. */
static int diff_both(lc_http_req_t *req, qry_adhoc_t *a, const char *tenant,
                     const Adhocprofiles__V1__AdHocProfilesDiffRequest *r,
                     Adhocprofiles__V1__AdHocProfilesDiffResponse *resp, lc_status_t *st)
{
    adhoc_file_t lf, rf;
    size_t lt, rt;
    lc_ftree_t *left = lc_ftree_new(0), *right = lc_ftree_new(0);
    Querier__V1__FlameGraphDiff *fg = NULL;
    int rc = adhoc_diff_side(req, a, tenant, r->left_id, r->profile_type, left, &lf, &lt, st);
    if (rc == 0)
        rc = adhoc_diff_side(req, a, tenant, r->right_id, lf.names[lt], right, &rf, &rt, st);
    if (rc == 0 && lc_ftree_diff(left, right, nodes_or_default(r->max_nodes), req->arena, &fg))
        rc = lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "building the diff flame graph");
    lc_ftree_free(left);
    lc_ftree_free(right);
    if (rc)
        return -1;
    qry_flamebearer_t fb = {.sample_type = lf.names[lt], .sample_unit = lf.units[lt]};
    qry_flamebearer_set_diff(&fb, fg);
    resp->profile_types = lf.names;
    resp->n_profile_types = lf.n_types;
    return flamebearer_text(req, &fb, &resp->flamebearer_profile, st);
}

static int adhoc_diff(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                      lc_status_t *st, void *data)
{
    qry_adhoc_t *a = data;
    const char *tenant = NULL;
    if (read_tenant(req, a, &tenant, st))
        return -1;
    Adhocprofiles__V1__AdHocProfilesDiffResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    if (!resp)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
    adhocprofiles__v1__ad_hoc_profiles_diff_response__init(resp);
    if (diff_both(req, a, tenant, (const void *)in, resp, st))
        return -1;
    *out = &resp->base;
    return 0;
}

int qry_adhoc_register(qry_adhoc_t *a, lc_httpd_t *srv)
{
    static const struct {
        const char *path;
        const ProtobufCMessageDescriptor *in;
        lc_connect_unary_fn fn;
        lc_http_scope_t scope;
    } methods[ADHOC_METHODS] = {
        {"/adhocprofiles.v1.AdHocProfileService/Upload",
         &adhocprofiles__v1__ad_hoc_profiles_upload_request__descriptor, adhoc_upload,
         LC_HTTP_SCOPE_WRITE},
        {"/adhocprofiles.v1.AdHocProfileService/Get",
         &adhocprofiles__v1__ad_hoc_profiles_get_request__descriptor, adhoc_get,
         LC_HTTP_SCOPE_READ},
        {"/adhocprofiles.v1.AdHocProfileService/List",
         &adhocprofiles__v1__ad_hoc_profiles_list_request__descriptor, adhoc_list,
         LC_HTTP_SCOPE_READ},
        {"/adhocprofiles.v1.AdHocProfileService/Diff",
         &adhocprofiles__v1__ad_hoc_profiles_diff_request__descriptor, adhoc_diff,
         LC_HTTP_SCOPE_READ},
    };
    int rc = 0;
    for (size_t i = 0; i < ADHOC_METHODS && rc == 0; i++) {
        a->routes[i] = (qry_route_t){.in = methods[i].in,
                                     .unary = methods[i].fn,
                                     .data = a,
                                     .multitenancy = a->multitenancy};
        rc = qry_route_register(srv, methods[i].path, methods[i].scope, &a->routes[i]);
    }
    return rc;
}
