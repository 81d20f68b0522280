/*
 * load_run.c — the run (load_run.h).
 *
 * Stages: with a write load, the first push is awaited so that discovery
 * sees data; discovery asks ProfileTypes (unless --types), LabelNames and
 * LabelValues over the longest range to fill in "auto" labels and the "auto"
 * selector; then rounds: each round's calls (load_matrix.h) are handed to
 * --clients concurrent clients, one call in flight per client; a round
 * starts --interval after the previous one started, or when it ends if it
 * took longer. Every call, discovery's too, is recorded (load_rpc.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/clock.h"
#include "lc/log.h"
#include "load_run.h"
#include "load_run_int.h"
#include "load_wire.h"
#include "push/v1/push.pb-c.h"
#include "querier/v1/querier.pb-c.h"
#include "types/v1/types.pb-c.h"

#define LD_AUTO_LABELS_MAX 4
#define LD_DISCOVERY_POLLS 40 /* ProfileTypes asked again while our writes land */
#define LD_DISCOVERY_POLL_MS 250

static void run_maybe_finish(ld_run_t *run);
static void run_start_rounds(ld_run_t *run);
static void run_discover(ld_run_t *run);
static void types_on_timer(uv_timer_t *t);

static const ld_range_t *longest_range(const ld_run_t *run)
{
    const ld_range_t *best = &run->cfg->ranges[0];
    for (size_t i = 1; i < run->cfg->n_ranges; i++)
        if (run->cfg->ranges[i].ms > best->ms)
            best = &run->cfg->ranges[i];
    return best;
}

static void push_str(char ***items, size_t *n, const char *s)
{
    *items = lc_xrealloc(*items, (*n + 1) * sizeof(**items));
    (*items)[(*n)++] = lc_xstrdup(s);
}

static void free_strs(char **items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lc_free(items[i]);
    lc_free(items);
}

static void run_fail(ld_run_t *run, const char *why)
{
    LC_LOG_ERROR("%s", why);
    run->exit_code = 1;
    run->stopping = true;
    run_maybe_finish(run);
}

/* The longest range, ending now, in ms: the window discovery looks at. */
static void longest_window(const ld_run_t *run, int64_t *start, int64_t *end)
{
    *end = lc_realtime_ns() / 1000000;
    *start = *end - longest_range(run)->ms;
}

/* A discovery call came back: true when the run is stopping, and the chain
 * of discovery calls ends here. */
static bool discovery_returned(ld_run_t *run)
{
    run->queries_in_flight--;
    if (!run->stopping)
        return false;
    run_maybe_finish(run);
    return true;
}

/* Sends one discovery request, counted in flight like a round's calls so the
 * end of the run waits for it; a failure to send ends the run. */
static void discovery_send(ld_run_t *run, ld_method_t method, const ProtobufCMessage *m,
                           ld_rpc_done_cb cb)
{
    lc_buf_t body;
    lc_buf_init(&body, LD_MAX_RESPONSE_BYTES);
    run->queries_in_flight++;
    if (ld_encode(m, run->cfg->codec, &body) ||
        ld_rpc_start(run, method, longest_range(run)->name, run->cfg->codec, &body, cb, NULL)) {
        run->queries_in_flight--;
        char why[96];
        snprintf(why, sizeof(why), "discovery: %s could not be sent", ld_method_name(method));
        run_fail(run, why);
    }
    lc_buf_fini(&body);
}

/* ================================================================ requests */

static void type_matcher(const char *type, char *out, size_t n)
{
    snprintf(out, n, "{__profile_type__=\"%s\"}", type);
}

