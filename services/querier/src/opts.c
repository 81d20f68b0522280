/*
 * opts.c — the querier's defaults (Pyroscope's query-frontend values, except
 * the time-range limits: ember keeps history and merges fast, so neither the
 * range length nor the look-back is limited unless configured).
 */
#include "querier.h"

void qry_opts_default(qry_opts_t *o)
{
    *o = (qry_opts_t){0};
    o->max_nodes_default = 8192;
    o->max_nodes_max = 1048576;
    o->max_query_length_ms = 0;   /* Pyroscope: 24 h; ember: unlimited */
    o->max_query_lookback_ms = 0; /* ember keeps history: no look-back clipping */
}
