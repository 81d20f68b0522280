/*
 * cfg.c — the table-driven configuration loader behind lc/cfg.h.
 *
 * Sources are applied in precedence order onto one struct: defaults, then the
 * YAML file, then EMBER_* environment variables, then flags. Every value goes
 * through the same parser, so a duration means the same thing in all four
 * places, and every error names the source it came from.
 *
 * Flags are parsed before anything else: --help must work even when the
 * environment or the file is broken, and --config.file must be known before
 * the file step. The YAML file is read with libyaml's event parser rather than
 * its document loader, so aliases are refused outright instead of being
 * expanded (an alias cycle would otherwise recurse forever).
 *
 * A deprecated alias (lc_cfg_entry_t.alias) is looked up only after the
 * current names, in each of the three sources, and logs one warning per
 * process: every source that names it points at the same fix.
 *
 * Sits on alloc (strings and buffers), err (lc_status_t) and log (lc_cfg_log).
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "lc/alloc.h"
#include "lc/cfg.h"
#include "lc/log.h"

#define CFG_ENV_PREFIX "EMBER_"
#define CFG_FILE_KEY "config.file"
#define CFG_FILE_ENV CFG_ENV_PREFIX "CONFIG_FILE"
#define CFG_MAX_FILE_BYTES (1 << 20) /* a config file is small; anything bigger is a mistake */
#define CFG_MAX_YAML_DEPTH 16        /* far deeper than any dotted name we define */
#define CFG_KEY_MAX 256              /* longest dotted key, env name or source label */
#define CFG_WHY_MAX 256              /* one parse-error explanation */
#define CFG_SHOW_MAX 64              /* bytes of a bad value quoted back in errors */
#define CFG_MAX_ALIASES 32           /* deprecated aliases warned about, per process */

#define NS_PER_US INT64_C(1000)
#define NS_PER_MS INT64_C(1000000)
#define NS_PER_S INT64_C(1000000000)
#define NS_PER_MIN (60 * NS_PER_S)
#define NS_PER_HOUR (60 * NS_PER_MIN)
#define NS_PER_DAY (24 * NS_PER_HOUR)
#define NS_PER_WEEK (7 * NS_PER_DAY)

/* A parsed value before it is stored; STRING stays borrowed until store_value. */
typedef union {
    const char *str;
    int64_t i;
    bool b;
} cfg_value_t;

/* One flag from argv, applied after the file and the environment. */
typedef struct {
    const lc_cfg_entry_t *entry; /* NULL for --config.file when the table lacks it */
    const char *value;           /* points into argv */
    bool by_alias;               /* named by entry->alias: errors say so */
} cfg_flag_t;

/* ---- names ---------------------------------------------------------------------------------- */

static const lc_cfg_entry_t *find_entry_n(const lc_cfg_entry_t *table, size_t n, const char *name,
                                          size_t len)
{
    for (size_t i = 0; i < n; i++) {
        if (strncmp(table[i].name, name, len) == 0 && table[i].name[len] == '\0')
            return &table[i];
    }
    return NULL;
}

static const lc_cfg_entry_t *find_entry(const lc_cfg_entry_t *table, size_t n, const char *name)
{
    return find_entry_n(table, n, name, strlen(name));
}

/* The entry whose deprecated alias is name (len bytes), or NULL. */
static const lc_cfg_entry_t *find_alias_n(const lc_cfg_entry_t *table, size_t n, const char *name,
                                          size_t len)
{
    for (size_t i = 0; i < n; i++) {
        const char *alias = table[i].alias;
        if (alias && strncmp(alias, name, len) == 0 && alias[len] == '\0')
            return &table[i];
    }
    return NULL;
}

/* Aliases already warned about: one line per process is enough to say what
 * to rename, however many sources use it (lc_cfg_load runs before threads). */
static const char *warned_aliases[CFG_MAX_ALIASES];
static size_t n_warned_aliases;

static void warn_alias(const lc_cfg_entry_t *e, const char *source)
{
    for (size_t i = 0; i < n_warned_aliases; i++)
        if (strcmp(warned_aliases[i], e->alias) == 0)
            return;
    if (n_warned_aliases < CFG_MAX_ALIASES)
        warned_aliases[n_warned_aliases++] = e->alias;
    LC_LOG_WARN("deprecated setting name, use the new one source=\"%s\" old=%s new=%s", source,
                e->alias, e->name);
}

/* "storage.block-duration" -> "EMBER_STORAGE_BLOCK_DURATION". */
static void env_name(const char *name, char *out, size_t out_len)
{
    size_t prefix = strlen(CFG_ENV_PREFIX);
    LC_ASSERT(prefix + strlen(name) < out_len);
    memcpy(out, CFG_ENV_PREFIX, prefix);
    size_t j = prefix;
    for (const char *p = name; *p; p++)
        out[j++] = (*p == '.' || *p == '-') ? '_' : (char)toupper((unsigned char)*p);
    out[j] = '\0';
}

static void *field_of(const lc_cfg_entry_t *e, void *cfg)
{
    return (char *)cfg + e->offset;
}

static const void *cfield_of(const lc_cfg_entry_t *e, const void *cfg)
{
    return (const char *)cfg + e->offset;
}

