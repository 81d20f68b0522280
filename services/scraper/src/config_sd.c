/*
 * config_sd.c — the discovery sections of a scrape job (static_configs,
 * file_sd_configs, dns_sd_configs, kubernetes_sd_configs) and the HTTP client
 * settings (basic_auth, authorization, bearer_token(_file), tls_config, ...),
 * with Prometheus's defaults and validation messages.
 *
 * Each discovery entry gets a `key`, a hash of its settings, so that a reload
 * can keep a running discoverer (and the targets it found) whose settings did
 * not change.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "lc/alloc.h"
#include "lc/utf8.h"

#define MAX_PORT 65535

/* ---------------------------------------------------------------- helpers */

/* Settings hash for the discovery keys: strings separated by 0xff. */
typedef struct key_hasher_s {
    lc_buf_t buf;
} key_hasher_t;

static void kh_add(key_hasher_t *h, const char *s)
{
    if (lc_buf_puts(&h->buf, s ? s : "\x01") || lc_buf_putc(&h->buf, (char)0xff))
        abort(); /* unlimited buffer */
}

static void kh_num(key_hasher_t *h, int64_t v)
{
    char num[24];
    snprintf(num, sizeof(num), "%lld", (long long)v);
    kh_add(h, num);
}

static uint64_t kh_finish(key_hasher_t *h)
{
    uint64_t k = lc_hash64(h->buf.data, h->buf.len, 0x5c7a9e);
    lc_buf_fini(&h->buf);
    return k;
}

/* ---------------------------------------------------------------- labels and groups */

int scr_config_labels(scr_yaml_t *y, yaml_node_t *n, const char *field, lc_labels_t *out)
{
    if (scr_yaml_mapping(y, n, field) || scr_yaml_null(n))
        return scr_yaml_null(n) ? 0 : -1;
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = scr_yaml_get(y, p->key);
        yaml_node_t *vn = scr_yaml_get(y, p->value);
        const char *name = scr_yaml_scalar(kn);
        const char *value = scr_yaml_scalar(vn);
        if (!name || !lc_label_name_is_legacy(name))
            return scr_yaml_fail(y, kn, field, "\"%.100s\" is not a valid label name",
                                 name ? name : "");
        if (!value)
            return scr_yaml_fail(y, vn, field, "the value of label %s must be a string", name);
        if (!lc_utf8_valid_str(value))
            return scr_yaml_fail(y, vn, field, "the value of label %s is not valid UTF-8", name);
        if (lc_labels_get(out, name))
            return scr_yaml_fail(y, kn, field, "label %s is set twice", name);
        lc_labels_add(out, name, scr_yaml_null(vn) ? "" : value);
    }
    return 0;
}

void scr_group_fini(scr_group_t *g)
{
    lc_free(g->source);
    lc_labels_fini(&g->labels);
    for (size_t i = 0; i < g->n_targets; i++)
        lc_labels_fini(&g->targets[i]);
    lc_free(g->targets);
    memset(g, 0, sizeof(*g));
}

static int g_targets(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_group_t *g = t;
    char **addrs = NULL;
    size_t n_addrs = 0;
    int rc = scr_yaml_strings(y, n, "targets", &addrs, &n_addrs);
    if (rc == 0) {
        g->targets = lc_xcalloc(n_addrs ? n_addrs : 1, sizeof(*g->targets));
        for (size_t i = 0; i < n_addrs; i++) {
            lc_labels_init(&g->targets[i]);
            lc_labels_add(&g->targets[i], "__address__", addrs[i]);
        }
        g->n_targets = n_addrs;
    }
    scr_strings_free(addrs, n_addrs);
    return rc;
}

static int g_labels(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_config_labels(y, n, "labels", &((scr_group_t *)t)->labels);
}