/* Encodes the request of one matrix call, for a range ending now. */
static int encode_call(const ld_run_t *run, const ld_call_t *c, lc_buf_t *body)
{
    const ld_range_t *range = &run->cfg->ranges[c->range];
    int64_t end = lc_realtime_ns() / 1000000, start = end - range->ms;
    const char *type = c->type != LD_NONE ? run->types[c->type] : "";
    const char *sel = c->selector != LD_NONE ? run->selectors[c->selector] : "";
    char matcher_buf[1024];
    char *matcher = matcher_buf;
    type_matcher(type, matcher_buf, sizeof(matcher_buf));
    ld_codec_t codec = run->cfg->codec;
    switch (c->method) {
    case LD_PROFILE_TYPES: {
        Querier__V1__ProfileTypesRequest m = QUERIER__V1__PROFILE_TYPES_REQUEST__INIT;
        m.start = start;
        m.end = end;
        return ld_encode(&m.base, codec, body);
    }
    case LD_LABEL_NAMES: {
        Types__V1__LabelNamesRequest m = TYPES__V1__LABEL_NAMES_REQUEST__INIT;
        m.n_matchers = 1;
        m.matchers = &matcher;
        m.start = start;
        m.end = end;
        return ld_encode(&m.base, codec, body);
    }
    case LD_LABEL_VALUES: {
        Types__V1__LabelValuesRequest m = TYPES__V1__LABEL_VALUES_REQUEST__INIT;
        m.name = run->labels[c->label];
        m.n_matchers = 1;
        m.matchers = &matcher;
        m.start = start;
        m.end = end;
        return ld_encode(&m.base, codec, body);
    }
    case LD_SERIES: {
        static char *names[] = {"service_name", "__profile_type__"};
        Querier__V1__SeriesRequest m = QUERIER__V1__SERIES_REQUEST__INIT;
        m.n_matchers = 1;
        m.matchers = &matcher;
        m.n_label_names = LC_ARRAY_LEN(names);
        m.label_names = names;
        m.start = start;
        m.end = end;
        return ld_encode(&m.base, codec, body);
    }
    case LD_SELECT_SERIES:
    case LD_SELECT_MERGE_STACKTRACES:
    case LD_SELECT_MERGE_PROFILE:
        return ld_encode_select(c->method, type, sel, start, end, ld_step_seconds(range->ms), codec,
                                body);
    default:
        return LC_EINPUT;
    }
}

/* ================================================================ rounds */

static void round_launch_next(ld_run_t *run);

static void round_on_timer(uv_timer_t *t)
{
    ld_run_t *run = t->data;
    if (!run->stopping)
        run_start_rounds(run);
}

static void round_done(ld_run_t *run)
{
    run->rounds_done++;
    lc_metric_add(
        lc_metrics_counter(run->metrics, "ember_load_rounds_total", "Query rounds completed.", ""),
        1);
    LC_LOG_INFO("round %u done in %.3f s", run->rounds_done,
                (double)(lc_monotonic_ns() - run->round_start_ns) / 1e9);
    if (run->cfg->rounds && run->rounds_done >= run->cfg->rounds)
        run->stopping = true;
    if (run->stopping) {
        run_maybe_finish(run);
        return;
    }
    int64_t elapsed_ms = (lc_monotonic_ns() - run->round_start_ns) / 1000000;
    int64_t wait = run->cfg->interval_ms - elapsed_ms;
    uv_timer_start(&run->round_timer, round_on_timer, wait > 0 ? (uint64_t)wait : 0, 0);
}

static void call_on_done(ld_run_t *run, bool ok, const char *code, const uint8_t *body, size_t len,
                         void *data)
{
    LC_UNUSED(ok);
    LC_UNUSED(code);
    LC_UNUSED(body);
    LC_UNUSED(len);
    LC_UNUSED(data);
    run->queries_in_flight--;
    round_launch_next(run);
}

/* Keeps --clients calls in flight until the round's calls are all started. */
static void round_launch_next(ld_run_t *run)
{
    while (!run->stopping && run->next_call < run->n_calls &&
           run->queries_in_flight < run->cfg->clients) {
        const ld_call_t *c = &run->calls[run->next_call++];
        lc_buf_t body;
        lc_buf_init(&body, LD_MAX_RESPONSE_BYTES);
        int rc = encode_call(run, c, &body);
        if (!rc) {
            run->queries_in_flight++;
            if (ld_rpc_start(run, c->method, run->cfg->ranges[c->range].name, run->cfg->codec,
                             &body, call_on_done, NULL)) {
                run->queries_in_flight--;
                run->exit_code = 1;
            }
        }
        lc_buf_fini(&body);
    }
    if (run->queries_in_flight == 0 && (run->stopping || run->next_call >= run->n_calls))
        round_done(run);
}