static const char *type_name(lc_cfg_type_t t)
{
    switch (t) {
    case LC_CFG_STRING:
        return "string";
    case LC_CFG_INT:
        return "int";
    case LC_CFG_BOOL:
        return "bool";
    case LC_CFG_DURATION:
        return "duration";
    case LC_CFG_BYTES:
        return "bytes";
    }
    return "?";
}

/* ---- number parsing ------------------------------------------------------------------------- */

/* A non-negative decimal "12", "1.5", ".5" or "5." split into its parts;
 * value = whole + frac / scale. Advances *p past the digits. */
typedef struct {
    uint64_t whole, frac, scale;
} decimal_t;

static int parse_decimal(const char **p, decimal_t *d)
{
    const char *s = *p;
    bool digits = false;
    *d = (decimal_t){0, 0, 1};
    for (; *s >= '0' && *s <= '9'; s++, digits = true) {
        if (d->whole > (UINT64_MAX - 9) / 10)
            return LC_EINPUT;
        d->whole = d->whole * 10 + (uint64_t)(*s - '0');
    }
    if (*s == '.') {
        /* Digits past 18 cannot change an int64 result, so they are read and dropped. */
        for (s++; *s >= '0' && *s <= '9'; s++, digits = true) {
            if (d->scale < UINT64_C(1000000000000000000)) {
                d->frac = d->frac * 10 + (uint64_t)(*s - '0');
                d->scale *= 10;
            }
        }
    }
    *p = s;
    return digits ? 0 : LC_EINPUT;
}

/* Adds d * unit to *total, refusing anything past INT64_MAX. */
static int add_scaled(int64_t *total, const decimal_t *d, int64_t unit)
{
    if (d->whole > (uint64_t)(INT64_MAX / unit))
        return LC_EINPUT;
    int64_t part = (int64_t)d->whole * unit;
    /* frac < scale, so this is below one unit and fits a double's exact range. */
    int64_t frac = (int64_t)((double)d->frac * ((double)unit / (double)d->scale));
    if (part > INT64_MAX - frac || *total > INT64_MAX - part - frac)
        return LC_EINPUT;
    *total += part + frac;
    return 0;
}

typedef struct {
    const char *name;
    int64_t mult;
} cfg_unit_t;

static const cfg_unit_t duration_units[] = {
    {"ns", 1},         {"us", NS_PER_US},  {"\xc2\xb5s", NS_PER_US}, {"\xce\xbcs", NS_PER_US},
    {"ms", NS_PER_MS}, {"s", NS_PER_S},    {"m", NS_PER_MIN},        {"h", NS_PER_HOUR},
    {"d", NS_PER_DAY}, {"w", NS_PER_WEEK},
};

static const cfg_unit_t byte_units[] = {
    {"", 1},
    {"b", 1},
    {"k", INT64_C(1000)},
    {"kb", INT64_C(1000)},
    {"m", INT64_C(1000000)},
    {"mb", INT64_C(1000000)},
    {"g", INT64_C(1000000000)},
    {"gb", INT64_C(1000000000)},
    {"t", INT64_C(1000000000000)},
    {"tb", INT64_C(1000000000000)},
    {"ki", INT64_C(1) << 10},
    {"kib", INT64_C(1) << 10},
    {"mi", INT64_C(1) << 20},
    {"mib", INT64_C(1) << 20},
    {"gi", INT64_C(1) << 30},
    {"gib", INT64_C(1) << 30},
    {"ti", INT64_C(1) << 40},
    {"tib", INT64_C(1) << 40},
};

static int64_t duration_unit(const char *name, size_t len)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(duration_units); i++) {
        if (strlen(duration_units[i].name) == len && memcmp(duration_units[i].name, name, len) == 0)
            return duration_units[i].mult;
    }
    return 0;
}

/* Reads one "<number><unit>" term of a duration; a term without a unit is
 * accepted only when it is the whole string (a bare number of seconds). */
static int duration_term(const char *s, const char **p, int64_t *total)
{
    decimal_t d;
    bool first = *p == s;
    if (parse_decimal(p, &d) != 0)
        return LC_EINPUT;
    const char *unit = *p;
    while (**p && !(**p >= '0' && **p <= '9') && **p != '.')
        (*p)++;
    size_t unit_len = (size_t)(*p - unit);
    int64_t mult = duration_unit(unit, unit_len);
    if (unit_len == 0 && first && **p == '\0')
        mult = NS_PER_S;
    if (mult == 0)
        return LC_EINPUT;
    return add_scaled(total, &d, mult);
}

/* Go's time.ParseDuration grammar plus "d" and "w"; a bare number means seconds.
 * Signs are refused: no setting of ours means anything with a negative span. */
int lc_parse_duration(const char *s, int64_t *ns)
{
    if (!s || !*s)
        return LC_EINPUT;
    int64_t total = 0;
    for (const char *p = s; *p;) {
        if (duration_term(s, &p, &total) != 0)
            return LC_EINPUT;
    }
    *ns = total;
    return 0;
}

/* "4MiB", "4MB", "512kib", "1.5GiB", "1024": units are case-insensitive, K/M/G/T
 * are decimal and Ki/Mi/Gi/Ti binary (with or without a trailing B). */