int scr_config_groups(scr_yaml_t *y, yaml_node_t *n, const char *field, const char *source_prefix,
                      scr_group_t **groups, size_t *n_groups)
{
    static const scr_yaml_key_t keys[] = {{"targets", g_targets}, {"labels", g_labels}};
    if (scr_yaml_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE || scr_yaml_len(n) > SCR_CONFIG_MAX_LIST)
        return scr_yaml_fail(y, n, field, "expected a list of {targets, labels} groups");
    size_t count = scr_yaml_len(n);
    scr_group_t *v = lc_xcalloc(*n_groups + count + 1, sizeof(*v));
    if (*n_groups)
        memcpy(v, *groups, *n_groups * sizeof(*v));
    lc_free(*groups);
    *groups = v;
    scr_yaml_table_t table = {keys, LC_ARRAY_LEN(keys), NULL};
    for (size_t i = 0; i < count; i++) {
        scr_group_t *g = &v[(*n_groups)++];
        table.target = g;
        char source[256];
        snprintf(source, sizeof(source), "%s%zu", source_prefix, i);
        g->source = lc_xstrdup(source);
        lc_labels_init(&g->labels);
        yaml_node_t *item = scr_yaml_get(y, n->data.sequence.items.start[i]);
        if (scr_yaml_null(item))
            return scr_yaml_fail(y, item, field, "empty or null target group");
        if (scr_yaml_fields(y, item, field, &table, 1))
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- HTTP client */

void scr_client_fini(scr_client_t *c)
{
    char **strings[] = {&c->username,
                        &c->username_file,
                        &c->password,
                        &c->password_file,
                        &c->auth_type,
                        &c->credentials,
                        &c->credentials_file,
                        &c->ca_file,
                        &c->cert_file,
                        &c->key_file,
                        &c->ca,
                        &c->cert,
                        &c->key,
                        &c->server_name,
                        &c->proxy_url};
    for (size_t i = 0; i < LC_ARRAY_LEN(strings); i++) {
        lc_free(*strings[i]);
        *strings[i] = NULL;
    }
}

static int ba_username(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "basic_auth.username", &((scr_client_t *)t)->username);
}
static int ba_username_file(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "basic_auth.username_file", &((scr_client_t *)t)->username_file);
}
static int ba_password(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "basic_auth.password", &((scr_client_t *)t)->password);
}
static int ba_password_file(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "basic_auth.password_file", &((scr_client_t *)t)->password_file);
}

static int c_basic_auth(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    static const scr_yaml_key_t keys[] = {{"username", ba_username},
                                          {"username_file", ba_username_file},
                                          {"password", ba_password},
                                          {"password_file", ba_password_file}};
    scr_client_t *c = t;
    c->basic_auth = !scr_yaml_null(n);
    scr_yaml_table_t table = {keys, LC_ARRAY_LEN(keys), c};
    return scr_yaml_fields(y, n, "basic_auth", &table, 1);
}

static int au_type(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "authorization.type", &((scr_client_t *)t)->auth_type);
}
static int au_credentials(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "authorization.credentials", &((scr_client_t *)t)->credentials);
}
static int au_credentials_file(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "authorization.credentials_file",
                           &((scr_client_t *)t)->credentials_file);
}

/* Marks the authorization section as present even when it sets no field. */
#define AUTH_PRESENT_SENTINEL "\x01"

static int c_authorization(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    static const scr_yaml_key_t keys[] = {{"type", au_type},
                                          {"credentials", au_credentials},
                                          {"credentials_file", au_credentials_file}};
    scr_client_t *c = t;
    if (scr_yaml_null(n))
        return 0;
    if (c->credentials || c->credentials_file)
        return scr_yaml_fail(y, n, "authorization",
                             "authorization is not compatible with bearer_token & "
                             "bearer_token_file");
    scr_yaml_table_t table = {keys, LC_ARRAY_LEN(keys), c};
    if (scr_yaml_fields(y, n, "authorization", &table, 1))
        return -1;
    if (!c->auth_type)
        c->auth_type = lc_xstrdup("Bearer");
    return 0;
}

static int c_bearer_token(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_client_t *c = t;
    if (c->auth_type)
        return scr_yaml_fail(y, n, "bearer_token",
                             "authorization is not compatible with bearer_token & "
                             "bearer_token_file");
    if (c->credentials_file)
        return scr_yaml_fail(y, n, "bearer_token",
                             "at most one of bearer_token & bearer_token_file must be "
                             "configured");
    return scr_yaml_string(y, n, "bearer_token", &c->credentials);
}

