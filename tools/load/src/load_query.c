/*
 * load_query.c — GET /emberquery: one query against the target, answered in
 * the form asked for (in the spirit of parca-load's /parcaquery):
 *
 *   type=<profile type ID> (required)  range=<duration, default 15m>
 *   selector=<{...}, default {}>       report=pprof|json_flamegraph|json_stacks
 *
 * pprof: the merged profile of SelectMergeProfile, as protobuf bytes.
 * json_flamegraph: the FlameGraph of SelectMergeStacktraces as proto3 JSON.
 * json_stacks: the merged profile's samples as {"frames":[root..leaf],"value"}.
 * The target's failures come back as HTTP 502 with its Connect code.
 *
 * The handler runs on the loop and answers later (LC_HTTP_PENDING) from the
 * call's callback; the calls show in the metrics like every other (load_rpc.c),
 * but not in the summary or the exit status: poking at a server by hand does
 * not fail a CI run.
 */
#include <stdio.h>
#include <string.h>

#include "google/v1/profile.pb-c.h"
#include "lc/clock.h"
#include "lc/pbjson.h"
#include "load_run_int.h"
#include "load_wire.h"
#include "querier/v1/querier.pb-c.h"

#define LD_QUERY_MAX_SELECTOR 4096

typedef enum { REPORT_PPROF, REPORT_FLAMEGRAPH, REPORT_STACKS } report_t;

typedef struct query_s {
    lc_http_req_t *req;
    report_t report;
} query_t;

static void query_fail(lc_http_req_t *req, int http_status, lc_code_t code, const char *msg)
{
    lc_status_t st;
    lc_status_set_http(&st, http_status, code, "%s", msg);
    lc_http_error(req, &st);
}

static const Google__V1__Location *stacks_location(const Google__V1__Profile *p, uint64_t id)
{
    if (id >= 1 && id <= p->n_location && p->location[id - 1]->id == id)
        return p->location[id - 1];
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id == id)
            return p->location[i];
    return NULL;
}

static const char *stacks_function_name(const Google__V1__Profile *p, uint64_t id)
{
    const Google__V1__Function *f = NULL;
    if (id >= 1 && id <= p->n_function && p->function[id - 1]->id == id)
        f = p->function[id - 1];
    for (size_t i = 0; !f && i < p->n_function; i++)
        if (p->function[i]->id == id)
            f = p->function[i];
    if (!f || f->name < 0 || (size_t)f->name >= p->n_string_table)
        return "";
    return p->string_table[f->name];
}

/* The frames of one sample, root first: locations leaf-first reversed, and
 * within a location its lines (line[0] innermost) reversed. */
static int stack_json(const Google__V1__Profile *p, const Google__V1__Sample *s, lc_buf_t *out)
{
    int rc = lc_buf_puts(out, "{\"frames\":[");
    bool first = true;
    for (size_t i = s->n_location_id; !rc && i-- > 0;) {
        const Google__V1__Location *loc = stacks_location(p, s->location_id[i]);
        for (size_t k = loc ? loc->n_line : 0; !rc && k-- > 0;) {
            const char *name = stacks_function_name(p, loc->line[k]->function_id);
            if (!first)
                rc = lc_buf_putc(out, ',');
            if (!rc)
                rc = lc_pbjson_append_string(out, name, strlen(name));
            first = false;
        }
    }
    if (!rc)
        rc = lc_buf_printf(out, "],\"value\":%lld}", (long long)(s->n_value ? s->value[0] : 0));
    return rc;
}

static int stacks_json(const Google__V1__Profile *p, lc_buf_t *out)
{
    long long total = 0;
    for (size_t i = 0; i < p->n_sample; i++)
        total += p->sample[i]->n_value ? p->sample[i]->value[0] : 0;
    int rc = lc_buf_printf(out, "{\"total\":%lld,\"stacks\":[", total);
    for (size_t i = 0; !rc && i < p->n_sample; i++) {
        if (i)
            rc = lc_buf_putc(out, ',');
        if (!rc)
            rc = stack_json(p, p->sample[i], out);
    }
    return rc ? rc : lc_buf_puts(out, "]}");
}

