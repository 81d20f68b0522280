/*
 * fuzz_cfg_yaml.c — arbitrary bytes into the config file parser, with a table
 * that holds every value type, a range, a name deeper than the walker's
 * nesting limit and config.file itself. The same bytes, as a C string, also
 * go through the duration and byte-size parsers.
 *
 * Beyond "no crash, no leak", it checks what the loader promises: an accepted
 * document leaves every value within its declared range and never negative
 * for durations and sizes, and a refusal always comes with a message.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/cfg.h"

typedef struct {
    char *config_file;
    char *http_address;
    int64_t port;
    bool debug;
    int64_t retention_ns;
    int64_t map_size_bytes;
    char *deep;
} fuzz_cfg_t;

#define F(name, type, field, def, min, max)                                                        \
    {                                                                                              \
        name, type, offsetof(fuzz_cfg_t, field), def, min, max, "fuzz", NULL                       \
    }

static const lc_cfg_entry_t table[] = {
    F("config.file", LC_CFG_STRING, config_file, NULL, 0, 0),
    F("http.address", LC_CFG_STRING, http_address, ":4040", 0, 0),
    /* with a deprecated alias, so its lookups are fuzzed too */
    {"http.port", LC_CFG_INT, offsetof(fuzz_cfg_t, port), "4040", 1, 65535, "fuzz", "server.port"},
    F("debug", LC_CFG_BOOL, debug, "false", 0, 0),
    F("retention", LC_CFG_DURATION, retention_ns, "7d", 0, 0),
    F("storage.map-size", LC_CFG_BYTES, map_size_bytes, "16GiB", 0, 0),
    F("a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r", LC_CFG_STRING, deep, NULL, 0, 0),
};

static void check_loaded(const fuzz_cfg_t *cfg)
{
    if (!cfg->http_address || !cfg->config_file || !cfg->deep)
        abort();
    if (cfg->port < 1 || cfg->port > 65535 || cfg->retention_ns < 0 || cfg->map_size_bytes < 0)
        abort();
}

static void fuzz_yaml(const uint8_t *data, size_t size)
{
    fuzz_cfg_t cfg;
    lc_status_t st = {0};
    if (lc_cfg_defaults(table, LC_ARRAY_LEN(table), &cfg, &st) != 0)
        abort();
    int rc = lc_cfg_load_yaml(table, LC_ARRAY_LEN(table), &cfg, "fuzz.yaml", (const char *)data,
                              size, &st);
    if (rc == 0)
        check_loaded(&cfg);
    else if (st.msg[0] == '\0' || memchr(st.msg, '\0', sizeof(st.msg)) == NULL)
        abort();
    lc_cfg_free(table, LC_ARRAY_LEN(table), &cfg);
}

static void fuzz_scalars(const uint8_t *data, size_t size)
{
    char *text = lc_xstrndup((const char *)data, size);
    int64_t v;
    if (lc_parse_duration(text, &v) == 0 && v < 0)
        abort();
    if (lc_parse_bytes(text, &v) == 0 && v < 0)
        abort();
    lc_free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_yaml(data, size);
    fuzz_scalars(data, size);
    return 0;
}
