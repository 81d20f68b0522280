/*
 * load_config.c — ember-load's flags (load_config.h). Flags are `--name=value`
 * or `--name value`; lists are `;`-separated (ranges, types, labels, methods
 * and files also take `,`; selectors do not, since a selector holds commas).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/err.h"
#include "load_config.h"
#include "load_matrix.h"

static const char help_text[] =
    "usage: ember-load [flags]\n"
    "Load generator for ember's (and Pyroscope's) query API, modelled on parca-load:\n"
    "rounds over profile types x ranges x selectors of ProfileTypes, LabelNames,\n"
    "LabelValues, Series, SelectSeries, SelectMergeStacktraces and SelectMergeProfile\n"
    "(Connect unary), an optional write load (push.v1 Push of real pprof files), Prometheus\n"
    "metrics and /emberquery on its own HTTP port, and a latency summary at the end.\n"
    "Exits 0 if every request succeeded, 1 if any failed, 2 on bad flags.\n"
    "\n"
    "  --target=URL            ember (or Pyroscope) base URL (default http://127.0.0.1:4040)\n"
    "  --http.address=H:P      own HTTP server for /metrics and /emberquery\n"
    "                          (default 127.0.0.1:7171; \"\" = none)\n"
    "  --clients=N             concurrent query clients (default 5)\n"
    "  --rounds=N              query rounds, then stop (default 0 = until --duration/signal)\n"
    "  --duration=D            stop after D, e.g. 10m (default 0 = no limit)\n"
    "  --interval=D            from one round's start to the next's (default 5s)\n"
    "  --client.timeout=D      per-request timeout (default 10s)\n"
    "  --ranges=LIST           query ranges ending now (default 15m;12h;7d)\n"
    "  --types=LIST            profile type IDs (default: discovered with ProfileTypes)\n"
    "  --selectors=LIST        label selectors; all = no selector, auto = {label=\"value\"}\n"
    "                          from the first discovered label (default all;auto)\n"
    "  --labels=LIST           label names for LabelValues; auto = discovered (up to 4)\n"
    "                          (default auto)\n"
    "  --methods=LIST          RPCs per round (default: all of ProfileTypes, LabelNames,\n"
    "                          LabelValues, Series, SelectSeries, SelectMergeStacktraces,\n"
    "                          SelectMergeProfile)\n"
    "  --codec=proto|json      Connect codec (default proto)\n"
    "  --write.rate=R          push R profiles per second (default 0 = no write load)\n"
    "  --write.files=LIST      pprof files (plain or gzip) to push, each [NAME=]PATH;\n"
    "                          NAME is __name__ (default process_cpu)\n"
    "  --write.target=URL      where the pushes go (default --target; in distributed mode\n"
    "                          an ember-ingester, since ember-querier serves no ingest)\n"
    "  --write.series=N        distinct series={0..N-1} labels the pushes rotate over\n"
    "                          (default 4)\n"
    "  --tenant=ID             X-Scope-OrgID header\n"
    "  --token=TOKEN           Authorization: Bearer TOKEN\n"
    "  --serve-after           after the run, keep serving until SIGINT/SIGTERM\n"
    "  --help                  this text\n";

const char *ld_config_help(void)
{
    return help_text;
}

static int config_fail(char *err, size_t err_len, const char *fmt, ...) LC_PRINTF(3, 4);
static int config_fail(char *err, size_t err_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, err_len, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---------------------------------------------------------------- values */

int ld_parse_duration_ms(const char *s, int64_t *out_ms)
{
    static const struct {
        const char *unit;
        double ms;
    } units[] = {{"ms", 1},      {"s", 1000},     {"m", 60000},
                 {"h", 3600000}, {"d", 86400000}, {"w", 604800000}};
    double total = 0;
    const char *p = s;
    if (!s || !*s)
        return -1;
    while (*p) {
        char *end;
        errno = 0;
        double v = strtod(p, &end);
        if (end == p || errno || v < 0 || *p == '-' || *p == '+')
            return -1;
        p = end;
        size_t best = 0, best_len = 0;
        for (size_t i = 0; i < LC_ARRAY_LEN(units); i++) {
            size_t n = strlen(units[i].unit);
            if (strncmp(p, units[i].unit, n) == 0 && n > best_len) {
                best = i;
                best_len = n;
            }
        }
        if (!best_len)
            return -1;
        total += v * units[best].ms;
        p += best_len;
    }
    if (total < 1 || total > 3650.0 * 86400000)
        return -1;
    *out_ms = (int64_t)total;
    return 0;
}