static void run_start_rounds(ld_run_t *run)
{
    if (run->stage != LD_STAGE_ROUNDS) {
        run->stage = LD_STAGE_ROUNDS;
        ld_matrix_dims_t d = {run->cfg->methods, run->cfg->n_ranges, run->n_types, run->n_selectors,
                              run->n_labels};
        run->n_calls = ld_matrix_size(&d);
        run->calls = lc_xcalloc(run->n_calls ? run->n_calls : 1, sizeof(*run->calls));
        ld_matrix_build(&d, run->calls);
        LC_LOG_INFO("query matrix: %zu types x %zu ranges x %zu selectors, %zu labels: %zu "
                    "calls per round",
                    run->n_types, run->cfg->n_ranges, run->n_selectors, run->n_labels,
                    run->n_calls);
    }
    run->round_start_ns = lc_monotonic_ns();
    run->next_call = 0;
    round_launch_next(run);
}

/* ================================================================ discovery */

/* {label="value"} with the value quoted as a selector string. */
static void add_auto_selector(ld_run_t *run, const char *value)
{
    lc_buf_t sel;
    lc_buf_init(&sel, LC_BUF_UNLIMITED);
    bool failed = lc_buf_printf(&sel, "{%s=\"", run->auto_label) != 0;
    for (const char *p = value; *p && !failed; p++) {
        if (*p == '"' || *p == '\\')
            failed = lc_buf_putc(&sel, '\\') != 0;
        if (!failed)
            failed = lc_buf_putc(&sel, *p) != 0;
    }
    if (!failed && lc_buf_puts(&sel, "\"}") == 0 && lc_buf_putc(&sel, '\0') == 0)
        push_str(&run->selectors, &run->n_selectors, (const char *)sel.data);
    lc_buf_fini(&sel);
}

/* A discovery answer decoded into arena, or NULL when the call failed or
 * the answer does not parse: then the run ends. */
static const void *discovery_answer(ld_run_t *run, ld_method_t method, bool ok, const char *code,
                                    const ProtobufCMessageDescriptor *desc, const uint8_t *body,
                                    size_t len, lc_arena_t *arena)
{
    ProtobufCMessage *msg;
    if (ok && !ld_decode(desc, run->cfg->codec, body, len, arena, &msg))
        return msg;
    char why[128];
    snprintf(why, sizeof(why), "discovery: %s failed (%s)", ld_method_name(method),
             ok ? "answer does not parse" : code);
    run_fail(run, why);
    return NULL;
}

static void discovery_on_values(ld_run_t *run, bool ok, const char *code, const uint8_t *body,
                                size_t len, void *data)
{
    LC_UNUSED(data);
    if (discovery_returned(run))
        return;
    lc_arena_t *arena = lc_arena_new(LD_MAX_RESPONSE_BYTES);
    const Types__V1__LabelValuesResponse *r =
        discovery_answer(run, LD_LABEL_VALUES, ok, code,
                         &types__v1__label_values_response__descriptor, body, len, arena);
    if (r && r->n_names > 0)
        add_auto_selector(run, r->names[0]);
    lc_arena_free(arena);
    if (r)
        run_start_rounds(run);
}

static bool is_internal_label(const char *name)
{
    return strncmp(name, "__", 2) == 0;
}

/* "auto" labels: the discovered public names (service_name first), up to 4. */
static void adopt_labels(ld_run_t *run, const Types__V1__LabelNamesResponse *r)
{
    for (size_t i = 0; i < r->n_names; i++)
        if (strcmp(r->names[i], "service_name") == 0)
            run->auto_label = lc_xstrdup("service_name");
    for (size_t i = 0; i < r->n_names && !run->auto_label; i++)
        if (!is_internal_label(r->names[i]))
            run->auto_label = lc_xstrdup(r->names[i]);
    bool wants_auto = false;
    for (size_t i = 0; i < run->cfg->n_labels; i++) {
        if (strcmp(run->cfg->labels[i], "auto") == 0)
            wants_auto = true;
        else
            push_str(&run->labels, &run->n_labels, run->cfg->labels[i]);
    }
    if (!wants_auto)
        return;
    if (run->auto_label)
        push_str(&run->labels, &run->n_labels, run->auto_label);
    for (size_t i = 0; i < r->n_names && run->n_labels < LD_AUTO_LABELS_MAX; i++)
        if (!is_internal_label(r->names[i]) && strcmp(r->names[i], run->auto_label) != 0)
            push_str(&run->labels, &run->n_labels, r->names[i]);
}

