/*
 * adhoc.h — adhocprofiles.v1.AdHocProfileService: a user uploads a profile
 * file and views it as a flame graph, apart from the ingested data (nothing
 * of it reaches the store, series or queries).
 *
 * Where they live: in this process's memory, per tenant, bounded. An ad-hoc
 * profile is a viewing aid for one person (Grafana's "upload a file" view),
 * not data the service acknowledged as ingested, so it is not worth a disk
 * format, a migration path or a second durability story; a restart forgets
 * them and List says so by being empty. Bounds: ADHOC_MAX_PROFILES and
 * ADHOC_MAX_BYTES per tenant and ADHOC_MAX_TOTAL_BYTES for the process; an
 * upload past a bound evicts that tenant's (or, for the process bound, every
 * tenant's) oldest uploads first; one file larger than a tenant's byte bound
 * is refused. Formats: pprof (gzipped or not); JFR and folded text are
 * refused with a message saying so.
 *
 * Ownership: the store is owned by the qry_extra_t that created it. Threading:
 * the handlers run on the thread pool; one mutex guards the store, and a
 * profile is copied out under it and decoded outside it.
 */
#ifndef EMBER_ADHOC_H
#define EMBER_ADHOC_H

#include <stdbool.h>

#include "lc/connect.h"
#include "lc/httpd.h"

#define ADHOC_MAX_PROFILES 64              /* per tenant */
#define ADHOC_MAX_BYTES (64u << 20)        /* per tenant, decoded file bytes */
#define ADHOC_MAX_TOTAL_BYTES (512u << 20) /* every tenant */
#define ADHOC_MAX_NAME_BYTES 256           /* longer names are cut */
#define ADHOC_DEFAULT_MAX_NODES 8192       /* flame graph nodes when max_nodes is 0 */

typedef struct qry_adhoc_s qry_adhoc_t;

qry_adhoc_t *qry_adhoc_new(bool multitenancy);
void qry_adhoc_free(qry_adhoc_t *a);
/* Registers Upload, Get, List and Diff (Diff answers unimplemented). a must
 * outlive the server's routes. */
int qry_adhoc_register(qry_adhoc_t *a, lc_httpd_t *srv) LC_MUST_CHECK;

#endif
