/*
 * opts.c — the querier's defaults (Pyroscope's query-frontend values).
 */
#include "querier.h"

void qry_opts_default(qry_opts_t *o)
{
    *o = (qry_opts_t){0};
    o->max_nodes_default = 8192;
    o->max_nodes_max = 1048576;
}