static int parse_uint(const char *s, unsigned max, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || errno || *s == '-' || v > max)
        return -1;
    *out = (unsigned)v;
    return 0;
}

/* Splits s on any of seps into trimmed, non-empty heap strings. */
static int split_list(const char *s, const char *seps, char ***out, size_t *n)
{
    char **items = NULL;
    size_t count = 0, cap = 0;
    const char *p = s;
    while (*p) {
        size_t len = strcspn(p, seps);
        const char *a = p, *b = p + len;
        while (a < b && (*a == ' ' || *a == '\t'))
            a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
            b--;
        if (b > a) {
            if (count == LD_MAX_LIST) {
                for (size_t i = 0; i < count; i++)
                    lc_free(items[i]);
                lc_free(items);
                return -1;
            }
            items = lc_xgrow(items, &cap, count + 1, sizeof(*items));
            items[count++] = lc_xstrndup(a, (size_t)(b - a));
        }
        p += len;
        if (*p)
            p++;
    }
    *out = items;
    *n = count;
    return 0;
}

static void free_list(char **items, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lc_free(items[i]);
    lc_free(items);
}

static void replace_list(char ***items, size_t *n, char **fresh, size_t n_fresh)
{
    free_list(*items, *n);
    *items = fresh;
    *n = n_fresh;
}

static void set_str(char **dst, const char *v)
{
    lc_free(*dst);
    *dst = lc_xstrdup(v);
}

static int set_ranges(ld_config_t *cfg, const char *v, char *err, size_t err_len)
{
    char **items = NULL;
    size_t n = 0;
    if (split_list(v, ";,", &items, &n) || n == 0 || n > LD_MAX_RANGES) {
        if (n)
            free_list(items, n);
        return config_fail(err, err_len, "--ranges: 1 to %d ranges expected", LD_MAX_RANGES);
    }
    ld_range_t ranges[LD_MAX_RANGES];
    for (size_t i = 0; i < n; i++) {
        ranges[i].name = items[i];
        if (ld_parse_duration_ms(items[i], &ranges[i].ms)) {
            config_fail(err, err_len, "--ranges: %s is not a duration (e.g. 15m, 12h, 7d)",
                        items[i]);
            free_list(items, n);
            return -1;
        }
    }
    for (size_t i = 0; i < cfg->n_ranges; i++)
        lc_free(cfg->ranges[i].name);
    memcpy(cfg->ranges, ranges, n * sizeof(ranges[0]));
    cfg->n_ranges = n;
    lc_free(items);
    return 0;
}

static int set_methods(ld_config_t *cfg, const char *v, char *err, size_t err_len)
{
    char **items;
    size_t n;
    unsigned mask = 0;
    if (split_list(v, ";,", &items, &n))
        return config_fail(err, err_len, "--methods: too many entries");
    for (size_t i = 0; i < n; i++) {
        int m = ld_method_from_name(items[i]);
        if (m < 0 || m == LD_PUSH) {
            config_fail(err, err_len, "--methods: unknown method %s", items[i]);
            free_list(items, n);
            return -1;
        }
        mask |= 1u << m;
    }
    free_list(items, n);
    if (!mask)
        return config_fail(err, err_len, "--methods: at least one method expected");
    cfg->methods = mask;
    return 0;
}

