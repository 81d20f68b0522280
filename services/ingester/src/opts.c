/*
 * opts.c — the ingester's defaults. ember admits every valid profile in the
 * shared test data by default (Pyroscope's 16k-sample and 4 MiB caps would
 * reject real large CPU profiles); each cap is still a hard limit.
 */
#include "ingester.h"

void ing_opts_default(ing_opts_t *o)
{
    *o = (ing_opts_t){0};
    lc_pprof_limits_default(&o->limits);
    o->max_label_names = 30;
    o->max_label_name_bytes = 1024;
    o->max_label_value_bytes = 2048;
    o->partitions = 1;
}
