/*
 * main.c — `ember-agent`: the eBPF CPU profiler of one host, publishing to
 * the ingesters' Redis streams.
 */
#include <stdio.h>

#include "lc/log.h"
#include "main.h"

static const char usage[] =
    "usage: ember-agent --redis.url=redis://HOST:PORT [flags]\n"
    "Profiles every process on this host with eBPF and publishes one pprof per process per "
    "interval.";

int main(int argc, char **argv)
{
    agent_cfg_t cfg = {0};
    lc_status_t st = {0};
    int rc = lc_cfg_load(agent_cfg_table, agent_cfg_table_len, &cfg, argc, argv, usage, &st);
    if (rc != 0) {
        if (rc < 0)
            fprintf(stderr, "ember-agent: %s\n", st.msg);
        lc_cfg_free(agent_cfg_table, agent_cfg_table_len, &cfg);
        return rc < 0 ? 2 : 0;
    }
    lc_log_level_t level;
    if (lc_log_parse_level(cfg.log_level, &level)) {
        fprintf(stderr, "ember-agent: --log.level: want debug, info, warn or error\n");
        lc_cfg_free(agent_cfg_table, agent_cfg_table_len, &cfg);
        return 2;
    }
    lc_log_init("ember-agent", level);
    lc_cfg_log(agent_cfg_table, agent_cfg_table_len, &cfg);
    rc = agent_service_run(&cfg);
    lc_cfg_free(agent_cfg_table, agent_cfg_table_len, &cfg);
    return rc == 0 ? 0 : 1;
}
