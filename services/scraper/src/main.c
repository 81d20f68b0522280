/*
 * main.c — `ember-scraper`: pulls pprof from the targets of a parca.yaml and
 * publishes to the ingesters' Redis streams; replicas split the targets.
 *
 * `--config.file` names the parca.yaml, as Parca's own flag does, not a file
 * of flag settings as for the other binaries: it is taken out of argv (and
 * EMBER_CONFIG_FILE out of the environment) before the common loader runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/log.h"
#include "main.h"

static const char usage[] =
    "usage: ember-scraper --config.file=parca.yaml --redis.url=redis://HOST:PORT [flags]\n"
    "Scrapes pprof endpoints (Parca's scrape_configs) and publishes the profiles to the "
    "ingesters' Redis streams.";

/* Removes --config.file[=| ]PATH from argv; returns PATH (or NULL). */
static char *take_config_file(int *argc, char **argv)
{
    char *path = NULL;
    int out = 1;
    for (int i = 1; i < *argc; i++) {
        const char *a = argv[i];
        const char *name = a[0] == '-' ? a + (a[1] == '-' ? 2 : 1) : NULL;
        size_t len = strlen("config.file");
        if (name && strncmp(name, "config.file", len) == 0 && name[len] == '=') {
            path = argv[i] + (name - a) + len + 1;
        } else if (name && strcmp(name, "config.file") == 0 && i + 1 < *argc) {
            path = argv[++i];
        } else {
            argv[out++] = argv[i];
        }
    }
    *argc = out;
    return path;
}

int main(int argc, char **argv)
{
    char *config_file = take_config_file(&argc, argv);
    char *env_file = getenv("EMBER_CONFIG_FILE");
    char *from_env = env_file ? lc_xstrdup(env_file) : NULL;
    unsetenv("EMBER_CONFIG_FILE");
    scraper_cfg_t cfg = {0};
    lc_status_t st = {0};
    int rc = lc_cfg_load(scraper_cfg_table, scraper_cfg_table_len, &cfg, argc, argv, usage, &st);
    if (rc == 0) {
        const char *path = config_file ? config_file : from_env;
        lc_free(cfg.config_file); /* the table's (empty) default */
        cfg.config_file = path ? lc_xstrdup(path) : NULL;
    }
    lc_free(from_env);
    if (rc != 0) {
        if (rc < 0)
            fprintf(stderr, "ember-scraper: %s\n", st.msg);
        lc_cfg_free(scraper_cfg_table, scraper_cfg_table_len, &cfg);
        return rc < 0 ? 2 : 0;
    }
    lc_log_level_t level;
    if (lc_log_parse_level(cfg.log_level, &level)) {
        fprintf(stderr, "ember-scraper: --log.level: want debug, info, warn or error\n");
        lc_cfg_free(scraper_cfg_table, scraper_cfg_table_len, &cfg);
        return 2;
    }
    lc_log_init("ember-scraper", level);
    lc_cfg_log(scraper_cfg_table, scraper_cfg_table_len, &cfg);
    rc = scraper_service_run(&cfg);
    lc_cfg_free(scraper_cfg_table, scraper_cfg_table_len, &cfg);
    return rc == 0 ? 0 : 1;
}