int lc_parse_bytes(const char *s, int64_t *bytes)
{
    if (!s)
        return LC_EINPUT;
    const char *p = s;
    decimal_t d;
    if (parse_decimal(&p, &d) != 0)
        return LC_EINPUT;
    for (size_t i = 0; i < LC_ARRAY_LEN(byte_units); i++) {
        if (strcasecmp(p, byte_units[i].name) != 0)
            continue;
        int64_t total = 0;
        if (add_scaled(&total, &d, byte_units[i].mult) != 0)
            return LC_EINPUT;
        *bytes = total;
        return 0;
    }
    return LC_EINPUT;
}

static int parse_int(const char *s, int64_t *out)
{
    /* strtoll would skip leading blanks and stop at junk; a setting must be exact. */
    if (!*s || isspace((unsigned char)*s))
        return LC_EINPUT;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno != 0 || *end != '\0')
        return LC_EINPUT;
    *out = v;
    return 0;
}

static int parse_bool(const char *s, bool *out)
{
    static const struct {
        const char *text;
        bool value;
    } words[] = {{"true", true}, {"false", false}, {"yes", true},
                 {"no", false},  {"1", true},      {"0", false}};
    for (size_t i = 0; i < LC_ARRAY_LEN(words); i++) {
        if (strcasecmp(s, words[i].text) == 0) {
            *out = words[i].value;
            return 0;
        }
    }
    return LC_EINPUT;
}

/* ---- value formatting (help, range errors, the startup log line) ---------------------------- */

/* Appends "<v><unit>" to a fixed buffer, which stays terminated if it runs out. */
static void append_amount(char *out, size_t len, size_t *used, int64_t v, const char *unit)
{
    if (*used >= len)
        return;
    int n = snprintf(out + *used, len - *used, "%" PRId64 "%s", v, unit);
    *used += n > 0 ? (size_t)n : 0;
}

/* Renders ns so that lc_parse_duration reads it back: "1h30m", "7d", "500ms", "0s". */
static void format_duration(int64_t ns, char *out, size_t len)
{
    static const cfg_unit_t whole[] = {
        {"d", NS_PER_DAY}, {"h", NS_PER_HOUR}, {"m", NS_PER_MIN}, {"s", NS_PER_S}};
    static const cfg_unit_t fine[] = {{"ms", NS_PER_MS}, {"us", NS_PER_US}, {"ns", 1}};
    size_t used = 0;
    out[0] = '\0';
    if (ns <= 0 || ns % NS_PER_S != 0) {
        /* Negative bounds or sub-second values print as one exact number. */
        size_t i = 0;
        while (ns % fine[i].mult != 0)
            i++;
        append_amount(out, len, &used, ns / fine[i].mult, ns ? fine[i].name : "s");
        return;
    }
    for (size_t i = 0; i < LC_ARRAY_LEN(whole); i++) {
        if (ns / whole[i].mult > 0)
            append_amount(out, len, &used, ns / whole[i].mult, whole[i].name);
        ns %= whole[i].mult;
    }
}

/* Exact binary units when they fit ("16GiB"), else the plain number. */
static void format_bytes(int64_t bytes, char *out, size_t len)
{
    static const cfg_unit_t units[] = {{"TiB", INT64_C(1) << 40},
                                       {"GiB", INT64_C(1) << 30},
                                       {"MiB", INT64_C(1) << 20},
                                       {"KiB", INT64_C(1) << 10}};
    for (size_t i = 0; i < LC_ARRAY_LEN(units); i++) {
        if (bytes != 0 && bytes % units[i].mult == 0) {
            snprintf(out, len, "%" PRId64 "%s", bytes / units[i].mult, units[i].name);
            return;
        }
    }
    snprintf(out, len, "%" PRId64, bytes);
}

static void format_number(lc_cfg_type_t type, int64_t v, char *out, size_t len)
{
    if (type == LC_CFG_DURATION)
        format_duration(v, out, len);
    else if (type == LC_CFG_BYTES)
        format_bytes(v, out, len);
    else
        snprintf(out, len, "%" PRId64, v);
}

/* The field's value as text; STRING fields are returned in place. */
static const char *format_value(const lc_cfg_entry_t *e, const void *cfg, char *buf, size_t len)
{
    const void *f = cfield_of(e, cfg);
    switch (e->type) {
    case LC_CFG_STRING: {
        const char *s = *(char *const *)f;
        return s ? s : "";
    }
    case LC_CFG_BOOL:
        return *(const bool *)f ? "true" : "false";
    default:
        format_number(e->type, *(const int64_t *)f, buf, len);
        return buf;
    }
}

/* ---- setting one value ---------------------------------------------------------------------- */

static bool has_range(const lc_cfg_entry_t *e)
{
    return e->min < e->max && e->type != LC_CFG_STRING && e->type != LC_CFG_BOOL;
}

static int check_range(const lc_cfg_entry_t *e, int64_t v, char *why, size_t why_len)
{
    if (!has_range(e) || (v >= e->min && v <= e->max))
        return 0;
    char val[32], lo[32], hi[32];
    format_number(e->type, v, val, sizeof(val));
    format_number(e->type, e->min, lo, sizeof(lo));
    format_number(e->type, e->max, hi, sizeof(hi));
    snprintf(why, why_len, "%s is out of range [%s, %s]", val, lo, hi);
    return LC_EINPUT;
}

