/*
 * config_yaml.c — small helpers for walking a libyaml document while parsing
 * the scrape config, and Prometheus's duration syntax.
 *
 * The document loader resolves aliases into shared nodes, so a hostile file
 * could make a walk revisit the same nodes exponentially often ("billion
 * laughs") or loop through a self-referencing alias. Every helper that
 * descends counts a visit, and the walk fails past SCR_CONFIG_MAX_NODES; the
 * config's shape is fixed and shallow, so no walk recurses on its own.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "lc/alloc.h"

#define NS_PER_MS INT64_C(1000000)

/* ---------------------------------------------------------------- nodes */

yaml_node_t *scr_yaml_get(scr_yaml_t *y, int id)
{
    y->visits++;
    return yaml_document_get_node(y->doc, id);
}

const char *scr_yaml_scalar(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

bool scr_yaml_null(const yaml_node_t *n)
{
    if (!n)
        return true;
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    const char *s = scr_yaml_scalar(n);
    return !s[0] || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

size_t scr_yaml_len(const yaml_node_t *n)
{
    if (n && n->type == YAML_SEQUENCE_NODE)
        return (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    if (n && n->type == YAML_MAPPING_NODE)
        return (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
    return 0;
}

int scr_yaml_fail(scr_yaml_t *y, const yaml_node_t *n, const char *field, const char *fmt, ...)
{
    char msg[LC_STATUS_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    char line[32] = "";
    if (n)
        snprintf(line, sizeof(line), " (line %zu)", (size_t)n->start_mark.line + 1);
    return lc_status_set(y->st, LC_CODE_INVALID_ARGUMENT, "%s: %s%s%s%s%s%s", y->source, y->where,
                         y->where[0] ? ": " : "", field ? field : "", field ? ": " : "", msg, line);
}

static int too_complex(scr_yaml_t *y, const yaml_node_t *n, const char *field)
{
    return scr_yaml_fail(y, n, field, "the document is too large or too deeply aliased");
}

int scr_yaml_mapping(scr_yaml_t *y, yaml_node_t *n, const char *field)
{
    if (y->visits > SCR_CONFIG_MAX_NODES)
        return too_complex(y, n, field);
    if (scr_yaml_null(n))
        return 0;
    if (n->type != YAML_MAPPING_NODE)
        return scr_yaml_fail(y, n, field, "expected a mapping");
    if (scr_yaml_len(n) > SCR_CONFIG_MAX_LIST)
        return scr_yaml_fail(y, n, field, "more than %d entries", SCR_CONFIG_MAX_LIST);
    return 0;
}

/* ---------------------------------------------------------------- scalars */

int scr_yaml_string(scr_yaml_t *y, yaml_node_t *n, const char *field, char **out)
{
    const char *s = scr_yaml_scalar(n);
    if (!s)
        return scr_yaml_fail(y, n, field, "expected a string");
    lc_free(*out);
    *out = scr_yaml_null(n) ? lc_xstrdup("") : lc_xstrdup(s);
    return 0;
}

int scr_yaml_bool(scr_yaml_t *y, yaml_node_t *n, const char *field, bool *out)
{
    const char *s = scr_yaml_scalar(n);
    if (s && (strcmp(s, "true") == 0 || strcmp(s, "True") == 0 || strcmp(s, "TRUE") == 0)) {
        *out = true;
        return 0;
    }
    if (s && (strcmp(s, "false") == 0 || strcmp(s, "False") == 0 || strcmp(s, "FALSE") == 0)) {
        *out = false;
        return 0;
    }
    return scr_yaml_fail(y, n, field, "expected true or false, got \"%.64s\"", s ? s : "");
}

int scr_yaml_int(scr_yaml_t *y, yaml_node_t *n, const char *field, int64_t min, int64_t max,
                 int64_t *out)
{
    const char *s = scr_yaml_scalar(n);
    char *end = NULL;
    errno = 0;
    long long v = s && *s ? strtoll(s, &end, 10) : 0;
    if (!s || !end || *end || errno)
        return scr_yaml_fail(y, n, field, "expected an integer, got \"%.64s\"", s ? s : "");
    if (v < min || v > max)
        return scr_yaml_fail(y, n, field, "%lld is out of range [%lld, %lld]", v, (long long)min,
                             (long long)max);
    *out = v;
    return 0;
}

int scr_yaml_duration(scr_yaml_t *y, yaml_node_t *n, const char *field, int64_t *out)
{
    const char *s = scr_yaml_scalar(n);
    if (!s || scr_parse_duration(s, out) != 0)
        return scr_yaml_fail(y, n, field,
                             "not a valid duration string: \"%.64s\" (want e.g. 10s, 1m30s)",
                             s ? s : "");
    return 0;
}

void scr_strings_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        lc_free(v[i]);
    lc_free(v);
}

int scr_yaml_strings(scr_yaml_t *y, yaml_node_t *n, const char *field, char ***out, size_t *n_out)
{
    if (scr_yaml_null(n))
        return 0;
    if (y->visits > SCR_CONFIG_MAX_NODES)
        return too_complex(y, n, field);
    if (n->type != YAML_SEQUENCE_NODE)
        return scr_yaml_fail(y, n, field, "expected a list of strings");
    size_t count = scr_yaml_len(n);
    if (count > SCR_CONFIG_MAX_LIST)
        return scr_yaml_fail(y, n, field, "more than %d entries", SCR_CONFIG_MAX_LIST);
    char **v = lc_xcalloc(*n_out + count + 1, sizeof(char *));
    for (size_t i = 0; i < *n_out; i++)
        v[i] = (*out)[i];
    lc_free(*out);
    *out = v;
    for (size_t i = 0; i < count; i++) {
        yaml_node_t *item = scr_yaml_get(y, n->data.sequence.items.start[i]);
        const char *s = scr_yaml_scalar(item);
        if (!s || scr_yaml_null(item))
            return scr_yaml_fail(y, item, field, "expected a string in the list");
        v[(*n_out)++] = lc_xstrdup(s);
    }
    return 0;
}

/* ---------------------------------------------------------------- mappings */

static const scr_yaml_key_t *find_key(const scr_yaml_table_t *tables, size_t n_tables,
                                      const char *key, void **target)
{
    for (size_t t = 0; t < n_tables; t++) {
        for (size_t i = 0; i < tables[t].n_keys; i++) {
            if (strcmp(tables[t].keys[i].key, key) == 0) {
                *target = tables[t].target;
                return &tables[t].keys[i];
            }
        }
    }
    return NULL;
}

/* Go's YAML decoder refuses a key given twice in one mapping; so do we (every
 * handler may then assume it runs once). Only keys already accepted are
 * compared, so the scan is bounded by the size of the key tables. */
static bool key_seen_before(scr_yaml_t *y, yaml_node_t *map, yaml_node_pair_t *p, const char *key)
{
    for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
        const char *k = scr_yaml_scalar(scr_yaml_get(y, q->key));
        if (k && strcmp(k, key) == 0)
            return true;
    }
    return false;
}

int scr_yaml_fields(scr_yaml_t *y, yaml_node_t *map, const char *field,
                    const scr_yaml_table_t *tables, size_t n_tables)
{
    if (scr_yaml_mapping(y, map, field))
        return -1;
    if (scr_yaml_null(map))
        return 0;
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *kn = scr_yaml_get(y, p->key);
        yaml_node_t *vn = scr_yaml_get(y, p->value);
        const char *key = scr_yaml_scalar(kn);
        if (!key)
            return scr_yaml_fail(y, kn, field, "keys must be strings");
        if (key_seen_before(y, map, p, key))
            return scr_yaml_fail(y, kn, field, "field \"%.40s\" is set twice", key);
        void *target = NULL;
        const scr_yaml_key_t *k = find_key(tables, n_tables, key, &target);
        if (!k) {
            char full[96];
            snprintf(full, sizeof(full), "%s%s%.40s", field ? field : "", field ? "." : "", key);
            return scr_yaml_fail(y, kn, full, "unknown field");
        }
        if (k->parse(y, vn, target))
            return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- durations */

/* Prometheus model.ParseDuration: units in decreasing order, each at most once. */
int scr_parse_duration(const char *s, int64_t *ns)
{
    static const struct {
        const char *unit;
        int64_t ns;
    } units[] = {
        {"y", 365 * 24 * 3600 * SCR_NS_PER_S},
        {"w", 7 * 24 * 3600 * SCR_NS_PER_S},
        {"d", 24 * 3600 * SCR_NS_PER_S},
        {"h", 3600 * SCR_NS_PER_S},
        {"m", 60 * SCR_NS_PER_S},
        {"s", SCR_NS_PER_S},
        {"ms", NS_PER_MS},
    };
    if (strcmp(s, "0") == 0) {
        *ns = 0;
        return 0;
    }
    if (!*s)
        return LC_EINPUT;
    int64_t total = 0;
    size_t next_unit = 0;
    const char *p = s;
    while (*p) {
        if (!isdigit((unsigned char)*p))
            return LC_EINPUT;
        errno = 0;
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno)
            return LC_EINPUT;
        size_t len = 0;
        while (isalpha((unsigned char)end[len]))
            len++;
        size_t u = next_unit;
        while (u < LC_ARRAY_LEN(units) &&
               !(strlen(units[u].unit) == len && strncmp(units[u].unit, end, len) == 0))
            u++;
        if (u == LC_ARRAY_LEN(units) || v > (unsigned long long)(INT64_MAX / units[u].ns))
            return LC_EINPUT;
        int64_t add = (int64_t)v * units[u].ns;
        if (total > INT64_MAX - add)
            return LC_EINPUT;
        total += add;
        next_unit = u + 1;
        p = end + len;
    }
    *ns = total;
    return 0;
}

void scr_format_duration(int64_t ns, char *out, size_t len)
{
    if (ns <= 0) {
        snprintf(out, len, "0s");
        return;
    }
    static const struct {
        const char *unit;
        int64_t ns;
    } units[] = {
        {"h", 3600 * SCR_NS_PER_S},
        {"m", 60 * SCR_NS_PER_S},
        {"s", SCR_NS_PER_S},
        {"ms", NS_PER_MS},
    };
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < LC_ARRAY_LEN(units) && used < len; i++) {
        int64_t n = ns / units[i].ns;
        ns %= units[i].ns;
        if (n > 0) {
            int w = snprintf(out + used, len - used, "%lld%s", (long long)n, units[i].unit);
            used += w > 0 ? (size_t)w : 0;
        }
    }
}