static void discover_values(ld_run_t *run)
{
    Types__V1__LabelValuesRequest m = TYPES__V1__LABEL_VALUES_REQUEST__INIT;
    longest_window(run, &m.start, &m.end);
    m.name = run->auto_label;
    discovery_send(run, LD_LABEL_VALUES, &m.base, discovery_on_values);
}

static bool wants_auto_selector(const ld_run_t *run)
{
    for (size_t i = 0; i < run->cfg->n_selectors; i++)
        if (strcmp(run->cfg->selectors[i], "auto") == 0)
            return true;
    return false;
}

static void discovery_on_names(ld_run_t *run, bool ok, const char *code, const uint8_t *body,
                               size_t len, void *data)
{
    LC_UNUSED(data);
    if (discovery_returned(run))
        return;
    lc_arena_t *arena = lc_arena_new(LD_MAX_RESPONSE_BYTES);
    const Types__V1__LabelNamesResponse *r =
        discovery_answer(run, LD_LABEL_NAMES, ok, code,
                         &types__v1__label_names_response__descriptor, body, len, arena);
    if (r)
        adopt_labels(run, r);
    lc_arena_free(arena);
    if (!r)
        return;
    if (wants_auto_selector(run) && run->auto_label)
        discover_values(run);
    else
        run_start_rounds(run);
}

static void discover_names(ld_run_t *run)
{
    for (size_t i = 0; i < run->cfg->n_selectors; i++) {
        const char *s = run->cfg->selectors[i];
        if (strcmp(s, "auto") != 0)
            push_str(&run->selectors, &run->n_selectors, strcmp(s, "all") == 0 ? "" : s);
    }
    Types__V1__LabelNamesRequest m = TYPES__V1__LABEL_NAMES_REQUEST__INIT;
    longest_window(run, &m.start, &m.end);
    discovery_send(run, LD_LABEL_NAMES, &m.base, discovery_on_names);
}

static void discovery_on_types(ld_run_t *run, bool ok, const char *code, const uint8_t *body,
                               size_t len, void *data)
{
    LC_UNUSED(data);
    if (discovery_returned(run))
        return;
    lc_arena_t *arena = lc_arena_new(LD_MAX_RESPONSE_BYTES);
    const Querier__V1__ProfileTypesResponse *r =
        discovery_answer(run, LD_PROFILE_TYPES, ok, code,
                         &querier__v1__profile_types_response__descriptor, body, len, arena);
    for (size_t i = 0; r && i < r->n_profile_types; i++)
        push_str(&run->types, &run->n_types, r->profile_types[i]->id);
    lc_arena_free(arena);
    if (!r)
        return;
    if (run->n_types == 0 && run->cfg->write_rate > 0 && run->type_polls < LD_DISCOVERY_POLLS) {
        /* Our own pushes may not be queryable yet (distributed mode: they
         * pass through Redis streams first): ask again shortly. */
        run->type_polls++;
        uv_timer_start(&run->round_timer, types_on_timer, LD_DISCOVERY_POLL_MS, 0);
        return;
    }
    if (run->n_types == 0) {
        char why[160];
        snprintf(why, sizeof(why), "discovery: no profile types in the last %s at %s",
                 longest_range(run)->name, run->cfg->target);
        run_fail(run, why);
        return;
    }
    discover_names(run);
}

static void discover_types(ld_run_t *run)
{
    Querier__V1__ProfileTypesRequest m = QUERIER__V1__PROFILE_TYPES_REQUEST__INIT;
    longest_window(run, &m.start, &m.end);
    discovery_send(run, LD_PROFILE_TYPES, &m.base, discovery_on_types);
}

static void types_on_timer(uv_timer_t *t)
{
    ld_run_t *run = t->data;
    if (!run->stopping)
        discover_types(run);
}

static void run_discover(ld_run_t *run)
{
    if (run->stage != LD_STAGE_WRITE_FIRST || run->stopping)
        return;
    run->stage = LD_STAGE_DISCOVER;
    if (run->cfg->n_types) {
        for (size_t i = 0; i < run->cfg->n_types; i++)
            push_str(&run->types, &run->n_types, run->cfg->types[i]);
        discover_names(run);
        return;
    }
    discover_types(run);
}

