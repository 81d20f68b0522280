/*
 * main.c — `ember-load`: a load generator for ember's query API, modelled on
 * parca-load (tools/load/src/load_run.h has the run, load_config.h the flags).
 */
#include <stdio.h>

#include "lc/log.h"
#include "load_config.h"
#include "load_run.h"

int main(int argc, char **argv)
{
    ld_config_t cfg;
    char err[512];
    if (ld_config_parse(argc, argv, &cfg, err, sizeof(err))) {
        fprintf(stderr, "ember-load: %s\n", err);
        ld_config_free(&cfg);
        return 2;
    }
    if (cfg.help) {
        fputs(ld_config_help(), stdout);
        ld_config_free(&cfg);
        return 0;
    }
    lc_log_init("ember-load", LC_LOG_LEVEL_INFO);
    int rc = ld_run(&cfg);
    ld_config_free(&cfg);
    return rc;
}