static const char *value_kind(lc_cfg_type_t t)
{
    switch (t) {
    case LC_CFG_INT:
        return "integer";
    case LC_CFG_BOOL:
        return "boolean";
    case LC_CFG_DURATION:
        return "duration";
    case LC_CFG_BYTES:
        return "byte size";
    default:
        return "value";
    }
}

/* Parses text for e without storing it; on failure explains why in `why`. */
static int parse_value(const lc_cfg_entry_t *e, const char *text, cfg_value_t *v, char *why,
                       size_t why_len)
{
    int rc = 0;
    switch (e->type) {
    case LC_CFG_STRING:
        v->str = text;
        return 0;
    case LC_CFG_BOOL:
        rc = parse_bool(text, &v->b);
        break;
    case LC_CFG_INT:
        rc = parse_int(text, &v->i);
        break;
    case LC_CFG_DURATION:
        rc = lc_parse_duration(text, &v->i);
        break;
    case LC_CFG_BYTES:
        rc = lc_parse_bytes(text, &v->i);
        break;
    }
    if (rc != 0) {
        snprintf(why, why_len, "invalid %s \"%.*s\"", value_kind(e->type), CFG_SHOW_MAX, text);
        return rc;
    }
    return e->type == LC_CFG_BOOL ? 0 : check_range(e, v->i, why, why_len);
}

static void store_value(const lc_cfg_entry_t *e, void *cfg, const cfg_value_t *v)
{
    void *f = field_of(e, cfg);
    switch (e->type) {
    case LC_CFG_STRING:
        lc_free(*(char **)f);
        *(char **)f = lc_xstrdup(v->str);
        break;
    case LC_CFG_BOOL:
        *(bool *)f = v->b;
        break;
    default:
        *(int64_t *)f = v->i;
        break;
    }
}

/* Parses and stores text; source ("flag --x", "env EMBER_X", ...) prefixes any error. */
static int set_text(const lc_cfg_entry_t *e, void *cfg, const char *text, const char *source,
                    lc_status_t *st)
{
    char why[CFG_WHY_MAX];
    cfg_value_t v;
    if (parse_value(e, text, &v, why, sizeof(why)) != 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s: %s", source, why);
    store_value(e, cfg, &v);
    return 0;
}

/* ---- defaults, environment, flags ------------------------------------------------------------ */

/* Puts every field in a state lc_cfg_free accepts, whatever cfg held before. */
static void zero_fields(const lc_cfg_entry_t *table, size_t n, void *cfg)
{
    for (size_t i = 0; i < n; i++) {
        void *f = field_of(&table[i], cfg);
        if (table[i].type == LC_CFG_STRING)
            *(char **)f = NULL;
        else if (table[i].type == LC_CFG_BOOL)
            *(bool *)f = false;
        else
            *(int64_t *)f = 0;
    }
}

int lc_cfg_defaults(const lc_cfg_entry_t *table, size_t n, void *cfg, lc_status_t *st)
{
    zero_fields(table, n, cfg);
    for (size_t i = 0; i < n; i++) {
        const char *def = table[i].def ? table[i].def : "";
        /* An absent default is zero, but a STRING still gets "" so users never see NULL. */
        if (!*def && table[i].type != LC_CFG_STRING)
            continue;
        char source[CFG_KEY_MAX + 16];
        snprintf(source, sizeof(source), "default %s", table[i].name);
        if (set_text(&table[i], cfg, def, source, st) != 0)
            return -1;
    }
    return 0;
}

/* Applies the variable of e's name (or of its alias), if set. */
static int apply_env_name(const lc_cfg_entry_t *e, bool by_alias, void *cfg, lc_status_t *st)
{
    char var[CFG_KEY_MAX], source[CFG_KEY_MAX + 8];
    env_name(by_alias ? e->alias : e->name, var, sizeof(var));
    /* A variable set to "" still counts: it is how a default string is cleared. */
    const char *value = getenv(var);
    if (!value)
        return 0;
    snprintf(source, sizeof(source), "env %s", var);
    if (by_alias)
        warn_alias(e, source);
    return set_text(e, cfg, value, source, st);
}

static int apply_env(const lc_cfg_entry_t *table, size_t n, void *cfg, lc_status_t *st)
{
    for (size_t i = 0; i < n; i++) {
        /* The alias first, so the current name wins when both are set. */
        if (table[i].alias && apply_env_name(&table[i], true, cfg, st) != 0)
            return -1;
        if (apply_env_name(&table[i], false, cfg, st) != 0)
            return -1;
    }
    return 0;
}

static bool is_config_file_flag(const lc_cfg_entry_t *e, const char *name, size_t len)
{
    if (e)
        return strcmp(e->name, CFG_FILE_KEY) == 0;
    return len == strlen(CFG_FILE_KEY) && strncmp(name, CFG_FILE_KEY, len) == 0;
}

/* Reads argv[*i] (and its value, which may be the next argument). Like Go's flag
 * package, one or two dashes both work, and a bare boolean flag means true.
 * Returns 0, 1 for -h/--help, or -1. */
static int parse_flag(const lc_cfg_entry_t *table, size_t n, int argc, char **argv, int *i,
                      cfg_flag_t *out, lc_status_t *st)
{
    const char *arg = argv[*i];
    if (arg[0] != '-' || arg[1] == '\0')
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "unexpected argument \"%.*s\" (flags look like --name=value)",
                             CFG_SHOW_MAX, arg);
    const char *name = arg + (arg[1] == '-' ? 2 : 1);
    if (strcmp(name, "h") == 0 || strcmp(name, "help") == 0)
        return 1;
    const char *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    out->entry = find_entry_n(table, n, name, len);
    out->by_alias = false;
    if (!out->entry && (out->entry = find_alias_n(table, n, name, len)) != NULL) {
        out->by_alias = true;
        char source[CFG_KEY_MAX + 8];
        snprintf(source, sizeof(source), "flag --%s", out->entry->alias);
        warn_alias(out->entry, source);
    }
    if (!out->entry && !is_config_file_flag(NULL, name, len))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "flag --%.*s: unknown (see --help)",
                             (int)(len < CFG_SHOW_MAX ? len : CFG_SHOW_MAX), name);
    if (eq)
        out->value = eq + 1;
    else if (out->entry && out->entry->type == LC_CFG_BOOL)
        out->value = "true";
    else if (*i + 1 < argc)
        out->value = argv[++*i];
    else
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "flag --%.*s: missing value", (int)len,
                             name);
    return 0;
}