/* ================================================================ writes */

static void write_on_done(ld_run_t *run, bool ok, const char *code, const uint8_t *body, size_t len,
                          void *data)
{
    LC_UNUSED(code);
    LC_UNUSED(body);
    LC_UNUSED(len);
    const ld_write_src_t *src = data;
    run->writes_in_flight--;
    if (ok) {
        char labels[512];
        snprintf(labels, sizeof(labels), "file=\"%s\",name=\"%s\"", src->label, src->metric_name);
        lc_metric_add(lc_metrics_counter(run->metrics, "ember_load_profiles_written_total",
                                         "Profiles pushed and acknowledged, by file.", labels),
                      1);
    }
    if (run->stage == LD_STAGE_WRITE_FIRST)
        run_discover(run);
    run_maybe_finish(run);
}

static int encode_push(const ld_run_t *run, const ld_write_src_t *src, unsigned series,
                       lc_buf_t *body)
{
    lc_buf_t stamped;
    lc_buf_init(&stamped, LD_MAX_PROFILE_BYTES + 16);
    int rc = ld_pprof_stamp(src->stripped.data, src->stripped.len, lc_realtime_ns(), &stamped);
    char series_text[16];
    snprintf(series_text, sizeof(series_text), "%u", series);
    Types__V1__LabelPair l_name = TYPES__V1__LABEL_PAIR__INIT, l_svc = TYPES__V1__LABEL_PAIR__INIT,
                         l_series = TYPES__V1__LABEL_PAIR__INIT;
    l_name.name = "__name__";
    l_name.value = (char *)src->metric_name;
    l_svc.name = "service_name";
    l_svc.value = "ember-load";
    l_series.name = "series";
    l_series.value = series_text;
    Types__V1__LabelPair *labels[] = {&l_name, &l_svc, &l_series};
    Push__V1__RawSample sample = PUSH__V1__RAW_SAMPLE__INIT;
    sample.raw_profile.data = stamped.data;
    sample.raw_profile.len = stamped.len;
    Push__V1__RawSample *samples[] = {&sample};
    Push__V1__RawProfileSeries s = PUSH__V1__RAW_PROFILE_SERIES__INIT;
    s.n_labels = LC_ARRAY_LEN(labels);
    s.labels = labels;
    s.n_samples = 1;
    s.samples = samples;
    Push__V1__RawProfileSeries *all[] = {&s};
    Push__V1__PushRequest req = PUSH__V1__PUSH_REQUEST__INIT;
    req.n_series = 1;
    req.series = all;
    if (!rc)
        rc = ld_encode(&req.base, run->cfg->codec, body);
    lc_buf_fini(&stamped);
    return rc;
}

static void write_on_tick(uv_timer_t *t)
{
    ld_run_t *run = t->data;
    if (run->stopping)
        return;
    if (run->writes_in_flight >= LD_MAX_WRITES_IN_FLIGHT) {
        lc_metric_add(lc_metrics_counter(run->metrics, "ember_load_writes_skipped_total",
                                         "Writes not sent because too many were in flight.", ""),
                      1);
        return;
    }
    uint64_t k = run->writes_started++;
    ld_write_src_t *src = &run->srcs[k % run->n_srcs];
    unsigned series = (unsigned)((k / run->n_srcs) % run->cfg->write_series);
    lc_buf_t body;
    lc_buf_init(&body, LD_MAX_RESPONSE_BYTES);
    if (encode_push(run, src, series, &body)) {
        run_fail(run, "write: could not encode a push");
    } else {
        run->writes_in_flight++;
        if (ld_rpc_start(run, LD_PUSH, "none", run->cfg->codec, &body, write_on_done, src)) {
            run->writes_in_flight--;
            run->exit_code = 1;
        }
    }
    lc_buf_fini(&body);
}

/* A file name as a metric label value: quotes, backslashes and line breaks
 * (which the exposition would have to escape) become '_'. Heap copy. */
static char *label_value(const char *s)
{
    char *v = lc_xstrdup(s);
    for (char *p = v; *p; p++)
        if (*p == '"' || *p == '\\' || *p == '\n')
            *p = '_';
    return v;
}

