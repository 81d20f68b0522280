/*
 * config.h — the scraper's configuration: a parca.yaml-style `scrape_configs`
 * list (parca.md §1), parsed, defaulted and validated in one go.
 *
 * A loaded scr_config_t is immutable and owned by whoever loaded it; the
 * scraper swaps whole configs on reload. Every error names the job (or the
 * list index when the job has no name yet), the field and the YAML line.
 * Threading: pure; parsing may run on any thread.
 */
#ifndef EMBER_SCRAPER_CONFIG_H
#define EMBER_SCRAPER_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include "lc/err.h"
#include "lc/labels.h"
#include "relabel.h"

#define SCR_NS_PER_S INT64_C(1000000000)
#define SCR_DEFAULT_INTERVAL_NS (10 * SCR_NS_PER_S) /* Parca's scrape_interval */
#define SCR_TIMEOUT_EXTRA_NS (3 * SCR_NS_PER_S)     /* default timeout = interval + 3s */
#define SCR_MIN_CPU_TIMEOUT_NS (2 * SCR_NS_PER_S)   /* process_cpu needs at least this */
#define SCR_FILE_SD_REFRESH_NS (300 * SCR_NS_PER_S) /* Prometheus: 5m */
#define SCR_DNS_SD_REFRESH_NS (30 * SCR_NS_PER_S)   /* Prometheus: 30s */

/* Caps on what one config file may declare. */
#define SCR_CONFIG_MAX_BYTES ((size_t)4 << 20)
#define SCR_CONFIG_MAX_NODES ((size_t)1 << 20) /* YAML nodes visited (alias bombs) */
#define SCR_CONFIG_MAX_LIST 100000             /* items in any one list or map */

typedef struct scr_value_type_s {
    char *type;
    char *unit;
} scr_value_type_t;

/* One pprof_config entry after merging with the defaults (parca.md §1.3). */
typedef struct scr_profile_s {
    char *name; /* __name__ of what it produces: "memory", "fgprof" */
    char *path; /* HTTP path, path_prefix already joined */
    bool enabled;
    bool delta;             /* the target computes the delta: add ?seconds=N */
    int64_t seconds;        /* N when set; 0 = the scrape interval in whole seconds */
    scr_value_type_t *keep; /* keep_sample_type: other sample types are removed */
    size_t n_keep;
    bool cumulative; /* the scraper subtracts the previous scrape */
} scr_profile_t;

typedef struct scr_param_s {
    char *key;
    char **values;
    size_t n_values;
} scr_param_t;

/* HTTP client settings shared by scrapes and Kubernetes discovery
 * (prometheus/common HTTPClientConfig, the parts ember supports). */
typedef struct scr_client_s {
    char *username, *username_file;
    char *password, *password_file;
    bool basic_auth;
    char *auth_type; /* "Bearer" unless set; NULL without authorization */
    char *credentials, *credentials_file;
    char *ca_file, *cert_file, *key_file;
    char *ca, *cert, *key; /* inline PEM */
    char *server_name;
    bool insecure_skip_verify;
    int min_tls; /* 0 = library default, else 10..13 (TLS 1.0 .. 1.3) */
    char *proxy_url;
    bool follow_redirects;
    bool enable_http2;
} scr_client_t;

/* A target group: what one discovery source reports under one `source` id. */
typedef struct scr_group_s {
    char *source;
    lc_labels_t labels;   /* group labels; targets' own labels win */
    lc_labels_t *targets; /* each has at least __address__ */
    size_t n_targets;
} scr_group_t;

typedef struct scr_file_sd_s {
    char **files; /* paths; the last element may hold a '*' glob */
    size_t n_files;
    int64_t refresh_ns;
    uint64_t key; /* identity of the settings, to keep it across reloads */
} scr_file_sd_t;

typedef enum { SCR_DNS_SRV, SCR_DNS_A, SCR_DNS_AAAA, SCR_DNS_MX, SCR_DNS_NS } scr_dns_type_t;

typedef struct scr_dns_sd_s {
    char **names;
    size_t n_names;
    scr_dns_type_t type;
    int port; /* required unless SRV */
    int64_t refresh_ns;
    uint64_t key;
} scr_dns_sd_t;

typedef struct scr_kube_sd_s {
    char *api_server; /* NULL = in-cluster (service account) */
    scr_client_t client;
    char **namespaces; /* empty = all namespaces (unless own_namespace) */
    size_t n_namespaces;
    bool own_namespace;
    char *label_selector, *field_selector;
    uint64_t key;
} scr_kube_sd_t;

typedef struct scr_job_s {
    char *name;
    int64_t interval_ns;
    int64_t timeout_ns;
    char *scheme; /* "http" or "https" */
    scr_param_t *params;
    size_t n_params;
    scr_profile_t *profiles; /* defaults first, then custom entries in file order */
    size_t n_profiles;
    scr_relabel_t relabel;
    scr_client_t client;
    scr_group_t *static_groups;
    size_t n_static;
    scr_file_sd_t *file_sd;
    size_t n_file_sd;
    scr_dns_sd_t *dns_sd;
    size_t n_dns_sd;
    scr_kube_sd_t *kube_sd;
    size_t n_kube_sd;
    bool normalized_addresses; /* accepted for Parca compatibility; no effect */
} scr_job_t;

