/*
 * fuzz_scrape_config.c — arbitrary bytes into the scraper's config parser
 * (services/scraper/src/config*.c, relabel rules included) and, as the same
 * YAML/JSON shape, the file_sd target-group parser.
 *
 * Beyond "no crash, no leak", an accepted config must hold what validation
 * promises: every job named, interval > 0, timeout > interval, scheme http or
 * https, every enabled profile with an absolute path; and the targets built
 * from its static groups (relabeling run) have URLs of that scheme and publish
 * __name__ and service_name. A refusal always comes with a message.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "scraper_int.h"
#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_job(const scr_job_t *job)
{
    if (!job->name || !job->name[0] || job->interval_ns <= 0 || job->timeout_ns <= job->interval_ns)
        abort();
    if (strcmp(job->scheme, "http") != 0 && strcmp(job->scheme, "https") != 0)
        abort();
    for (size_t i = 0; i < job->n_profiles; i++)
        if (job->profiles[i].enabled && job->profiles[i].path[0] != '/')
            abort();
    const scr_group_t *lists[] = {job->static_groups};
    size_t counts[] = {job->n_static};
    scr_target_set_t set;
    scr_targets_build(job, lists, counts, 1, &set);
    for (size_t i = 0; i < set.n; i++) {
        const scr_target_spec_t *t = &set.v[i];
        if (strncmp(t->url, "http://", 7) != 0 && strncmp(t->url, "https://", 8) != 0)
            abort();
        if (!lc_labels_get(&t->series, "__name__") || !lc_labels_get(&t->series, "service_name"))
            abort();
    }
    scr_target_set_fini(&set);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    scr_config_t *c = NULL;
    lc_status_t st = {0};
    if (scr_config_parse((const char *)data, size, "fuzz.yaml", &c, &st) == 0) {
        for (size_t i = 0; i < c->n_jobs; i++)
            check_job(&c->jobs[i]);
        scr_config_free(c);
    } else if (!st.msg[0]) {
        abort();
    }
    scr_group_t *groups = NULL;
    size_t n = 0;
    lc_status_t st2 = {0};
    if (scr_file_sd_parse("fuzz.json", (const char *)data, size, &groups, &n, &st2) == 0) {
        for (size_t i = 0; i < n; i++)
            scr_group_fini(&groups[i]);
        lc_free(groups);
    } else if (!st2.msg[0]) {
        abort();
    }
    return 0;
}
