/*
 * lc/cfg.h — one declarative table per binary drives flags, EMBER_* environment
 * variables, an optional YAML file and --help.
 *
 * Precedence: default < YAML file (--config.file) < environment < flag.
 * A flag `--http.address=X` (or `--http.address X`) maps to the environment
 * variable EMBER_HTTP_ADDRESS and the YAML path http: {address: X} (a flat key
 * "http.address" is accepted too). Unknown flags and keys are errors.
 * An entry may keep a former name as a deprecated alias: accepted as a flag,
 * an EMBER_* variable and a YAML key alike, it logs a warning (once per
 * process and alias) naming the current one. Both names set the same field:
 * in the environment the current name wins when both are set; flags and
 * file keys apply in order, the last one winning.
 * Threading: call from main before anything else runs.
 */
#ifndef LC_CFG_H
#define LC_CFG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lc/alloc.h"
#include "lc/err.h"

typedef enum {
    LC_CFG_STRING,   /* char* (heap copy, freed by lc_cfg_free) */
    LC_CFG_INT,      /* int64_t */
    LC_CFG_BOOL,     /* bool: true/false/1/0; a bare --flag means true */
    LC_CFG_DURATION, /* int64_t nanoseconds: "90s", "1h30m", "7d", "500ms"; plain number = s */
    LC_CFG_BYTES,    /* int64_t bytes: "4MiB", "512KB", "1GiB" or a plain number */
} lc_cfg_type_t;

typedef struct lc_cfg_entry_s {
    const char *name; /* "http.address" */
    lc_cfg_type_t type;
    size_t offset;    /* offsetof(struct, field) */
    const char *def;  /* default as text; NULL = empty/0 */
    int64_t min, max; /* for INT/DURATION/BYTES when min < max */
    const char *help;
    const char *alias; /* a former name, still accepted (deprecated); NULL = none */
} lc_cfg_entry_t;

/* Fills cfg from the table. Returns 0, 1 if --help was printed (exit 0), or -1
 * with st naming the flag/variable/key at fault. */
int lc_cfg_load(const lc_cfg_entry_t *table, size_t n, void *cfg, int argc, char **argv,
                const char *usage, lc_status_t *st) LC_MUST_CHECK;
void lc_cfg_help(const lc_cfg_entry_t *table, size_t n, const char *usage, FILE *out);
/* Logs the effective configuration in one line. */
void lc_cfg_log(const lc_cfg_entry_t *table, size_t n, const void *cfg);
void lc_cfg_free(const lc_cfg_entry_t *table, size_t n, void *cfg);
/* Writes cfg as YAML into out: one flat key per entry ("http.address: \"x\""), the
 * form --config.file reads back; strings double-quoted, numbers and durations as
 * --help shows them. With base non-NULL only the entries whose value differs from
 * base's. Secrets (password/secret/token in the name) are written "<redacted>".
 * Returns 0 or LC_ETOOBIG (out's cap). */
int lc_cfg_yaml(const lc_cfg_entry_t *table, size_t n, const void *cfg, const void *base,
                lc_buf_t *out) LC_MUST_CHECK;

/* Sets every field to its default, treating cfg as uninitialised. Returns 0 or -1. */
int lc_cfg_defaults(const lc_cfg_entry_t *table, size_t n, void *cfg,
                    lc_status_t *st) LC_MUST_CHECK;
/* Applies one YAML document (len bytes, no NUL needed) over cfg, whose STRING
 * fields must be NULL or heap copies. source names the file in messages. The
 * loader's file step, exposed for the fuzz target. Returns 0 or -1. */
int lc_cfg_load_yaml(const lc_cfg_entry_t *table, size_t n, void *cfg, const char *source,
                     const char *text, size_t len, lc_status_t *st) LC_MUST_CHECK;

int lc_parse_duration(const char *s, int64_t *ns) LC_MUST_CHECK;
int lc_parse_bytes(const char *s, int64_t *bytes) LC_MUST_CHECK;

#endif