/* Splits argv into flags without applying them. "--" ends the flags, and since
 * no binary takes positional arguments, anything after it is an error. */
static int parse_args(const lc_cfg_entry_t *table, size_t n, int argc, char **argv,
                      cfg_flag_t *flags, size_t *n_flags, lc_status_t *st)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            if (i + 1 == argc)
                break;
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "unexpected argument \"%.*s\"",
                                 CFG_SHOW_MAX, argv[i + 1]);
        }
        int rc = parse_flag(table, n, argc, argv, &i, &flags[*n_flags], st);
        if (rc != 0)
            return rc;
        (*n_flags)++;
    }
    return 0;
}

static int apply_flags(void *cfg, const cfg_flag_t *flags, size_t n_flags, lc_status_t *st)
{
    for (size_t i = 0; i < n_flags; i++) {
        if (!flags[i].entry)
            continue; /* --config.file outside the table: already used to find the file */
        char source[CFG_KEY_MAX + 16];
        const lc_cfg_entry_t *e = flags[i].entry;
        snprintf(source, sizeof(source), "flag --%s", flags[i].by_alias ? e->alias : e->name);
        if (set_text(flags[i].entry, cfg, flags[i].value, source, st) != 0)
            return -1;
    }
    return 0;
}

/* ---- YAML ------------------------------------------------------------------------------------ */

/* One pass over the parser's events; key is the dotted path of the value being read. */
typedef struct {
    yaml_parser_t parser;
    const lc_cfg_entry_t *table;
    size_t n;
    void *cfg;
    const char *source; /* file name, for messages */
    lc_status_t *st;
    char key[CFG_KEY_MAX];
    size_t key_len;
} yaml_walk_t;

static int yaml_fail(yaml_walk_t *w, const char *fmt, ...) LC_PRINTF(2, 3);

static int yaml_fail(yaml_walk_t *w, const char *fmt, ...)
{
    char msg[LC_STATUS_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return lc_status_set(w->st, LC_CODE_INVALID_ARGUMENT, "config file %s: %s", w->source, msg);
}

static int yaml_next(yaml_walk_t *w, yaml_event_t *ev)
{
    if (yaml_parser_parse(&w->parser, ev))
        return 0;
    const char *context = w->parser.context ? w->parser.context : "";
    return yaml_fail(w, "line %zu column %zu: %s%s%s", w->parser.problem_mark.line + 1,
                     w->parser.problem_mark.column + 1,
                     w->parser.problem ? w->parser.problem : "invalid YAML", *context ? " " : "",
                     context);
}

/* Reads one event and keeps only its type (structure events carry nothing we use). */
static int yaml_next_type(yaml_walk_t *w, yaml_event_type_t *type)
{
    yaml_event_t ev;
    if (yaml_next(w, &ev) != 0)
        return -1;
    *type = ev.type;
    yaml_event_delete(&ev);
    return 0;
}

/* Plain "", "~" and "null" are YAML's null; quoted "" is an explicit empty string. */
static bool yaml_is_null(const yaml_event_t *ev)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
        return false;
    for (size_t i = 0; i < LC_ARRAY_LEN(nulls); i++) {
        if (strcmp((const char *)ev->data.scalar.value, nulls[i]) == 0)
            return true;
    }
    return false;
}

static bool name_below_key(const char *name, const yaml_walk_t *w)
{
    return name && strncmp(name, w->key, w->key_len) == 0 && name[w->key_len] == '.';
}

/* True when some entry (or alias) lives below the current key ("http" for
 * "http.address"). */
static bool yaml_key_is_prefix(const yaml_walk_t *w)
{
    for (size_t i = 0; i < w->n; i++) {
        if (name_below_key(w->table[i].name, w) || name_below_key(w->table[i].alias, w))
            return true;
    }
    return false;
}

/* The entry the current key names, by its name or else its alias (warned). */
static const lc_cfg_entry_t *yaml_key_entry(const yaml_walk_t *w)
{
    const lc_cfg_entry_t *e = find_entry(w->table, w->n, w->key);
    if (e || !(e = find_alias_n(w->table, w->n, w->key, w->key_len)))
        return e;
    char source[LC_STATUS_MSG_MAX];
    snprintf(source, sizeof(source), "config file %s: key %s", w->source, w->key);
    warn_alias(e, source);
    return e;
}