static int c_bearer_token_file(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_client_t *c = t;
    if (c->auth_type)
        return scr_yaml_fail(y, n, "bearer_token_file",
                             "authorization is not compatible with bearer_token & "
                             "bearer_token_file");
    if (c->credentials)
        return scr_yaml_fail(y, n, "bearer_token_file",
                             "at most one of bearer_token & bearer_token_file must be "
                             "configured");
    return scr_yaml_string(y, n, "bearer_token_file", &c->credentials_file);
}

static int tls_ca_file(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "tls_config.ca_file", &((scr_client_t *)t)->ca_file);
}
static int tls_cert_file(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "tls_config.cert_file", &((scr_client_t *)t)->cert_file);
}
static int tls_key_file(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "tls_config.key_file", &((scr_client_t *)t)->key_file);
}
static int tls_ca(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "tls_config.ca", &((scr_client_t *)t)->ca);
}
static int tls_cert(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "tls_config.cert", &((scr_client_t *)t)->cert);
}
static int tls_key(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "tls_config.key", &((scr_client_t *)t)->key);
}
static int tls_server_name(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "tls_config.server_name", &((scr_client_t *)t)->server_name);
}
static int tls_insecure(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_bool(y, n, "tls_config.insecure_skip_verify",
                         &((scr_client_t *)t)->insecure_skip_verify);
}

static int tls_min_version(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    static const char *const names[] = {"TLS10", "TLS11", "TLS12", "TLS13"};
    const char *s = scr_yaml_scalar(n);
    for (size_t i = 0; s && i < LC_ARRAY_LEN(names); i++) {
        if (strcmp(s, names[i]) == 0) {
            ((scr_client_t *)t)->min_tls = 10 + (int)i;
            return 0;
        }
    }
    return scr_yaml_fail(y, n, "tls_config.min_version",
                         "unknown TLS version \"%.16s\" (TLS10, TLS11, TLS12 or TLS13)",
                         s ? s : "");
}

static int c_tls_config(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    static const scr_yaml_key_t keys[] = {
        {"ca_file", tls_ca_file},
        {"cert_file", tls_cert_file},
        {"key_file", tls_key_file},
        {"ca", tls_ca},
        {"cert", tls_cert},
        {"key", tls_key},
        {"server_name", tls_server_name},
        {"insecure_skip_verify", tls_insecure},
        {"min_version", tls_min_version},
    };
    scr_yaml_table_t table = {keys, LC_ARRAY_LEN(keys), t};
    return scr_yaml_fields(y, n, "tls_config", &table, 1);
}

static int c_proxy_url(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "proxy_url", &((scr_client_t *)t)->proxy_url);
}
static int c_follow_redirects(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_bool(y, n, "follow_redirects", &((scr_client_t *)t)->follow_redirects);
}
static int c_enable_http2(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_bool(y, n, "enable_http2", &((scr_client_t *)t)->enable_http2);
}

const scr_yaml_key_t scr_client_keys[] = {
    {"basic_auth", c_basic_auth},
    {"authorization", c_authorization},
    {"bearer_token", c_bearer_token},
    {"bearer_token_file", c_bearer_token_file},
    {"tls_config", c_tls_config},
    {"proxy_url", c_proxy_url},
    {"follow_redirects", c_follow_redirects},
    {"enable_http2", c_enable_http2},
};
const size_t scr_n_client_keys = LC_ARRAY_LEN(scr_client_keys);

static bool set(const char *s)
{
    return s && s[0];
}

