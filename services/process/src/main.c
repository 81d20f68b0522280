/*
 * main.c — the body of every binary's main() (ember_process.h): settings, logging,
 * the checks that tie settings together, then the process shell.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "settings_int.h"

#define MAX_ENTRIES 96

/* ember-scraper's --config.file names the parca.yaml, as Parca's own flag
 * does, not a file of settings: it is taken out of argv (and
 * EMBER_CONFIG_FILE out of the environment) before the loader runs, which
 * would read it as settings. Returns the path (or NULL), a heap copy. */
static char *take_config_file(int *argc, char **argv)
{
    const char *path = NULL;
    const size_t len = strlen("config.file");
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        const char *name = a[0] == '-' ? a + (a[1] == '-' ? 2 : 1) : NULL;
        if (name && strncmp(name, "config.file", len) == 0 && name[len] == '=')
            path = name + len + 1;
        else if (name && strcmp(name, "config.file") == 0 && i + 1 < *argc)
            path = argv[++i];
        else
            argv[out++] = argv[i];
    }
    *argc = out;
    if (!path)
        path = getenv("EMBER_CONFIG_FILE");
    char *copy = path ? lc_xstrdup(path) : NULL;
    unsetenv("EMBER_CONFIG_FILE");
    return copy;
}

/* --storage.backend and what it needs (lc/objstore.h's rules). */
static int check_objstore(const ember_binary_t *b, const ember_settings_t *s)
{
    lc_objstore_opts_t o;
    lc_objstore_backend_t backend;
    if (lc_objstore_backend_parse(s->storage_backend, &backend) != 0) {
        fprintf(stderr, "%s: --storage.backend: want filesystem or s3\n", b->name);
        return -1;
    }
    ember_objstore_opts(s, &o);
    char why[256];
    if (lc_objstore_opts_check(&o, why, sizeof why) != 0) {
        fprintf(stderr, "%s: %s\n", b->name, why);
        return -1;
    }
    return 0;
}

/* The rules between settings, for the binaries that take them. */
static int check_settings(const ember_binary_t *b, const ember_settings_t *s)
{
    if ((b->bin & (EMBER_BIN_EMBER | EMBER_BIN_INGESTER | EMBER_BIN_QUERIER)) &&
        check_objstore(b, s) != 0)
        return -1;
    if (!(b->bin & (EMBER_BIN_EMBER | EMBER_BIN_INGESTER)))
        return 0;
    char group[32 + EMBER_ZONE_MAX];
    if (!ember_zone_group(s->zone, group, sizeof(group))) {
        fprintf(stderr, "%s: --ingester.zone wants up to %d of [A-Za-z0-9_-]\n", b->name,
                EMBER_ZONE_MAX);
        return -1;
    }
    if (s->partitions < 1 || s->partitions > 4096 || s->redis_max_backlog < 1) {
        fprintf(stderr,
                "%s: --ingest.partitions wants 1..4096 and --redis.max-backlog at "
                "least 1\n",
                b->name);
        return -1;
    }
    return 0;
}

/* 0 to run, 1 when --help was printed, -1 for bad settings (said why). */
static int load_settings(const ember_binary_t *b, const lc_cfg_entry_t *table, size_t n,
                         ember_settings_t *s, int argc, char **argv)
{
    char *parca_yaml = b->bin == EMBER_BIN_SCRAPER ? take_config_file(&argc, argv) : NULL;
    lc_status_t st = {0};
    int rc = lc_cfg_load(table, n, s, argc, argv, b->usage, &st);
    if (rc == 0 && b->bin == EMBER_BIN_SCRAPER) {
        lc_free(s->scrape_config_file); /* the table's (empty) default */
        s->scrape_config_file = parca_yaml;
        parca_yaml = NULL;
    }
    lc_free(parca_yaml);
    if (rc < 0)
        fprintf(stderr, "%s: %s\n", b->name, st.msg);
    if (rc != 0)
        return rc;
    lc_log_level_t level;
    if (lc_log_parse_level(s->log_level, &level)) {
        fprintf(stderr, "%s: --log.level: want debug, info, warn or error\n", b->name);
        return -1;
    }
    if (check_settings(b, s))
        return -1;
    lc_log_init(b->name, level);
    lc_cfg_log(table, n, s);
    return 0;
}

/* A heap string of cfg as YAML (only what differs from base, when given). */
static char *config_yaml(const lc_cfg_entry_t *table, size_t n, const void *cfg, const void *base)
{
    lc_buf_t b;
    lc_buf_init(&b, LC_BUF_UNLIMITED);
    /* unlimited: fails only out of memory, where lc_x* abort too */
    int rc = lc_cfg_yaml(table, n, cfg, base, &b);
    if (rc == 0)
        rc = lc_buf_putc(&b, '\0');
    LC_ASSERT(rc == 0);
    char *text = lc_xstrdup((const char *)b.data);
    lc_buf_fini(&b);
    return text;
}

/* The three YAML views status.v1 serves: the effective settings, what differs
 * from the defaults, the defaults. Computed once: settings never change. */
static void describe_config(const lc_cfg_entry_t *table, size_t n, ember_settings_t *s)
{
    ember_settings_t defaults = {.bin = s->bin};
    lc_status_t st = {0};
    /* they loaded once already, under everything the user set */
    int rc = lc_cfg_defaults(table, n, &defaults, &st);
    LC_ASSERT(rc == 0);
    s->config_yaml = config_yaml(table, n, s, NULL);
    s->config_diff_yaml = config_yaml(table, n, s, &defaults);
    s->config_default_yaml = config_yaml(table, n, &defaults, NULL);
    lc_cfg_free(table, n, &defaults);
}

static void free_config_yaml(ember_settings_t *s)
{
    lc_free(s->config_yaml);
    lc_free(s->config_diff_yaml);
    lc_free(s->config_default_yaml);
}

int ember_main(const ember_binary_t *b, int argc, char **argv)
{
    lc_cfg_entry_t table[MAX_ENTRIES];
    size_t n = ember_settings_select(b->bin, table, MAX_ENTRIES);
    ember_settings_t s = {.bin = b->bin};
    int rc = load_settings(b, table, n, &s, argc, argv);
    if (rc == 0) {
        describe_config(table, n, &s);
        lc_proc_opts_t po = {
            .name = b->name,
            .http_address = s.http_address,
            .max_body_bytes = (size_t)s.max_body_bytes,
            .max_connections = (size_t)s.max_connections,
            .h2_disable = s.bin != EMBER_BIN_SCRAPER && s.bin != EMBER_BIN_AGENT ? !s.h2 : false,
            .h2_max_streams = (uint32_t)s.h2_max_streams,
            .auth_tokens_file = s.auth_tokens_file,
            .nodes = b->nodes,
            .n_nodes = b->n_nodes,
            .settings = &s};
        rc = lc_proc_run(&po) == 0 ? 0 : 1;
    } else {
        rc = rc > 0 ? 0 : 2;
    }
    free_config_yaml(&s);
    lc_cfg_free(table, n, &s);
    return rc;
}