static int load_write_files(ld_run_t *run)
{
    run->n_srcs = run->cfg->n_write_files;
    run->srcs = lc_xcalloc(run->n_srcs ? run->n_srcs : 1, sizeof(*run->srcs));
    for (size_t i = 0; i < run->n_srcs; i++) {
        const ld_write_file_t *f = &run->cfg->write_files[i];
        ld_write_src_t *src = &run->srcs[i];
        const char *slash = strrchr(f->path, '/');
        src->label = label_value(slash ? slash + 1 : f->path);
        src->metric_name = f->metric_name;
        lc_buf_init(&src->stripped, LD_MAX_PROFILE_BYTES);
        lc_buf_t raw;
        lc_buf_init(&raw, LD_MAX_PROFILE_BYTES);
        FILE *fp = fopen(f->path, "rb");
        int rc = fp ? 0 : LC_EINPUT;
        char chunk[65536];
        size_t n;
        while (!rc && (n = fread(chunk, 1, sizeof(chunk), fp)) > 0)
            rc = lc_buf_append(&raw, chunk, n);
        if (fp)
            fclose(fp);
        if (!rc)
            rc = ld_pprof_strip_time(raw.data, raw.len, &src->stripped);
        lc_buf_fini(&raw);
        if (rc) {
            fprintf(stderr, "ember-load: --write.files: %s: %s\n", f->path,
                    rc == LC_EINPUT ? "cannot read" : "not a pprof profile (or too large)");
            return -1;
        }
    }
    return 0;
}

/* ================================================================ life cycle */

static void handle_closed(uv_handle_t *h)
{
    LC_UNUSED(h);
}

static void http_closed(void *data)
{
    LC_UNUSED(data);
}

static void httpd_closed(void *data)
{
    ld_run_t *run = data;
    run->httpd = NULL;
    scr_http_close(run->http, http_closed, NULL);
}

static void run_shutdown(ld_run_t *run)
{
    if (run->shut_down)
        return;
    run->shut_down = true;
    uv_close((uv_handle_t *)&run->round_timer, handle_closed);
    uv_close((uv_handle_t *)&run->duration_timer, handle_closed);
    uv_close((uv_handle_t *)&run->write_timer, handle_closed);
    uv_close((uv_handle_t *)&run->sigint, handle_closed);
    uv_close((uv_handle_t *)&run->sigterm, handle_closed);
    if (run->httpd)
        lc_httpd_close(run->httpd, httpd_closed, run);
    else
        scr_http_close(run->http, http_closed, NULL);
}

static void run_maybe_finish(ld_run_t *run)
{
    if (!run->stopping || run->finished || run->queries_in_flight || run->writes_in_flight)
        return;
    run->finished = true;
    run->stage = LD_STAGE_DONE;
    uv_timer_stop(&run->write_timer);
    uv_timer_stop(&run->round_timer);
    uv_timer_stop(&run->duration_timer);
    if (ld_stats_errors(&run->stats))
        run->exit_code = 1;
    ld_stats_print(&run->stats, stdout);
    printf("ember-load: done: %u rounds, %llu writes, exit status %d\n", run->rounds_done,
           (unsigned long long)run->writes_started, run->exit_code);
    fflush(stdout);
    if (!run->cfg->serve_after || !run->httpd)
        run_shutdown(run);
}

static void run_on_signal(uv_signal_t *s, int signum)
{
    ld_run_t *run = s->data;
    LC_LOG_INFO("signal %d: %s", signum, run->finished ? "exiting" : "finishing the run");
    if (run->finished) {
        run_shutdown(run);
        return;
    }
    run->stopping = true;
    uv_timer_stop(&run->write_timer);
    uv_timer_stop(&run->round_timer);
    run_maybe_finish(run);
}

static void duration_on_timer(uv_timer_t *t)
{
    ld_run_t *run = t->data;
    LC_LOG_INFO("--duration reached");
    run->stopping = true;
    uv_timer_stop(&run->write_timer);
    uv_timer_stop(&run->round_timer);
    run_maybe_finish(run);
}

static void metrics_handler_reply(lc_http_req_t *req, ld_run_t *run)
{
    lc_http_reply_metrics(req, run->metrics);
}