int scr_config_client_check(scr_yaml_t *y, const scr_client_t *c)
{
    bool bearer = !c->auth_type && (set(c->credentials) || set(c->credentials_file));
    if (c->basic_auth && (c->auth_type || bearer))
        return scr_yaml_fail(y, NULL, c->auth_type ? "authorization" : "bearer_token",
                             "at most one of basic_auth, oauth2, bearer_token & "
                             "bearer_token_file must be configured");
    if (c->basic_auth && set(c->username) && set(c->username_file))
        return scr_yaml_fail(y, NULL, "basic_auth",
                             "at most one of basic_auth username & username_file must be "
                             "configured");
    if (c->basic_auth && set(c->password) && set(c->password_file))
        return scr_yaml_fail(y, NULL, "basic_auth",
                             "at most one of basic_auth password & password_file must be "
                             "configured");
    if (c->auth_type && strcasecmp(c->auth_type, "basic") == 0)
        return scr_yaml_fail(y, NULL, "authorization",
                             "authorization type cannot be set to \"basic\", use \"basic_auth\" "
                             "instead");
    if (c->auth_type && set(c->credentials) && set(c->credentials_file))
        return scr_yaml_fail(y, NULL, "authorization",
                             "at most one of authorization credentials & credentials_file must "
                             "be configured");
    if ((set(c->cert_file) || set(c->cert)) != (set(c->key_file) || set(c->key)))
        return scr_yaml_fail(y, NULL, "tls_config",
                             "a client certificate needs both a certificate and a key");
    if ((set(c->ca) && set(c->ca_file)) || (set(c->cert) && set(c->cert_file)) ||
        (set(c->key) && set(c->key_file)))
        return scr_yaml_fail(y, NULL, "tls_config",
                             "at most one of ca & ca_file, cert & cert_file, key & key_file "
                             "must be configured");
    if (c->proxy_url && strncmp(c->proxy_url, "http://", 7) != 0 &&
        strncmp(c->proxy_url, "https://", 8) != 0 && strncmp(c->proxy_url, "socks5://", 9) != 0)
        return scr_yaml_fail(y, NULL, "proxy_url", "unsupported proxy URL \"%.100s\"",
                             c->proxy_url);
    return 0;
}

static void kh_client(key_hasher_t *h, const scr_client_t *c)
{
    const char *strings[] = {c->username,
                             c->username_file,
                             c->password,
                             c->password_file,
                             c->auth_type,
                             c->credentials,
                             c->credentials_file,
                             c->ca_file,
                             c->cert_file,
                             c->key_file,
                             c->ca,
                             c->cert,
                             c->key,
                             c->server_name,
                             c->proxy_url};
    for (size_t i = 0; i < LC_ARRAY_LEN(strings); i++)
        kh_add(h, strings[i]);
    kh_num(h, c->basic_auth << 3 | c->insecure_skip_verify << 2 | c->follow_redirects << 1 |
                  c->enable_http2);
    kh_num(h, c->min_tls);
}

/* ---------------------------------------------------------------- static_configs */

int scr_config_static(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_job_t *job = t;
    return scr_config_groups(y, n, "static_configs", "static/", &job->static_groups,
                             &job->n_static);
}

/* ---------------------------------------------------------------- file_sd_configs */

/* Prometheus: `^[^*]*(\*[^/]*)?\.(json|yml|yaml|JSON|YML|YAML)$`. */
static bool valid_file_pattern(const char *s)
{
    const char *star = strchr(s, '*');
    if (star && (strchr(star + 1, '*') || strchr(star, '/')))
        return false;
    const char *dot = strrchr(s, '.');
    if (!dot || (star && dot < star))
        return false;
    static const char *const exts[] = {".json", ".yml", ".yaml", ".JSON", ".YML", ".YAML"};
    for (size_t i = 0; i < LC_ARRAY_LEN(exts); i++)
        if (strcmp(dot, exts[i]) == 0)
            return true;
    return false;
}

static int fsd_files(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_file_sd_t *f = t;
    return scr_yaml_strings(y, n, "file_sd_configs.files", &f->files, &f->n_files);
}

static int fsd_refresh(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_duration(y, n, "file_sd_configs.refresh_interval",
                             &((scr_file_sd_t *)t)->refresh_ns);
}