static int yaml_push_key(yaml_walk_t *w, const yaml_event_t *ev)
{
    const char *where = w->key_len ? w->key : "top level";
    if (ev->type != YAML_SCALAR_EVENT)
        return yaml_fail(w, "%s: keys must be strings, not lists, mappings or aliases", where);
    const char *k = (const char *)ev->data.scalar.value;
    size_t len = ev->data.scalar.length;
    if (len == 0 || memchr(k, '\0', len))
        return yaml_fail(w, "%s: empty key or key with a NUL byte", where);
    size_t dot = w->key_len ? 1 : 0;
    if (w->key_len + dot + len >= sizeof(w->key))
        return yaml_fail(w, "%s: key too long", where);
    if (dot)
        w->key[w->key_len] = '.';
    memcpy(w->key + w->key_len + dot, k, len + 1);
    w->key_len += dot + len;
    return 0;
}

static int yaml_set_scalar(yaml_walk_t *w, const yaml_event_t *ev)
{
    const lc_cfg_entry_t *e = yaml_key_entry(w);
    bool null = yaml_is_null(ev);
    if (!e && yaml_key_is_prefix(w))
        return null ? 0 : yaml_fail(w, "key %s: expected a mapping of keys below it", w->key);
    if (!e)
        return yaml_fail(w, "key %s: unknown", w->key);
    /* The file was chosen before it was read; naming another one here would be ignored. */
    if (strcmp(e->name, CFG_FILE_KEY) == 0)
        return yaml_fail(w, "key %s: cannot be set inside the config file", w->key);
    if (null)
        return 0; /* as with Go's YAML decoders, null keeps the value already there */
    const char *value = (const char *)ev->data.scalar.value;
    if (memchr(value, '\0', ev->data.scalar.length))
        return yaml_fail(w, "key %s: value contains a NUL byte", w->key);
    char source[LC_STATUS_MSG_MAX];
    snprintf(source, sizeof(source), "config file %s: key %s", w->source, w->key);
    return set_text(e, w->cfg, value, source, w->st);
}

static int yaml_walk_mapping(yaml_walk_t *w, int depth);

static int yaml_enter_mapping(yaml_walk_t *w, int depth)
{
    if (find_entry(w->table, w->n, w->key) || find_alias_n(w->table, w->n, w->key, w->key_len))
        return yaml_fail(w, "key %s: expected a value, found a mapping", w->key);
    if (!yaml_key_is_prefix(w))
        return yaml_fail(w, "key %s: unknown", w->key);
    if (depth >= CFG_MAX_YAML_DEPTH)
        return yaml_fail(w, "key %s: nested too deeply", w->key);
    return yaml_walk_mapping(w, depth + 1);
}

static int yaml_walk_value(yaml_walk_t *w, int depth)
{
    yaml_event_t ev;
    if (yaml_next(w, &ev) != 0)
        return -1;
    int rc;
    switch (ev.type) {
    case YAML_SCALAR_EVENT:
        rc = yaml_set_scalar(w, &ev);
        break;
    case YAML_MAPPING_START_EVENT:
        rc = yaml_enter_mapping(w, depth);
        break;
    case YAML_SEQUENCE_START_EVENT:
        rc = yaml_fail(w, "key %s: lists are not supported", w->key);
        break;
    default:
        /* Aliases are refused so a document cannot expand or loop through them. */
        rc = yaml_fail(w, "key %s: aliases are not supported", w->key);
        break;
    }
    yaml_event_delete(&ev);
    return rc;
}

static int yaml_walk_mapping(yaml_walk_t *w, int depth)
{
    for (;;) {
        yaml_event_t ev;
        if (yaml_next(w, &ev) != 0)
            return -1;
        if (ev.type == YAML_MAPPING_END_EVENT) {
            yaml_event_delete(&ev);
            return 0;
        }
        size_t saved = w->key_len;
        int rc = yaml_push_key(w, &ev);
        yaml_event_delete(&ev);
        if (rc == 0)
            rc = yaml_walk_value(w, depth);
        w->key_len = saved;
        w->key[saved] = '\0';
        if (rc != 0)
            return rc;
    }
}

/* The document's root: a mapping, or nothing at all (a file of comments). */
static int yaml_walk_root(yaml_walk_t *w)
{
    yaml_event_t ev;
    if (yaml_next(w, &ev) != 0)
        return -1;
    int rc = 0;
    if (ev.type == YAML_MAPPING_START_EVENT)
        rc = yaml_walk_mapping(w, 1);
    else if (ev.type != YAML_SCALAR_EVENT || !yaml_is_null(&ev))
        rc = yaml_fail(w, "the top level must be a mapping of keys");
    yaml_event_delete(&ev);
    return rc;
}

static int yaml_walk_stream(yaml_walk_t *w)
{
    yaml_event_type_t type;
    if (yaml_next_type(w, &type) != 0) /* the stream start */
        return -1;
    if (yaml_next_type(w, &type) != 0) /* then a document start or the stream end */
        return -1;
    if (type == YAML_STREAM_END_EVENT)
        return 0; /* an empty file sets nothing */
    if (yaml_walk_root(w) != 0 || yaml_next_type(w, &type) != 0 || yaml_next_type(w, &type) != 0)
        return -1;
    if (type != YAML_STREAM_END_EVENT)
        return yaml_fail(w, "only one YAML document is allowed");
    return 0;
}