typedef struct scr_config_s {
    scr_job_t *jobs;
    size_t n_jobs;
} scr_config_t;

/* Parses one YAML document (len bytes). source names the file in messages. */
int scr_config_parse(const char *text, size_t len, const char *source, scr_config_t **out,
                     lc_status_t *st) LC_MUST_CHECK;
/* Reads and parses a file (capped at SCR_CONFIG_MAX_BYTES). */
int scr_config_load(const char *path, scr_config_t **out, lc_status_t *st) LC_MUST_CHECK;
void scr_config_free(scr_config_t *c);

/* Prometheus durations: "1h30m", "10s", "500ms", "2d", "1w", "1y", "0". */
int scr_parse_duration(const char *s, int64_t *ns) LC_MUST_CHECK;
/* "90s", "1m30s": the shortest Prometheus spelling (for /targets). */
void scr_format_duration(int64_t ns, char *out, size_t len);

void scr_group_fini(scr_group_t *g);
void scr_client_fini(scr_client_t *c);

/* ---- YAML walking, shared by the config files (config_yaml.c) ---- */
typedef struct scr_yaml_s {
    yaml_document_t *doc;
    lc_status_t *st;
    const char *source; /* file name */
    char where[160];    /* `job "api"` or `scrape_configs[3]` */
    size_t visits;
} scr_yaml_t;

yaml_node_t *scr_yaml_get(scr_yaml_t *y, int id);
bool scr_yaml_null(const yaml_node_t *n);
const char *scr_yaml_scalar(const yaml_node_t *n);
size_t scr_yaml_len(const yaml_node_t *n); /* items of a sequence or pairs of a mapping */
/* Formats "<source>: <where>: <field>: <msg> (line N)" into y->st; returns -1. */
int scr_yaml_fail(scr_yaml_t *y, const yaml_node_t *n, const char *field, const char *fmt, ...)
    LC_PRINTF(4, 5);
int scr_yaml_string(scr_yaml_t *y, yaml_node_t *n, const char *field, char **out) LC_MUST_CHECK;
int scr_yaml_bool(scr_yaml_t *y, yaml_node_t *n, const char *field, bool *out) LC_MUST_CHECK;
int scr_yaml_int(scr_yaml_t *y, yaml_node_t *n, const char *field, int64_t min, int64_t max,
                 int64_t *out) LC_MUST_CHECK;
int scr_yaml_duration(scr_yaml_t *y, yaml_node_t *n, const char *field, int64_t *out) LC_MUST_CHECK;
/* A list of strings (null = empty). */
int scr_yaml_strings(scr_yaml_t *y, yaml_node_t *n, const char *field, char ***out,
                     size_t *n_out) LC_MUST_CHECK;
/* A mapping that must be a mapping (null = empty): checks and counts the visit. */
int scr_yaml_mapping(scr_yaml_t *y, yaml_node_t *n, const char *field) LC_MUST_CHECK;
void scr_strings_free(char **v, size_t n);

/* One key of a mapping being parsed: the handler gets the target of the table
 * it came from, and returns 0 or -1 (y->st set). */
typedef struct scr_yaml_key_s {
    const char *key;
    int (*parse)(scr_yaml_t *y, yaml_node_t *value, void *target);
} scr_yaml_key_t;

typedef struct scr_yaml_table_s {
    const scr_yaml_key_t *keys;
    size_t n_keys;
    void *target;
} scr_yaml_table_t;

/* Dispatches every pair of map (null = empty) to the handler of its key in
 * one of the tables; unknown keys are errors naming `field`.key. */
int scr_yaml_fields(scr_yaml_t *y, yaml_node_t *map, const char *field,
                    const scr_yaml_table_t *tables, size_t n_tables) LC_MUST_CHECK;

/* ---- parts of a job (config_sd.c) ---- */
/* HTTP client keys (basic_auth, authorization, bearer_token(_file), tls_config,
 * proxy_url, follow_redirects, enable_http2) for a scr_client_t target. */
extern const scr_yaml_key_t scr_client_keys[];
extern const size_t scr_n_client_keys;
/* prometheus/common's Validate: at most one auth mechanism, and so on. */
int scr_config_client_check(scr_yaml_t *y, const scr_client_t *c) LC_MUST_CHECK;
int scr_config_static(scr_yaml_t *y, yaml_node_t *n, void *job) LC_MUST_CHECK;
int scr_config_file_sd(scr_yaml_t *y, yaml_node_t *n, void *job) LC_MUST_CHECK;
int scr_config_dns_sd(scr_yaml_t *y, yaml_node_t *n, void *job) LC_MUST_CHECK;
int scr_config_kube_sd(scr_yaml_t *y, yaml_node_t *n, void *job) LC_MUST_CHECK;
/* A `labels` mapping of a static or file_sd group: names must be valid. */
int scr_config_labels(scr_yaml_t *y, yaml_node_t *n, const char *field,
                      lc_labels_t *out) LC_MUST_CHECK;
/* Parses a list of target groups ([{targets: [...], labels: {...}}]) as in
 * static_configs and file_sd files; appends to *groups. */
int scr_config_groups(scr_yaml_t *y, yaml_node_t *n, const char *field, const char *source_prefix,
                      scr_group_t **groups, size_t *n_groups) LC_MUST_CHECK;

#endif