static int one_file_sd(scr_yaml_t *y, yaml_node_t *n, scr_file_sd_t *f)
{
    static const scr_yaml_key_t keys[] = {{"files", fsd_files}, {"refresh_interval", fsd_refresh}};
    f->refresh_ns = SCR_FILE_SD_REFRESH_NS;
    scr_yaml_table_t table = {keys, LC_ARRAY_LEN(keys), f};
    if (scr_yaml_null(n) || scr_yaml_fields(y, n, "file_sd_configs", &table, 1))
        return scr_yaml_null(n) ? scr_yaml_fail(y, n, "file_sd_configs", "null entry") : -1;
    if (!f->n_files)
        return scr_yaml_fail(y, n, "file_sd_configs.files",
                             "file service discovery config must contain at least one path "
                             "name");
    for (size_t i = 0; i < f->n_files; i++)
        if (!valid_file_pattern(f->files[i]))
            return scr_yaml_fail(y, n, "file_sd_configs.files",
                                 "path name \"%.100s\" is not valid for file discovery (must "
                                 "end in .json, .yml or .yaml, with '*' only in the file name)",
                                 f->files[i]);
    if (f->refresh_ns <= 0)
        return scr_yaml_fail(y, n, "file_sd_configs.refresh_interval", "must be positive");
    key_hasher_t h;
    lc_buf_init(&h.buf, LC_BUF_UNLIMITED);
    kh_add(&h, "file");
    for (size_t i = 0; i < f->n_files; i++)
        kh_add(&h, f->files[i]);
    kh_num(&h, f->refresh_ns);
    f->key = kh_finish(&h);
    return 0;
}

int scr_config_file_sd(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_job_t *job = t;
    if (scr_yaml_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE || scr_yaml_len(n) > SCR_CONFIG_MAX_LIST)
        return scr_yaml_fail(y, n, "file_sd_configs", "expected a list");
    job->file_sd = lc_xcalloc(scr_yaml_len(n) + 1, sizeof(*job->file_sd));
    for (size_t i = 0; i < scr_yaml_len(n); i++) {
        scr_file_sd_t *f = &job->file_sd[job->n_file_sd++];
        if (one_file_sd(y, scr_yaml_get(y, n->data.sequence.items.start[i]), f))
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- dns_sd_configs */

typedef struct dns_parse_s {
    scr_dns_sd_t *d;
    bool port_set;
} dns_parse_t;

static int dsd_names(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_dns_sd_t *d = ((dns_parse_t *)t)->d;
    return scr_yaml_strings(y, n, "dns_sd_configs.names", &d->names, &d->n_names);
}

static int dsd_type(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    static const char *const names[] = {"SRV", "A", "AAAA", "MX", "NS"};
    const char *s = scr_yaml_scalar(n);
    for (size_t i = 0; s && i < LC_ARRAY_LEN(names); i++) {
        if (strcasecmp(s, names[i]) == 0) {
            ((dns_parse_t *)t)->d->type = (scr_dns_type_t)i;
            return 0;
        }
    }
    return scr_yaml_fail(y, n, "dns_sd_configs.type", "invalid DNS-SD records type \"%.16s\"",
                         s ? s : "");
}

static int dsd_port(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    int64_t port;
    if (scr_yaml_int(y, n, "dns_sd_configs.port", 0, MAX_PORT, &port))
        return -1;
    ((dns_parse_t *)t)->d->port = (int)port;
    ((dns_parse_t *)t)->port_set = true;
    return 0;
}

static int dsd_refresh(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_duration(y, n, "dns_sd_configs.refresh_interval",
                             &((dns_parse_t *)t)->d->refresh_ns);
}

static int one_dns_sd(scr_yaml_t *y, yaml_node_t *n, scr_dns_sd_t *d)
{
    static const scr_yaml_key_t keys[] = {{"names", dsd_names},
                                          {"type", dsd_type},
                                          {"port", dsd_port},
                                          {"refresh_interval", dsd_refresh}};
    dns_parse_t dp = {.d = d};
    d->refresh_ns = SCR_DNS_SD_REFRESH_NS;
    scr_yaml_table_t table = {keys, LC_ARRAY_LEN(keys), &dp};
    if (scr_yaml_null(n) || scr_yaml_fields(y, n, "dns_sd_configs", &table, 1))
        return scr_yaml_null(n) ? scr_yaml_fail(y, n, "dns_sd_configs", "null entry") : -1;
    if (!d->n_names)
        return scr_yaml_fail(y, n, "dns_sd_configs.names",
                             "DNS-SD config must contain at least one SRV record name");
    if (d->type != SCR_DNS_SRV && (!dp.port_set || d->port == 0))
        return scr_yaml_fail(y, n, "dns_sd_configs.port",
                             "a port is required in DNS-SD configs for all record types except "
                             "SRV");
    if (d->refresh_ns <= 0)
        return scr_yaml_fail(y, n, "dns_sd_configs.refresh_interval", "must be positive");
    key_hasher_t h;
    lc_buf_init(&h.buf, LC_BUF_UNLIMITED);
    kh_add(&h, "dns");
    for (size_t i = 0; i < d->n_names; i++)
        kh_add(&h, d->names[i]);
    kh_num(&h, d->type);
    kh_num(&h, d->port);
    kh_num(&h, d->refresh_ns);
    d->key = kh_finish(&h);
    return 0;
}

int scr_config_dns_sd(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_job_t *job = t;
    if (scr_yaml_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE || scr_yaml_len(n) > SCR_CONFIG_MAX_LIST)
        return scr_yaml_fail(y, n, "dns_sd_configs", "expected a list");
    job->dns_sd = lc_xcalloc(scr_yaml_len(n) + 1, sizeof(*job->dns_sd));
    for (size_t i = 0; i < scr_yaml_len(n); i++) {
        scr_dns_sd_t *d = &job->dns_sd[job->n_dns_sd++];
        if (one_dns_sd(y, scr_yaml_get(y, n->data.sequence.items.start[i]), d))
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- kubernetes_sd_configs */

typedef struct kube_parse_s {
    scr_kube_sd_t *k;
    char *role;
    bool selector_seen;
} kube_parse_t;

static int ksd_role(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "kubernetes_sd_configs.role", &((kube_parse_t *)t)->role);
}

static int ksd_api_server(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "kubernetes_sd_configs.api_server",
                           &((kube_parse_t *)t)->k->api_server);
}

static int ksd_kubeconfig(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    LC_UNUSED(t);
    return scr_yaml_fail(y, n, "kubernetes_sd_configs.kubeconfig_file",
                         "not supported by ember's scraper: give api_server and credentials, "
                         "or run in the cluster");
}

static int ns_names(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_kube_sd_t *k = t;
    return scr_yaml_strings(y, n, "kubernetes_sd_configs.namespaces.names", &k->namespaces,
                            &k->n_namespaces);
}

static int ns_own(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_bool(y, n, "kubernetes_sd_configs.namespaces.own_namespace",
                         &((scr_kube_sd_t *)t)->own_namespace);
}

static int ksd_namespaces(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    static const scr_yaml_key_t keys[] = {{"names", ns_names}, {"own_namespace", ns_own}};
    scr_yaml_table_t table = {keys, LC_ARRAY_LEN(keys), ((kube_parse_t *)t)->k};
    return scr_yaml_fields(y, n, "kubernetes_sd_configs.namespaces", &table, 1);
}

typedef struct selector_parse_s {
    char *role, *label, *field;
} selector_parse_t;

static int sel_role(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "selectors.role", &((selector_parse_t *)t)->role);
}
static int sel_label(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "selectors.label", &((selector_parse_t *)t)->label);
}
static int sel_field(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    return scr_yaml_string(y, n, "selectors.field", &((selector_parse_t *)t)->field);
}