int lc_cfg_load_yaml(const lc_cfg_entry_t *table, size_t n, void *cfg, const char *source,
                     const char *text, size_t len, lc_status_t *st)
{
    yaml_walk_t w = {.table = table, .n = n, .cfg = cfg, .st = st};
    w.source = source ? source : "(buffer)";
    if (!yaml_parser_initialize(&w.parser))
        return lc_status_set(st, LC_CODE_INTERNAL, "config file %s: cannot start the YAML parser",
                             w.source);
    yaml_parser_set_input_string(&w.parser, (const unsigned char *)text, len);
    int rc = yaml_walk_stream(&w);
    yaml_parser_delete(&w.parser);
    return rc;
}

/* ---- the config file ------------------------------------------------------------------------- */

static int read_config_file(const char *path, lc_buf_t *text, lc_status_t *st)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "config file %s: %s", path,
                             strerror(errno));
    char chunk[4096];
    size_t got;
    int rc = 0;
    while (rc == 0 && (got = fread(chunk, 1, sizeof(chunk), f)) > 0)
        rc = lc_buf_append(text, chunk, got);
    if (rc == 0 && ferror(f))
        rc = lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "config file %s: read failed", path);
    else if (rc != 0)
        rc = lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "config file %s: larger than %d bytes",
                           path, CFG_MAX_FILE_BYTES);
    fclose(f);
    return rc;
}

static int load_config_file(const lc_cfg_entry_t *table, size_t n, void *cfg, const char *path,
                            lc_status_t *st)
{
    lc_buf_t text;
    lc_buf_init(&text, CFG_MAX_FILE_BYTES);
    int rc = read_config_file(path, &text, st);
    if (rc == 0)
        rc = lc_cfg_load_yaml(table, n, cfg, path, (const char *)text.data, text.len, st);
    lc_buf_fini(&text);
    return rc;
}

/* The file to read: the last --config.file flag, else EMBER_CONFIG_FILE, else the
 * table's own config.file default. Empty means no file. */
static const char *config_file_path(const lc_cfg_entry_t *table, size_t n, const void *cfg,
                                    const cfg_flag_t *flags, size_t n_flags)
{
    const char *path = NULL;
    for (size_t i = 0; i < n_flags; i++) {
        if (is_config_file_flag(flags[i].entry, CFG_FILE_KEY, strlen(CFG_FILE_KEY)))
            path = flags[i].value;
    }
    if (!path)
        path = getenv(CFG_FILE_ENV);
    const lc_cfg_entry_t *e = find_entry(table, n, CFG_FILE_KEY);
    if (!path && e && e->type == LC_CFG_STRING)
        path = *(char *const *)cfield_of(e, cfg);
    return path && *path ? path : NULL;
}

/* ---- lc_cfg_load ----------------------------------------------------------------------------- */

static int apply_sources(const lc_cfg_entry_t *table, size_t n, void *cfg, const cfg_flag_t *flags,
                         size_t n_flags, lc_status_t *st)
{
    if (lc_cfg_defaults(table, n, cfg, st) != 0)
        return -1;
    const char *path = config_file_path(table, n, cfg, flags, n_flags);
    if (path && load_config_file(table, n, cfg, path, st) != 0)
        return -1;
    if (apply_env(table, n, cfg, st) != 0)
        return -1;
    return apply_flags(cfg, flags, n_flags, st);
}

int lc_cfg_load(const lc_cfg_entry_t *table, size_t n, void *cfg, int argc, char **argv,
                const char *usage, lc_status_t *st)
{
    cfg_flag_t *flags = lc_xcalloc(argc > 0 ? (size_t)argc : 1, sizeof(*flags));
    size_t n_flags = 0;
    /* Zeroed first so that lc_cfg_free is safe after any outcome. */
    zero_fields(table, n, cfg);
    int rc = parse_args(table, n, argc, argv, flags, &n_flags, st);
    if (rc == 1)
        lc_cfg_help(table, n, usage, stdout);
    if (rc == 0)
        rc = apply_sources(table, n, cfg, flags, n_flags, st);
    if (rc < 0)
        lc_cfg_free(table, n, cfg);
    lc_free(flags);
    return rc;
}

void lc_cfg_free(const lc_cfg_entry_t *table, size_t n, void *cfg)
{
    for (size_t i = 0; i < n; i++) {
        if (table[i].type != LC_CFG_STRING)
            continue;
        char **f = field_of(&table[i], cfg);
        lc_free(*f);
        *f = NULL;
    }
}

/* ---- --help ---------------------------------------------------------------------------------- */

/* Shown when the table has no config.file entry of its own: the flag works regardless. */
static const lc_cfg_entry_t implicit_config_file = {
    CFG_FILE_KEY, LC_CFG_STRING, 0, NULL, 0, 0, "YAML file with any of these settings", NULL,
};

