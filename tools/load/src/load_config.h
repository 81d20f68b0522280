/*
 * load_config.h — ember-load's command line: the settings of one run, parsed
 * from argv without side effects (no I/O, no globals) so the unit test can
 * drive it.
 *
 * Ownership: ld_config_parse fills a caller-owned ld_config_t whose strings
 * and arrays are heap copies; ld_config_free releases them.
 */
#ifndef EMBER_LOAD_CONFIG_H
#define EMBER_LOAD_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LD_MAX_RANGES 16
#define LD_MAX_LIST 64      /* types, selectors, labels, files given by hand */
#define LD_MAX_CLIENTS 1024 /* concurrent query clients */

typedef enum { LD_CODEC_PROTO = 0, LD_CODEC_JSON = 1 } ld_codec_t;

/* One query range: its text as given ("15m", "7d"), the metric label, and ms. */
typedef struct ld_range_s {
    char *name;
    int64_t ms;
} ld_range_t;

/* One file of the write load and the __name__ its profiles are pushed with. */
typedef struct ld_write_file_s {
    char *metric_name;
    char *path;
} ld_write_file_t;

typedef struct ld_config_s {
    char *target;       /* base URL, no trailing slash */
    char *write_target; /* where pushes go; NULL = target (ember-querier has no Push) */
    char *http_address; /* HOST:PORT of ember-load's own server; "" = none */
    unsigned clients;
    unsigned rounds;     /* 0 = until --duration or a signal */
    int64_t duration_ms; /* 0 = no limit */
    int64_t interval_ms; /* from round start to the next round's start */
    int64_t timeout_ms;  /* per request */
    ld_range_t ranges[LD_MAX_RANGES];
    size_t n_ranges;
    char **types; /* empty = discover */
    size_t n_types;
    char **selectors; /* "all", "auto" or `{k="v"}` */
    size_t n_selectors;
    char **labels; /* label names for LabelValues; "auto" = discovered */
    size_t n_labels;
    unsigned methods; /* bit per ld_method_t */
    ld_codec_t codec;
    double write_rate; /* profiles per second; 0 = no write load */
    ld_write_file_t *write_files;
    size_t n_write_files;
    unsigned write_series; /* distinct `series` label values the writes rotate over */
    char *tenant;          /* X-Scope-OrgID; NULL = none */
    char *token;           /* bearer token; NULL = none */
    bool serve_after;      /* keep serving /metrics and /emberquery after the run */
    bool help;
} ld_config_t;

/* Parses argv[1..argc). Returns 0, or -1 with a message in err. */
int ld_config_parse(int argc, char **argv, ld_config_t *cfg, char *err, size_t err_len);
void ld_config_free(ld_config_t *cfg);
/* The --help text. */
const char *ld_config_help(void);

/* A duration as Go writes them ("15m", "1h30m", "500ms") plus d and w; > 0.
 * Returns 0 and the milliseconds, or -1. */
int ld_parse_duration_ms(const char *s, int64_t *out_ms);

#endif