/* Writes the answer for a successful call into q->req. */
static void query_answer(query_t *q, const uint8_t *body, size_t len)
{
    lc_http_req_t *req = q->req;
    if (q->report == REPORT_PPROF) {
        lc_http_reply(req, 200, "application/octet-stream", body, len);
        return;
    }
    lc_arena_t *arena = lc_arena_new(LD_MAX_RESPONSE_BYTES);
    ProtobufCMessage *msg;
    const ProtobufCMessageDescriptor *desc =
        q->report == REPORT_STACKS ? &google__v1__profile__descriptor
                                   : &querier__v1__select_merge_stacktraces_response__descriptor;
    lc_buf_t out;
    lc_buf_init(&out, LD_MAX_RESPONSE_BYTES);
    int rc = ld_decode(desc, LD_CODEC_PROTO, body, len, arena, &msg);
    if (!rc && q->report == REPORT_STACKS) {
        rc = stacks_json((const void *)msg, &out);
    } else if (!rc) {
        const Querier__V1__SelectMergeStacktracesResponse *r = (const void *)msg;
        Querier__V1__FlameGraph empty = QUERIER__V1__FLAME_GRAPH__INIT;
        rc = lc_pbjson_encode(r->flamegraph ? &r->flamegraph->base : &empty.base, &out);
    }
    if (rc)
        query_fail(req, 502, LC_CODE_INTERNAL, "the target's answer could not be decoded");
    else
        lc_http_reply(req, 200, "application/json", out.data, out.len);
    lc_buf_fini(&out);
    lc_arena_free(arena);
}

static void query_on_done(ld_run_t *run, bool ok, const char *code, const uint8_t *body, size_t len,
                          void *data)
{
    LC_UNUSED(run);
    query_t *q = data;
    if (ok) {
        query_answer(q, body, len);
    } else {
        char msg[600];
        snprintf(msg, sizeof(msg), "the target answered %s: %.*s", code,
                 (int)(len < 400 ? len : 400), body ? (const char *)body : "");
        int code_num = lc_code_from_name(code);
        query_fail(q->req, 502, code_num >= 0 ? (lc_code_t)code_num : LC_CODE_UNKNOWN, msg);
    }
    lc_http_finish(q->req);
    lc_free(q);
}

static int parse_report(const char *s, report_t *out)
{
    if (!s || strcmp(s, "json_flamegraph") == 0)
        *out = REPORT_FLAMEGRAPH;
    else if (strcmp(s, "pprof") == 0)
        *out = REPORT_PPROF;
    else if (strcmp(s, "json_stacks") == 0)
        *out = REPORT_STACKS;
    else
        return -1;
    return 0;
}

static int encode_query(report_t report, const char *type, const char *selector, int64_t range_ms,
                        lc_buf_t *body)
{
    int64_t end = lc_realtime_ns() / 1000000;
    ld_method_t m =
        report == REPORT_FLAMEGRAPH ? LD_SELECT_MERGE_STACKTRACES : LD_SELECT_MERGE_PROFILE;
    return ld_encode_select(m, type, selector, end - range_ms, end, 0, LD_CODEC_PROTO, body);
}

static lc_http_result_t query_route(lc_http_req_t *req, void *data)
{
    ld_run_t *run = data;
    const char *type = lc_http_query(req, "type");
    const char *range = lc_http_query(req, "range");
    const char *selector = lc_http_query(req, "selector");
    report_t report;
    int64_t range_ms;
    if (!type || !*type) {
        query_fail(req, 400, LC_CODE_INVALID_ARGUMENT, "type (a profile type ID) is required");
        return LC_HTTP_DONE;
    }
    if (parse_report(lc_http_query(req, "report"), &report)) {
        query_fail(req, 400, LC_CODE_INVALID_ARGUMENT,
                   "report must be pprof, json_flamegraph or json_stacks");
        return LC_HTTP_DONE;
    }
    if (!range)
        range = "15m";
    if (ld_parse_duration_ms(range, &range_ms)) {
        query_fail(req, 400, LC_CODE_INVALID_ARGUMENT, "range must be a duration such as 15m");
        return LC_HTTP_DONE;
    }
    if (!selector || !*selector)
        selector = "{}";
    if (strlen(selector) > LD_QUERY_MAX_SELECTOR || strlen(type) > LD_QUERY_MAX_SELECTOR) {
        query_fail(req, 400, LC_CODE_INVALID_ARGUMENT, "type or selector too long");
        return LC_HTTP_DONE;
    }
    lc_buf_t body;
    lc_buf_init(&body, LD_MAX_RESPONSE_BYTES);
    query_t *q = lc_xcalloc(1, sizeof(*q));
    q->req = req;
    q->report = report;
    ld_method_t method =
        report == REPORT_FLAMEGRAPH ? LD_SELECT_MERGE_STACKTRACES : LD_SELECT_MERGE_PROFILE;
    int rc = encode_query(report, type, selector, range_ms, &body);
    if (!rc)
        rc = ld_rpc_start_aside(run, method, range, LD_CODEC_PROTO, &body, query_on_done, q);
    lc_buf_fini(&body);
    if (rc) {
        lc_free(q);
        query_fail(req, 500, LC_CODE_INTERNAL, "the query could not be sent");
        return LC_HTTP_DONE;
    }
    return LC_HTTP_PENDING;
}

int ld_query_register(ld_run_t *run)
{
    lc_http_route_t r = {.path = "/emberquery",
                         .methods = "GET",
                         .scope = LC_HTTP_SCOPE_PUBLIC,
                         .work = query_route,
                         .data = run};
    return lc_httpd_route(run->httpd, &r);
}