/* " (default X, range A..B)" or nothing. */
static void help_print_default(FILE *out, const lc_cfg_entry_t *e)
{
    bool has_def = e->def && *e->def;
    if (!has_def && !has_range(e))
        return;
    fputs(" (", out);
    if (has_def)
        fprintf(out, e->type == LC_CFG_STRING ? "default \"%s\"" : "default %s", e->def);
    if (has_range(e)) {
        char lo[32], hi[32];
        format_number(e->type, e->min, lo, sizeof(lo));
        format_number(e->type, e->max, hi, sizeof(hi));
        fprintf(out, "%srange %s..%s", has_def ? ", " : "", lo, hi);
    }
    fputc(')', out);
}

/* Prints the help text indented, line by line. */
static void help_print_text(FILE *out, const char *text)
{
    while (text && *text) {
        const char *nl = strchr(text, '\n');
        int len = nl ? (int)(nl - text) : (int)strlen(text);
        fprintf(out, "        %.*s\n", len, text);
        text = nl ? nl + 1 : NULL;
    }
}

static void help_print_entry(FILE *out, const lc_cfg_entry_t *e)
{
    char env[CFG_KEY_MAX];
    env_name(e->name, env, sizeof(env));
    fprintf(out, "  --%s %s", e->name, type_name(e->type));
    help_print_default(out, e);
    fputc('\n', out);
    help_print_text(out, e->help);
    fprintf(out, "        env %s\n", env);
    if (!e->alias)
        return;
    env_name(e->alias, env, sizeof(env));
    fprintf(out, "        deprecated alias --%s, env %s\n", e->alias, env);
}

void lc_cfg_help(const lc_cfg_entry_t *table, size_t n, const char *usage, FILE *out)
{
    if (usage && *usage)
        fprintf(out, "%s\n\n", usage);
    fputs("Flags (precedence: flag > environment > config file > default):\n", out);
    if (!find_entry(table, n, CFG_FILE_KEY))
        help_print_entry(out, &implicit_config_file);
    for (size_t i = 0; i < n; i++)
        help_print_entry(out, &table[i]);
    fputs("  -h, --help\n        print this help and exit\n", out);
}

/* ---- the startup log line -------------------------------------------------------------------- */

/* Credentials must not reach the logs; matching the name is crude but needs no
 * extra column in every table. */
static bool is_secret(const char *name)
{
    return strstr(name, "password") || strstr(name, "secret") || strstr(name, "token");
}

/* logfmt: bare when safe, else quoted with \" \\ \n escaped. */
static int log_append_value(lc_buf_t *b, const char *v)
{
    bool bare = *v != '\0';
    for (const char *p = v; *p && bare; p++)
        bare = (unsigned char)*p > ' ' && *p != '"' && *p != '=' && *p != '\\';
    if (bare)
        return lc_buf_puts(b, v);
    int rc = lc_buf_putc(b, '"');
    for (const char *p = v; *p && rc == 0; p++) {
        if (*p == '"' || *p == '\\')
            rc = lc_buf_putc(b, '\\');
        if (rc == 0)
            rc = *p == '\n' ? lc_buf_puts(b, "\\n") : lc_buf_putc(b, *p);
    }
    return rc == 0 ? lc_buf_putc(b, '"') : rc;
}

void lc_cfg_log(const lc_cfg_entry_t *table, size_t n, const void *cfg)
{
    lc_buf_t b;
    lc_buf_init(&b, LC_BUF_UNLIMITED);
    /* A plain first key: the logger quotes everything before the first " key=" as
     * msg, and entry names with '-' would not be recognised as keys. */
    int rc = lc_buf_printf(&b, "effective configuration entries=%zu", n);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char buf[32];
        const char *v = format_value(&table[i], cfg, buf, sizeof(buf));
        if (is_secret(table[i].name) && *v)
            v = "<redacted>";
        rc = lc_buf_printf(&b, " %s=", table[i].name);
        if (rc == 0)
            rc = log_append_value(&b, v);
    }
    if (rc == 0)
        rc = lc_buf_putc(&b, '\0');
    if (rc == 0)
        LC_LOG_INFO("%s", (const char *)b.data);
    lc_buf_fini(&b);
}

/* A YAML double-quoted scalar: \" \\ and control bytes escaped, the rest as is
 * (UTF-8 passes through). */
static int yaml_append_quoted(lc_buf_t *b, const char *v)
{
    int rc = lc_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)v; *p && rc == 0; p++) {
        if (*p == '"' || *p == '\\')
            rc = lc_buf_printf(b, "\\%c", *p);
        else if (*p < ' ' || *p == 0x7f)
            rc = lc_buf_printf(b, "\\x%02x", *p);
        else
            rc = lc_buf_putc(b, (char)*p);
    }
    return rc == 0 ? lc_buf_putc(b, '"') : rc;
}

int lc_cfg_yaml(const lc_cfg_entry_t *table, size_t n, const void *cfg, const void *base,
                lc_buf_t *out)
{
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const lc_cfg_entry_t *e = &table[i];
        char buf[32], base_buf[32];
        const char *v = format_value(e, cfg, buf, sizeof(buf));
        if (base && strcmp(v, format_value(e, base, base_buf, sizeof(base_buf))) == 0)
            continue;
        if (is_secret(e->name) && *v)
            v = "<redacted>";
        rc = lc_buf_printf(out, "%s: ", e->name);
        if (rc == 0)
            rc = e->type == LC_CFG_STRING ? yaml_append_quoted(out, v) : lc_buf_puts(out, v);
        if (rc == 0)
            rc = lc_buf_putc(out, '\n');
    }
    return rc;
}