static int one_selector(scr_yaml_t *y, yaml_node_t *n, kube_parse_t *kp)
{
    static const scr_yaml_key_t keys[] = {
        {"role", sel_role}, {"label", sel_label}, {"field", sel_field}};
    selector_parse_t sp = {0};
    scr_yaml_table_t table = {keys, LC_ARRAY_LEN(keys), &sp};
    int rc = scr_yaml_fields(y, n, "kubernetes_sd_configs.selectors", &table, 1);
    if (!rc && (!sp.role || strcmp(sp.role, "pod") != 0))
        rc = scr_yaml_fail(y, n, "kubernetes_sd_configs.selectors",
                           "pod role supports only pod selectors");
    if (!rc && kp->selector_seen)
        rc =
            scr_yaml_fail(y, n, "kubernetes_sd_configs.selectors", "duplicated selector role: pod");
    if (!rc) {
        kp->selector_seen = true;
        kp->k->label_selector = sp.label;
        kp->k->field_selector = sp.field;
        sp.label = sp.field = NULL;
    }
    lc_free(sp.role);
    lc_free(sp.label);
    lc_free(sp.field);
    return rc;
}

static int ksd_selectors(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    if (scr_yaml_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE)
        return scr_yaml_fail(y, n, "kubernetes_sd_configs.selectors", "expected a list");
    for (size_t i = 0; i < scr_yaml_len(n); i++)
        if (one_selector(y, scr_yaml_get(y, n->data.sequence.items.start[i]), t))
            return -1;
    return 0;
}