static bool valid_metric_name(const char *s, size_t n)
{
    if (!n)
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
              (i > 0 && c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

static int set_write_files(ld_config_t *cfg, const char *v, char *err, size_t err_len)
{
    char **items;
    size_t n;
    if (split_list(v, ";,", &items, &n))
        return config_fail(err, err_len, "--write.files: more than %d files", LD_MAX_LIST);
    for (size_t i = 0; i < cfg->n_write_files; i++) {
        lc_free(cfg->write_files[i].metric_name);
        lc_free(cfg->write_files[i].path);
    }
    lc_free(cfg->write_files);
    cfg->write_files = lc_xcalloc(n ? n : 1, sizeof(*cfg->write_files));
    cfg->n_write_files = n;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(items[i], '=');
        bool named = eq && valid_metric_name(items[i], (size_t)(eq - items[i]));
        cfg->write_files[i].metric_name =
            named ? lc_xstrndup(items[i], (size_t)(eq - items[i])) : lc_xstrdup("process_cpu");
        cfg->write_files[i].path = lc_xstrdup(named ? eq + 1 : items[i]);
    }
    free_list(items, n);
    return 0;
}

/* ---------------------------------------------------------------- flags */

static void set_defaults(ld_config_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->target = lc_xstrdup("http://127.0.0.1:4040");
    cfg->http_address = lc_xstrdup("127.0.0.1:7171");
    cfg->clients = 5;
    cfg->interval_ms = 5000;
    cfg->timeout_ms = 10000;
    static const char *const ranges[] = {"15m", "12h", "7d"};
    for (size_t i = 0; i < LC_ARRAY_LEN(ranges); i++) {
        cfg->ranges[i].name = lc_xstrdup(ranges[i]);
        (void)ld_parse_duration_ms(ranges[i], &cfg->ranges[i].ms);
    }
    cfg->n_ranges = LC_ARRAY_LEN(ranges);
    cfg->selectors = lc_xcalloc(2, sizeof(char *));
    cfg->selectors[0] = lc_xstrdup("all");
    cfg->selectors[1] = lc_xstrdup("auto");
    cfg->n_selectors = 2;
    cfg->labels = lc_xcalloc(1, sizeof(char *));
    cfg->labels[0] = lc_xstrdup("auto");
    cfg->n_labels = 1;
    cfg->methods = LD_QUERY_METHODS;
    cfg->write_series = 4;
}

static int set_list_flag(const char *name, const char *v, const char *seps, char ***items,
                         size_t *n, char *err, size_t err_len)
{
    char **fresh;
    size_t n_fresh;
    if (split_list(v, seps, &fresh, &n_fresh))
        return config_fail(err, err_len, "--%s: more than %d entries", name, LD_MAX_LIST);
    replace_list(items, n, fresh, n_fresh);
    return 0;
}

static int set_duration_flag(const char *name, const char *v, bool zero_ok, int64_t *out, char *err,
                             size_t err_len)
{
    if (zero_ok && strcmp(v, "0") == 0) {
        *out = 0;
        return 0;
    }
    if (ld_parse_duration_ms(v, out))
        return config_fail(err, err_len, "--%s: %s is not a duration (e.g. 500ms, 10s, 5m)", name,
                           v);
    return 0;
}

static int set_url(const char *flag, char **dst, const char *v, char *err, size_t err_len)
{
    if (strncmp(v, "http://", 7) != 0 && strncmp(v, "https://", 8) != 0)
        return config_fail(err, err_len, "--%s: an http:// or https:// URL expected, got %s", flag,
                           v);
    set_str(dst, v);
    size_t n = strlen(*dst);
    while (n > 0 && (*dst)[n - 1] == '/')
        (*dst)[--n] = '\0';
    return 0;
}

static int set_write_rate(ld_config_t *cfg, const char *v, char *err, size_t err_len)
{
    char *end;
    errno = 0;
    double r = strtod(v, &end);
    if (!*v || *end || errno || !(r >= 0 && r <= 10000))
        return config_fail(err, err_len,
                           "--write.rate: profiles per second from 0 to 10000 expected");
    cfg->write_rate = r;
    return 0;
}

static int set_codec(ld_config_t *cfg, const char *v, char *err, size_t err_len)
{
    if (strcmp(v, "proto") == 0)
        cfg->codec = LD_CODEC_PROTO;
    else if (strcmp(v, "json") == 0)
        cfg->codec = LD_CODEC_JSON;
    else
        return config_fail(err, err_len, "--codec: proto or json expected, got %s", v);
    return 0;
}

/* Applies one flag with its value (NULL for the boolean ones). */
static int apply_flag(ld_config_t *cfg, const char *name, const char *v, char *err, size_t err_len)
{
    unsigned u;
    if (strcmp(name, "target") == 0 || strcmp(name, "write.target") == 0)
        return set_url(name, name[0] == 't' ? &cfg->target : &cfg->write_target, v, err, err_len);
    if (strcmp(name, "http.address") == 0) {
        set_str(&cfg->http_address, v);
        return 0;
    }
    if (strcmp(name, "clients") == 0) {
        if (parse_uint(v, LD_MAX_CLIENTS, &u) || u == 0)
            return config_fail(err, err_len, "--clients: 1 to %d expected", LD_MAX_CLIENTS);
        cfg->clients = u;
        return 0;
    }
    if (strcmp(name, "rounds") == 0)
        return parse_uint(v, 1000000000u, &cfg->rounds)
                   ? config_fail(err, err_len, "--rounds: a count expected, got %s", v)
                   : 0;
    if (strcmp(name, "write.series") == 0) {
        if (parse_uint(v, 100000, &u) || u == 0)
            return config_fail(err, err_len, "--write.series: 1 to 100000 expected");
        cfg->write_series = u;
        return 0;
    }
    if (strcmp(name, "duration") == 0)
        return set_duration_flag(name, v, true, &cfg->duration_ms, err, err_len);
    if (strcmp(name, "interval") == 0)
        return set_duration_flag(name, v, true, &cfg->interval_ms, err, err_len);
    if (strcmp(name, "client.timeout") == 0)
        return set_duration_flag(name, v, false, &cfg->timeout_ms, err, err_len);
    if (strcmp(name, "ranges") == 0)
        return set_ranges(cfg, v, err, err_len);
    if (strcmp(name, "types") == 0)
        return set_list_flag(name, v, ";,", &cfg->types, &cfg->n_types, err, err_len);
    if (strcmp(name, "selectors") == 0)
        return set_list_flag(name, v, ";", &cfg->selectors, &cfg->n_selectors, err, err_len);
    if (strcmp(name, "labels") == 0)
        return set_list_flag(name, v, ";,", &cfg->labels, &cfg->n_labels, err, err_len);
    if (strcmp(name, "methods") == 0)
        return set_methods(cfg, v, err, err_len);
    if (strcmp(name, "codec") == 0)
        return set_codec(cfg, v, err, err_len);
    if (strcmp(name, "write.rate") == 0)
        return set_write_rate(cfg, v, err, err_len);
    if (strcmp(name, "write.files") == 0)
        return set_write_files(cfg, v, err, err_len);
    if (strcmp(name, "tenant") == 0) {
        set_str(&cfg->tenant, v);
        return 0;
    }
    if (strcmp(name, "token") == 0) {
        set_str(&cfg->token, v);
        return 0;
    }
    return config_fail(err, err_len, "unknown flag --%s (see --help)", name);
}

static const char *const value_flags[] = {
    "target",       "http.address",   "clients", "rounds",     "duration",
    "interval",     "client.timeout", "ranges",  "types",      "selectors",
    "labels",       "methods",        "codec",   "write.rate", "write.files",
    "write.series", "write.target",   "tenant",  "token"};

static bool is_value_flag(const char *name)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(value_flags); i++)
        if (strcmp(name, value_flags[i]) == 0)
            return true;
    return false;
}

