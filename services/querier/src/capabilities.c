/*
 * capabilities.c — capabilities.v1.FeatureFlagsService/GetFeatureFlags.
 *
 * Pyroscope lists every flag it knows, enabled or not, sorted by name. ember
 * lists the same four names and enables only what it really does:
 *   utf8LabelNames           on:  Push keeps UTF-8 label names as sent, selectors
 *                                 take quoted names ({"service.name"="x"}), and
 *                                 LabelNames returns them to callers that send
 *                                 `Accept: …; allow-utf8-labelnames=true`.
 *   v2StorageLayer           on:  what clients ask of Pyroscope's v2 layer is
 *                                 served from ember's own store: SelectHeatmap,
 *                                 SelectSeries exemplars, profile_id_selector
 *                                 (front_exemplars.c).
 *   pyroscopeRuler           off: no recording rules / metrics export.
 *   pyroscopeRulerFunctions  off: no recording rules per function.
 * Like Pyroscope (auth interceptor on this service), multi-tenant mode wants
 * an X-Scope-OrgID; the answer does not depend on which tenant asks.
 */
#include "capabilities/v1/featureflags.pb-c.h"
#include "lc/tenant.h"
#include "services_extra.h"

typedef struct flag_s {
    const char *name;
    bool enabled;
    const char *description;
} flag_t;

/* Sorted by name, as Pyroscope sends them. */
static const flag_t flags[] = {
    {"pyroscopeRuler", false, "Not supported by ember: no recording rules from profiles."},
    {"pyroscopeRulerFunctions", false, "Not supported by ember: no recording rules per function."},
    {"utf8LabelNames", true,
     "UTF-8 label names on push and in selectors; LabelNames returns them when the "
     "request's Accept carries allow-utf8-labelnames=true."},
    {"v2StorageLayer", true,
     "ember's own storage answers the v2 layer's queries: SelectHeatmap, SelectSeries "
     "exemplars (INDIVIDUAL and SPAN) and profile_id_selector."},
};

int qry_feature_flags(lc_http_req_t *req, const ProtobufCMessage *in, ProtobufCMessage **out,
                      lc_status_t *st, void *data)
{
    const qry_extra_t *x = data;
    const char *const *tenants;
    size_t n_tenants;
    LC_UNUSED(in);
    if (lc_tenants_read(req, x->multitenancy, &tenants, &n_tenants, st))
        return -1;
    size_t n = LC_ARRAY_LEN(flags);
    Capabilities__V1__GetFeatureFlagsResponse *resp = lc_arena_alloc(req->arena, sizeof(*resp));
    Capabilities__V1__FeatureFlag *f = lc_arena_calloc(req->arena, n, sizeof(*f));
    Capabilities__V1__FeatureFlag **v = lc_arena_calloc(req->arena, n, sizeof(*v));
    if (!resp || !f || !v)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "request memory exhausted");
    capabilities__v1__get_feature_flags_response__init(resp);
    for (size_t i = 0; i < n; i++) {
        capabilities__v1__feature_flag__init(&f[i]);
        f[i].name = (char *)flags[i].name;
        f[i].enabled = flags[i].enabled;
        f[i].description = (char *)flags[i].description;
        v[i] = &f[i];
    }
    resp->feature_flags = v;
    resp->n_feature_flags = n;
    *out = &resp->base;
    return 0;
}
