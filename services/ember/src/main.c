/*
 * main.c — `ember`, the all-in-one Pyroscope-compatible server.
 */
#include <stdio.h>
#include <stdlib.h>

#include "ember.h"
#include "ingest_cfg.h"
#include "lc/log.h"

static const char usage[] =
    "usage: ember [flags]\n"
    "Runs the ingester, writer, store and querier in one process (Pyroscope API on :4040).";

int main(int argc, char **argv)
{
    ember_cfg_t cfg = {0};
    lc_status_t st = {0};
    int rc = lc_cfg_load(ember_cfg_table, ember_cfg_table_len, &cfg, argc, argv, usage, &st);
    if (rc != 0) {
        if (rc < 0)
            fprintf(stderr, "ember: %s\n", st.msg);
        lc_cfg_free(ember_cfg_table, ember_cfg_table_len, &cfg);
        return rc < 0 ? 2 : 0;
    }
    lc_log_level_t level;
    if (lc_log_parse_level(cfg.log_level, &level)) {
        fprintf(stderr, "ember: --log.level: want debug, info, warn or error\n");
        return 2;
    }
    char group[32 + ING_ZONE_MAX];
    if (!ing_zone_group(cfg.zone, group, sizeof(group))) {
        fprintf(stderr, "ember: --ingester.zone wants up to %d of [A-Za-z0-9_-]\n", ING_ZONE_MAX);
        lc_cfg_free(ember_cfg_table, ember_cfg_table_len, &cfg);
        return 2;
    }
    lc_log_init("ember", level);
    lc_cfg_log(ember_cfg_table, ember_cfg_table_len, &cfg);

    ember_t *e = NULL;
    rc = ember_new(&cfg, &e);
    if (rc == 0)
        rc = ember_run(e);
    else
        LC_LOG_ERROR("start-up failed err=\"%s\"", lc_strerror(rc));
    ember_free(e);
    lc_cfg_free(ember_cfg_table, ember_cfg_table_len, &cfg);
    return rc == 0 ? 0 : 1;
}
