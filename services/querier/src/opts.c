/*
 * opts.c — the querier's defaults (Pyroscope's query-frontend values, except
 * the look-back: see qry_opts_t).
 */
#include "querier.h"

void qry_opts_default(qry_opts_t *o)
{
    *o = (qry_opts_t){0};
    o->max_nodes_default = 8192;
    o->max_nodes_max = 1048576;
    o->max_query_length_ms = 24LL * 3600 * 1000;
    o->max_query_lookback_ms = 0; /* ember keeps history: no look-back clipping */
}