static int am_node(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    bool ignored;
    LC_UNUSED(t);
    return scr_yaml_bool(y, n, "kubernetes_sd_configs.attach_metadata.node", &ignored);
}

/* attach_metadata.node adds node labels to pods; accepted, not implemented. */
static int ksd_attach_metadata(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    static const scr_yaml_key_t keys[] = {{"node", am_node}};
    scr_yaml_table_t table = {keys, LC_ARRAY_LEN(keys), t};
    return scr_yaml_fields(y, n, "kubernetes_sd_configs.attach_metadata", &table, 1);
}

static uint64_t kube_key(const scr_kube_sd_t *k)
{
    key_hasher_t h;
    lc_buf_init(&h.buf, LC_BUF_UNLIMITED);
    kh_add(&h, "kube");
    kh_add(&h, k->api_server);
    kh_client(&h, &k->client);
    for (size_t i = 0; i < k->n_namespaces; i++)
        kh_add(&h, k->namespaces[i]);
    kh_num(&h, k->own_namespace);
    kh_add(&h, k->label_selector);
    kh_add(&h, k->field_selector);
    return kh_finish(&h);
}

static int one_kube_sd(scr_yaml_t *y, yaml_node_t *n, scr_kube_sd_t *k)
{
    static const scr_yaml_key_t keys[] = {
        {"role", ksd_role},
        {"api_server", ksd_api_server},
        {"kubeconfig_file", ksd_kubeconfig},
        {"namespaces", ksd_namespaces},
        {"selectors", ksd_selectors},
        {"attach_metadata", ksd_attach_metadata},
    };
    kube_parse_t kp = {.k = k};
    scr_yaml_table_t tables[] = {
        {keys, LC_ARRAY_LEN(keys), &kp},
        {scr_client_keys, scr_n_client_keys, &k->client},
    };
    if (scr_yaml_null(n))
        return scr_yaml_fail(y, n, "kubernetes_sd_configs", "null entry");
    int rc = scr_yaml_fields(y, n, "kubernetes_sd_configs", tables, LC_ARRAY_LEN(tables));
    if (!rc && !kp.role)
        rc = scr_yaml_fail(y, n, "kubernetes_sd_configs.role",
                           "role missing (one of: pod, service, endpoints, endpointslice, "
                           "node, ingress)");
    if (!rc && strcmp(kp.role, "pod") != 0)
        rc =
            scr_yaml_fail(y, n, "kubernetes_sd_configs.role",
                          "role \"%.32s\" is not supported by ember's scraper (only pod)", kp.role);
    if (!rc)
        rc = scr_config_client_check(y, &k->client);
    if (!rc && k->api_server && strncmp(k->api_server, "http://", 7) != 0 &&
        strncmp(k->api_server, "https://", 8) != 0)
        rc = scr_yaml_fail(y, n, "kubernetes_sd_configs.api_server",
                           "must be an http:// or https:// URL");
    lc_free(kp.role);
    if (!rc)
        k->key = kube_key(k);
    return rc;
}

int scr_config_kube_sd(scr_yaml_t *y, yaml_node_t *n, void *t)
{
    scr_job_t *job = t;
    if (scr_yaml_null(n))
        return 0;
    if (n->type != YAML_SEQUENCE_NODE || scr_yaml_len(n) > SCR_CONFIG_MAX_LIST)
        return scr_yaml_fail(y, n, "kubernetes_sd_configs", "expected a list");
    job->kube_sd = lc_xcalloc(scr_yaml_len(n) + 1, sizeof(*job->kube_sd));
    for (size_t i = 0; i < scr_yaml_len(n); i++) {
        scr_kube_sd_t *k = &job->kube_sd[job->n_kube_sd++];
        if (one_kube_sd(y, scr_yaml_get(y, n->data.sequence.items.start[i]), k))
            return -1;
    }
    return 0;
}
