/*
 * load_run.h — one ember-load run: discovery, query rounds, the write load,
 * the own HTTP server (/metrics, /emberquery) and the final summary, all on
 * one libuv loop with libcurl's multi interface (the scraper's HTTP client).
 *
 * ld_run blocks until the run is over (rounds or duration done, or a signal;
 * with --serve-after until a signal after that) and returns the exit status:
 * 0 if every request succeeded, 1 if any failed or the run could not start.
 */
#ifndef EMBER_LOAD_RUN_H
#define EMBER_LOAD_RUN_H

#include "load_config.h"

int ld_run(const ld_config_t *cfg);

#endif