static lc_http_result_t metrics_route(lc_http_req_t *req, void *data)
{
    metrics_handler_reply(req, data);
    return LC_HTTP_DONE;
}

static int start_httpd(ld_run_t *run)
{
    if (!run->cfg->http_address[0])
        return 0;
    lc_httpd_opts_t o = {.address = run->cfg->http_address};
    lc_http_route_t metrics = {.path = "/metrics",
                               .methods = "GET",
                               .scope = LC_HTTP_SCOPE_PUBLIC,
                               .work = metrics_route,
                               .data = run};
    if (lc_httpd_new(run->loop, &o, &run->httpd) || lc_httpd_route(run->httpd, &metrics) ||
        ld_query_register(run) || lc_httpd_listen(run->httpd)) {
        fprintf(stderr, "ember-load: cannot serve on --http.address=%s\n", run->cfg->http_address);
        return -1;
    }
    LC_LOG_INFO("serving /metrics and /emberquery on 127.0.0.1:%d (--http.address=%s)",
                lc_httpd_port(run->httpd), run->cfg->http_address);
    return 0;
}

static void set_headers(ld_run_t *run)
{
    char line[4096];
    if (run->cfg->tenant) {
        snprintf(line, sizeof(line), "X-Scope-OrgID: %s", run->cfg->tenant);
        push_str(&run->headers, &run->n_headers, line);
    }
    if (run->cfg->token) {
        snprintf(line, sizeof(line), "Authorization: Bearer %s", run->cfg->token);
        push_str(&run->headers, &run->n_headers, line);
    }
}

static void start_timers(ld_run_t *run)
{
    uv_timer_init(run->loop, &run->round_timer);
    uv_timer_init(run->loop, &run->duration_timer);
    uv_timer_init(run->loop, &run->write_timer);
    uv_signal_init(run->loop, &run->sigint);
    uv_signal_init(run->loop, &run->sigterm);
    run->round_timer.data = run->duration_timer.data = run->write_timer.data = run;
    run->sigint.data = run->sigterm.data = run;
    uv_signal_start(&run->sigint, run_on_signal, SIGINT);
    uv_signal_start(&run->sigterm, run_on_signal, SIGTERM);
    if (run->cfg->duration_ms)
        uv_timer_start(&run->duration_timer, duration_on_timer, (uint64_t)run->cfg->duration_ms, 0);
    if (run->cfg->write_rate > 0) {
        double period = 1000.0 / run->cfg->write_rate;
        uint64_t ms = period < 1 ? 1 : (uint64_t)period;
        uv_timer_start(&run->write_timer, write_on_tick, 0, ms);
    }
}

static void run_free(ld_run_t *run)
{
    for (size_t i = 0; i < run->n_srcs; i++) {
        lc_buf_fini(&run->srcs[i].stripped);
        lc_free(run->srcs[i].label);
    }
    lc_free(run->srcs);
    free_strs(run->headers, run->n_headers);
    free_strs(run->types, run->n_types);
    free_strs(run->labels, run->n_labels);
    free_strs(run->selectors, run->n_selectors);
    lc_free(run->auto_label);
    lc_free(run->calls);
    ld_stats_fini(&run->stats);
    lc_metrics_free(run->metrics);
}

int ld_run(const ld_config_t *cfg)
{
    signal(SIGPIPE, SIG_IGN);
    ld_run_t run = {.cfg = cfg, .stage = LD_STAGE_WRITE_FIRST};
    uv_loop_t loop;
    uv_loop_init(&loop);
    run.loop = &loop;
    run.metrics = lc_metrics_new();
    ld_stats_init(&run.stats);
    set_headers(&run);
    int rc = load_write_files(&run);
    if (!rc && scr_http_new(&loop, &run.http))
        rc = -1;
    if (!rc && start_httpd(&run)) {
        scr_http_close(run.http, http_closed, NULL);
        rc = -1;
    }
    if (!rc) {
        start_timers(&run);
        if (cfg->write_rate <= 0)
            run_discover(&run);
        uv_run(&loop, UV_RUN_DEFAULT);
    } else {
        uv_run(&loop, UV_RUN_DEFAULT);
        run.exit_code = 2;
    }
    uv_loop_close(&loop);
    run_free(&run);
    return run.exit_code;
}