static bool is_bool_flag(const char *name, size_t n)
{
    return (n == 11 && strncmp(name, "serve-after", n) == 0) ||
           (n == 4 && strncmp(name, "help", n) == 0);
}

static int check_config(const ld_config_t *cfg, char *err, size_t err_len)
{
    if (cfg->write_rate > 0 && cfg->n_write_files == 0)
        return config_fail(err, err_len, "--write.rate needs --write.files");
    return 0;
}

int ld_config_parse(int argc, char **argv, ld_config_t *cfg, char *err, size_t err_len)
{
    set_defaults(cfg);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0) {
            cfg->help = true;
            continue;
        }
        if (strncmp(a, "--", 2) != 0)
            return config_fail(err, err_len, "unexpected argument %s (flags are --name=value)", a);
        a += 2;
        const char *eq = strchr(a, '=');
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        if (is_bool_flag(a, name_len)) {
            bool on = !eq || strcmp(eq + 1, "true") == 0;
            if (eq && !on && strcmp(eq + 1, "false") != 0)
                return config_fail(err, err_len, "--%.*s: true or false expected", (int)name_len,
                                   a);
            if (a[0] == 'h')
                cfg->help = on;
            else
                cfg->serve_after = on;
            continue;
        }
        char name[64];
        if (name_len >= sizeof(name))
            return config_fail(err, err_len, "unknown flag --%.20s...", a);
        memcpy(name, a, name_len);
        name[name_len] = '\0';
        if (!is_value_flag(name))
            return config_fail(err, err_len, "unknown flag --%s (see --help)", name);
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (i + 1 >= argc)
                return config_fail(err, err_len, "--%s needs a value", name);
            v = argv[++i];
        }
        if (apply_flag(cfg, name, v, err, err_len))
            return -1;
    }
    return check_config(cfg, err, err_len);
}

void ld_config_free(ld_config_t *cfg)
{
    lc_free(cfg->target);
    lc_free(cfg->write_target);
    lc_free(cfg->http_address);
    for (size_t i = 0; i < cfg->n_ranges; i++)
        lc_free(cfg->ranges[i].name);
    free_list(cfg->types, cfg->n_types);
    free_list(cfg->selectors, cfg->n_selectors);
    free_list(cfg->labels, cfg->n_labels);
    for (size_t i = 0; i < cfg->n_write_files; i++) {
        lc_free(cfg->write_files[i].metric_name);
        lc_free(cfg->write_files[i].path);
    }
    lc_free(cfg->write_files);
    lc_free(cfg->tenant);
    lc_free(cfg->token);
    memset(cfg, 0, sizeof(*cfg));
}
