/*
 * test_cfg.c — the configuration loader: value parsers, precedence of the four
 * sources, YAML shapes, error messages naming their source, deprecated
 * aliases, --help and the startup log line.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lc/cfg.h"
#include "lc_test.h"

#define SEC INT64_C(1000000000)
#define MIN (60 * SEC)
#define HOUR (60 * MIN)
#define DAY (24 * HOUR)

typedef struct {
    char *http_address;
    char *data_dir;
    int64_t port;
    bool debug;
    int64_t retention_ns;
    int64_t max_body_bytes;
    char *auth_token;
} test_cfg_t;

static const lc_cfg_entry_t table[] = {
    {"http.address", LC_CFG_STRING, offsetof(test_cfg_t, http_address), ":4040", 0, 0,
     "HTTP listen address", NULL},
    {"data.dir", LC_CFG_STRING, offsetof(test_cfg_t, data_dir), "./data", 0, 0,
     "directory of the blocks", NULL},
    {"http.port", LC_CFG_INT, offsetof(test_cfg_t, port), "4040", 1, 65535, "TCP port", NULL},
    {"debug", LC_CFG_BOOL, offsetof(test_cfg_t, debug), NULL, 0, 0, "verbose logging", NULL},
    {"retention", LC_CFG_DURATION, offsetof(test_cfg_t, retention_ns), "7d", HOUR, 3650 * DAY,
     "how long profiles are kept\n(whole blocks are dropped)", NULL},
    {"http.max-body-bytes", LC_CFG_BYTES, offsetof(test_cfg_t, max_body_bytes), "4MiB", 0, 0,
     "largest request body", NULL},
    {"auth.token", LC_CFG_STRING, offsetof(test_cfg_t, auth_token), NULL, 0, 0, "bearer token",
     NULL},
};
#define N_TABLE LC_ARRAY_LEN(table)

/* A second table that declares config.file itself, as the services do. */
typedef struct {
    char *config_file;
    char *data_dir;
} file_cfg_t;

static const lc_cfg_entry_t file_table[] = {
    {"config.file", LC_CFG_STRING, offsetof(file_cfg_t, config_file), NULL, 0, 0, "YAML file",
     NULL},
    {"data.dir", LC_CFG_STRING, offsetof(file_cfg_t, data_dir), "./data", 0, 0, "blocks", NULL},
};

/* A setting renamed: ingest.partitions, formerly redis.partitions. */
typedef struct {
    int64_t partitions;
    char *url;
} alias_cfg_t;

static const lc_cfg_entry_t alias_table[] = {
    {"ingest.partitions", LC_CFG_INT, offsetof(alias_cfg_t, partitions), "16", 1, 4096,
     "stream partitions", "redis.partitions"},
    {"redis.url", LC_CFG_STRING, offsetof(alias_cfg_t, url), NULL, 0, 0, "Redis", NULL},
};

static const char *const env_vars[] = {
    "EMBER_HTTP_ADDRESS",      "EMBER_DATA_DIR",
    "EMBER_HTTP_PORT",         "EMBER_DEBUG",
    "EMBER_RETENTION",         "EMBER_HTTP_MAX_BODY_BYTES",
    "EMBER_AUTH_TOKEN",        "EMBER_CONFIG_FILE",
    "EMBER_INGEST_PARTITIONS", "EMBER_REDIS_PARTITIONS",
};

/* The tests own the EMBER_* variables; whatever the runner had set must not leak in. */
static void clear_env(void)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(env_vars); i++)
        unsetenv(env_vars[i]);
}

static int load_args(test_cfg_t *cfg, lc_status_t *st, char **args)
{
    char *argv[16] = {"prog"};
    int argc = 1;
    while (args && args[argc - 1])
        argv[argc] = args[argc - 1], argc++;
    *st = (lc_status_t){0};
    return lc_cfg_load(table, N_TABLE, cfg, argc, argv, "Usage: prog [flags]", st);
}

/* Writes text to a fresh temp file; path receives its name. */
static void write_temp(char *path, size_t len, const char *text)
{
    snprintf(path, len, "/tmp/test_cfg_XXXXXX.yaml");
    int fd = mkstemps(path, 5);
    LC_CHECK(fd >= 0);
    LC_CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
}

/* Runs fn with fd sent to a temp file and returns what was written (free()). */
static char *capture_fd(int fd, void (*fn)(void *), void *arg)
{
    char path[] = "/tmp/test_cfg_capture_XXXXXX";
    int tmp = mkstemp(path);
    fflush(NULL);
    int saved = dup(fd);
    dup2(tmp, fd);
    fn(arg);
    fflush(NULL);
    dup2(saved, fd);
    close(saved);
    close(tmp);
    size_t len = 0;
    char *out = (char *)lc_test_read_file(path, &len);
    unlink(path);
    return out;
}

static void test_parse_duration(void)
{
    static const struct {
        const char *text;
        int64_t ns;
    } ok[] = {
        {"300ms", 300 * INT64_C(1000000)},
        {"1.5h", 90 * MIN},
        {"1h30m", 90 * MIN},
        {"90s", 90 * SEC},
        {"7d", 7 * DAY},
        {"2w", 14 * DAY},
        {"90", 90 * SEC},
        {"1.5", 1500 * INT64_C(1000000)},
        {"0", 0},
        {"0s", 0},
        {"1us", 1000},
        {"1\xc2\xb5s", 1000},
        {"250ns", 250},
        {".5s", SEC / 2},
        {"1d2h3m4s", DAY + 2 * HOUR + 3 * MIN + 4 * SEC},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(ok); i++) {
        int64_t ns = -1;
        LC_ASSERT_OK(lc_parse_duration(ok[i].text, &ns));
        LC_ASSERT_EQ(ns, ok[i].ns);
    }
    static const char *const bad[] = {
        "",    "abc", "-1s", "1h30",           "1x",     "s", ".", "1..5s", "1H",
        " 1s", "1s ", "+1s", "9999999999999h", "106752d"};
    for (size_t i = 0; i < LC_ARRAY_LEN(bad); i++) {
        int64_t ns = 0;
        if (lc_parse_duration(bad[i], &ns) == 0)
            LC_FAIL_("duration \"%s\" was accepted as %lld", bad[i], (long long)ns);
    }
}

static void test_parse_bytes(void)
{
    static const struct {
        const char *text;
        int64_t bytes;
    } ok[] = {
        {"4MiB", 4 << 20},
        {"4MB", 4000000},
        {"512KiB", 512 << 10},
        {"1GiB", 1 << 30},
        {"1024", 1024},
        {"4mib", 4 << 20},
        {"1kb", 1000},
        {"1KB", 1000},
        {"2Ki", 2048},
        {"1.5KiB", 1536},
        {"0", 0},
        {"7b", 7},
        {"1TiB", INT64_C(1) << 40},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(ok); i++) {
        int64_t b = -1;
        LC_ASSERT_OK(lc_parse_bytes(ok[i].text, &b));
        LC_ASSERT_EQ(b, ok[i].bytes);
    }
    static const char *const bad[] = {"", "-1", "4XB", "MiB", "4 MiB", "99999999999TiB", "1e3"};
    for (size_t i = 0; i < LC_ARRAY_LEN(bad); i++) {
        int64_t b = 0;
        if (lc_parse_bytes(bad[i], &b) == 0)
            LC_FAIL_("bytes \"%s\" was accepted as %lld", bad[i], (long long)b);
    }
}

static void test_defaults(void)
{
    clear_env();
    test_cfg_t cfg;
    lc_status_t st;
    LC_ASSERT_OK(load_args(&cfg, &st, NULL));
    LC_ASSERT_STR_EQ(cfg.http_address, ":4040");
    LC_ASSERT_STR_EQ(cfg.data_dir, "./data");
    LC_ASSERT_EQ(cfg.port, 4040);
    LC_ASSERT_EQ(cfg.debug, false);
    LC_ASSERT_EQ(cfg.retention_ns, 7 * DAY);
    LC_ASSERT_EQ(cfg.max_body_bytes, 4 << 20);
    LC_ASSERT_STR_EQ(cfg.auth_token, ""); /* NULL default: empty, never a NULL pointer */
    lc_cfg_free(table, N_TABLE, &cfg);
    LC_CHECK(cfg.http_address == NULL && cfg.auth_token == NULL);
}

/* default < file < env < flag, each source winning only for what it sets. */
static void test_precedence(void)
{
    clear_env();
    char path[64];
    write_temp(path, sizeof(path),
               "http:\n  address: \":9000\"\n  port: 9000\ndata.dir: /file\nretention: 2d\n");
    setenv("EMBER_DATA_DIR", "/env", 1);
    setenv("EMBER_HTTP_PORT", "9001", 1);
    char flag_file[96];
    snprintf(flag_file, sizeof(flag_file), "--config.file=%s", path);
    test_cfg_t cfg;
    lc_status_t st;
    LC_ASSERT_OK(load_args(&cfg, &st, (char *[]){flag_file, "--http.port", "9002", NULL}));
    LC_ASSERT_STR_EQ(st.msg, "");
    LC_ASSERT_STR_EQ(cfg.http_address, ":9000"); /* file */
    LC_ASSERT_STR_EQ(cfg.data_dir, "/env");      /* env beats file */
    LC_ASSERT_EQ(cfg.port, 9002);                /* flag beats env and file */
    LC_ASSERT_EQ(cfg.retention_ns, 2 * DAY);     /* file beats default */
    LC_ASSERT_EQ(cfg.max_body_bytes, 4 << 20);   /* default */
    lc_cfg_free(table, N_TABLE, &cfg);

    /* The file can also come from EMBER_CONFIG_FILE. */
    setenv("EMBER_CONFIG_FILE", path, 1);
    LC_ASSERT_OK(load_args(&cfg, &st, NULL));
    LC_ASSERT_STR_EQ(cfg.http_address, ":9000");
    LC_ASSERT_EQ(cfg.port, 9001);
    lc_cfg_free(table, N_TABLE, &cfg);
    clear_env();
    unlink(path);
}

static void test_flag_forms(void)
{
    clear_env();
    test_cfg_t cfg;
    lc_status_t st;
    LC_ASSERT_OK(load_args(&cfg, &st,
                           (char *[]){"--http.port=80", "-data.dir", "/x", "--debug", "--retention",
                                      "1h30m", "--http.max-body-bytes=1GiB", "--", NULL}));
    LC_ASSERT_EQ(cfg.port, 80);
    LC_ASSERT_STR_EQ(cfg.data_dir, "/x");
    LC_ASSERT_EQ(cfg.debug, true);
    LC_ASSERT_EQ(cfg.retention_ns, 90 * MIN);
    LC_ASSERT_EQ(cfg.max_body_bytes, 1 << 30);
    lc_cfg_free(table, N_TABLE, &cfg);

    /* Explicit booleans, the last flag wins, and "=" allows an empty string. */
    LC_ASSERT_OK(
        load_args(&cfg, &st, (char *[]){"--debug=yes", "--debug=False", "--http.address=", NULL}));
    LC_ASSERT_EQ(cfg.debug, false);
    LC_ASSERT_STR_EQ(cfg.http_address, "");
    lc_cfg_free(table, N_TABLE, &cfg);

    setenv("EMBER_DEBUG", "1", 1);
    setenv("EMBER_HTTP_MAX_BODY_BYTES", "512KiB", 1);
    LC_ASSERT_OK(load_args(&cfg, &st, NULL));
    LC_ASSERT_EQ(cfg.debug, true);
    LC_ASSERT_EQ(cfg.max_body_bytes, 512 << 10);
    lc_cfg_free(table, N_TABLE, &cfg);
    clear_env();
}

/* Runs the loader with args and checks the failure message word for word. */
static void expect_error(char **args, const char *want)
{
    test_cfg_t cfg;
    lc_status_t st;
    LC_ASSERT_EQ(load_args(&cfg, &st, args), -1);
    LC_ASSERT_STR_EQ(st.msg, want);
    LC_CHECK(cfg.http_address == NULL && cfg.data_dir == NULL); /* freed on failure */
    lc_cfg_free(table, N_TABLE, &cfg);
}

static void test_errors_name_their_source(void)
{
    clear_env();
    expect_error((char *[]){"--retention=abc", NULL}, "flag --retention: invalid duration \"abc\"");
    expect_error((char *[]){"--bogus=1", NULL}, "flag --bogus: unknown (see --help)");
    expect_error((char *[]){"--http.port=70000", NULL},
                 "flag --http.port: 70000 is out of range [1, 65535]");
    expect_error((char *[]){"--http.port=12x", NULL}, "flag --http.port: invalid integer \"12x\"");
    expect_error((char *[]){"--retention=1m", NULL},
                 "flag --retention: 1m is out of range [1h, 3650d]");
    expect_error((char *[]){"--debug=maybe", NULL}, "flag --debug: invalid boolean \"maybe\"");
    expect_error((char *[]){"--http.port", NULL}, "flag --http.port: missing value");
    expect_error((char *[]){"serve", NULL},
                 "unexpected argument \"serve\" (flags look like --name=value)");
    expect_error((char *[]){"--", "x", NULL}, "unexpected argument \"x\"");
    expect_error((char *[]){"--config.file=/nonexistent/e.yaml", NULL},
                 "config file /nonexistent/e.yaml: No such file or directory");

    setenv("EMBER_RETENTION", "abc", 1);
    expect_error(NULL, "env EMBER_RETENTION: invalid duration \"abc\"");
    /* A flag does not rescue a bad variable: every source is validated. */
    expect_error((char *[]){"--retention=1d", NULL},
                 "env EMBER_RETENTION: invalid duration \"abc\"");
    clear_env();
    setenv("EMBER_HTTP_MAX_BODY_BYTES", "4XB", 1);
    expect_error(NULL, "env EMBER_HTTP_MAX_BODY_BYTES: invalid byte size \"4XB\"");
    clear_env();

    char path[64], flag[96], want[256];
    write_temp(path, sizeof(path), "http:\n  adress: \":1\"\n");
    snprintf(flag, sizeof(flag), "--config.file=%s", path);
    snprintf(want, sizeof(want), "config file %s: key http.adress: unknown", path);
    expect_error((char *[]){flag, NULL}, want);
    unlink(path);
}

/* Applies YAML text over defaults and returns the loader's result. */
static int load_yaml(test_cfg_t *cfg, lc_status_t *st, const char *text)
{
    *st = (lc_status_t){0};
    LC_ASSERT_OK(lc_cfg_defaults(table, N_TABLE, cfg, st));
    return lc_cfg_load_yaml(table, N_TABLE, cfg, "x.yaml", text, strlen(text), st);
}

static void expect_yaml_error(const char *text, const char *want)
{
    test_cfg_t cfg;
    lc_status_t st;
    LC_ASSERT_EQ(load_yaml(&cfg, &st, text), -1);
    LC_ASSERT_STR_EQ(st.msg, want);
    lc_cfg_free(table, N_TABLE, &cfg);
}

static void test_yaml_shapes(void)
{
    test_cfg_t cfg;
    lc_status_t st;
    /* Nested maps, flat dotted keys, mixed, a null leaf and a null prefix. */
    LC_ASSERT_OK(load_yaml(&cfg, &st,
                           "# comment\nhttp:\n  address: ':1'\n  max-body-bytes: 1MB\n"
                           "data.dir: /d\ndebug: yes\nauth: {token: \"\"}\nretention: ~\n"));
    LC_ASSERT_STR_EQ(st.msg, "");
    LC_ASSERT_STR_EQ(cfg.http_address, ":1");
    LC_ASSERT_EQ(cfg.max_body_bytes, 1000000);
    LC_ASSERT_STR_EQ(cfg.data_dir, "/d");
    LC_ASSERT_EQ(cfg.debug, true);
    LC_ASSERT_STR_EQ(cfg.auth_token, "");
    LC_ASSERT_EQ(cfg.retention_ns, 7 * DAY); /* null keeps the default */
    lc_cfg_free(table, N_TABLE, &cfg);

    LC_ASSERT_OK(load_yaml(&cfg, &st, "http:\nhttp.port: 81\n"));
    LC_ASSERT_EQ(cfg.port, 81);
    lc_cfg_free(table, N_TABLE, &cfg);

    LC_ASSERT_OK(load_yaml(&cfg, &st, "")); /* an empty file changes nothing */
    lc_cfg_free(table, N_TABLE, &cfg);
    LC_ASSERT_OK(load_yaml(&cfg, &st, "# only a comment\n"));
    LC_ASSERT_STR_EQ(cfg.data_dir, "./data");
    lc_cfg_free(table, N_TABLE, &cfg);
}

static void test_yaml_errors(void)
{
    expect_yaml_error("htp:\n  address: x\n", "config file x.yaml: key htp: unknown");
    expect_yaml_error("retention: abc\n",
                      "config file x.yaml: key retention: invalid duration \"abc\"");
    expect_yaml_error("http.port: [1, 2]\n",
                      "config file x.yaml: key http.port: lists are not supported");
    expect_yaml_error("data.dir: &x /d\nhttp.address: *x\n",
                      "config file x.yaml: key http.address: aliases are not supported");
    expect_yaml_error("http: 5\n",
                      "config file x.yaml: key http: expected a mapping of keys below it");
    expect_yaml_error("debug: {x: 1}\n",
                      "config file x.yaml: key debug: expected a value, found a mapping");
    expect_yaml_error("- 1\n", "config file x.yaml: the top level must be a mapping of keys");
    expect_yaml_error("debug: true\n---\ndebug: false\n",
                      "config file x.yaml: only one YAML document is allowed");
    expect_yaml_error("config.file: other.yaml\n", "config file x.yaml: key config.file: unknown");
    expect_yaml_error("http:\n  address: \"a\\0b\"\n",
                      "config file x.yaml: key http.address: value contains a NUL byte");
    expect_yaml_error("? [a]\n: 1\n",
                      "config file x.yaml: top level: keys must be strings, not lists, mappings "
                      "or aliases");
    expect_yaml_error("http: {address: x\n",
                      "config file x.yaml: line 2 column 1: did not find expected ',' or '}' "
                      "while parsing a flow mapping");
}

static void test_config_file_entry(void)
{
    clear_env();
    char path[64], flag[96];
    write_temp(path, sizeof(path), "data:\n  dir: /from-file\n");
    snprintf(flag, sizeof(flag), "--config.file=%s", path);
    file_cfg_t cfg;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_cfg_load(file_table, 2, &cfg, 2, (char *[]){"prog", flag, NULL}, NULL, &st));
    LC_ASSERT_STR_EQ(cfg.config_file, path); /* the table's field records the file used */
    LC_ASSERT_STR_EQ(cfg.data_dir, "/from-file");
    lc_cfg_free(file_table, 2, &cfg);

    /* The file may not name another file: that choice was already made. */
    LC_ASSERT_OK(lc_cfg_defaults(file_table, 2, &cfg, &st));
    const char *text = "config.file: y.yaml\n";
    LC_ASSERT_EQ(lc_cfg_load_yaml(file_table, 2, &cfg, "x.yaml", text, strlen(text), &st), -1);
    LC_ASSERT_STR_EQ(st.msg, "config file x.yaml: key config.file: cannot be set inside the "
                             "config file");
    lc_cfg_free(file_table, 2, &cfg);
    unlink(path);
}

/* Nesting stops at a fixed depth even when the table has a deeper name. */
static void test_yaml_depth_limit(void)
{
    typedef struct {
        char *deep;
    } deep_cfg_t;
    static const lc_cfg_entry_t deep_table[] = {
        {"a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q", LC_CFG_STRING, offsetof(deep_cfg_t, deep), NULL, 0, 0,
         "deep", NULL},
    };
    char text[512] = "";
    size_t used = 0;
    for (int i = 0; i < 17; i++)
        used += (size_t)snprintf(text + used, sizeof(text) - used, "%*s%c:\n", i, "", 'a' + i);
    snprintf(text + used - 1, sizeof(text) - used + 1, " x\n");
    deep_cfg_t cfg;
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_cfg_defaults(deep_table, 1, &cfg, &st));
    LC_ASSERT_EQ(lc_cfg_load_yaml(deep_table, 1, &cfg, "x.yaml", text, strlen(text), &st), -1);
    LC_ASSERT_STR_EQ(st.msg, "config file x.yaml: key a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p: nested too "
                             "deeply");
    /* The flat spelling of the same key has no depth and works. */
    const char *flat = "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q: x\n";
    LC_ASSERT_OK(lc_cfg_load_yaml(deep_table, 1, &cfg, "x.yaml", flat, strlen(flat), &st));
    LC_ASSERT_STR_EQ(cfg.deep, "x");
    lc_cfg_free(deep_table, 1, &cfg);
}

static int load_alias(alias_cfg_t *cfg, lc_status_t *st, char **args)
{
    char *argv[8] = {"prog"};
    int argc = 1;
    while (args && args[argc - 1])
        argv[argc] = args[argc - 1], argc++;
    *st = (lc_status_t){0};
    return lc_cfg_load(alias_table, LC_ARRAY_LEN(alias_table), cfg, argc, argv, "", st);
}

/* Loads with args and returns the partitions, or -1 on failure (st says why). */
static int64_t alias_partitions(lc_status_t *st, char **args)
{
    alias_cfg_t cfg;
    int rc = load_alias(&cfg, st, args);
    int64_t partitions = rc == 0 ? cfg.partitions : -1;
    lc_cfg_free(alias_table, LC_ARRAY_LEN(alias_table), &cfg);
    return partitions;
}

/* The old name through all three sources at once, in the first load of the
 * process that names it: one warning, not one per source. */
static void run_alias_everywhere(void *arg)
{
    char path[64], flag_file[96];
    write_temp(path, sizeof(path), "redis:\n  partitions: 3\n  url: redis://x\n");
    snprintf(flag_file, sizeof(flag_file), "--config.file=%s", path);
    setenv("EMBER_REDIS_PARTITIONS", "5", 1);
    lc_status_t st;
    *(int64_t *)arg = alias_partitions(&st, (char *[]){flag_file, "--redis.partitions=7", NULL});
    unlink(path);
    clear_env();
}

static void run_alias_again(void *arg)
{
    lc_status_t st;
    *(int64_t *)arg = alias_partitions(&st, (char *[]){"--redis.partitions", "9", NULL});
}

static size_t count_lines_with(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void test_alias_warns_once(void)
{
    clear_env();
    int64_t partitions = 0;
    char *log = capture_fd(STDERR_FILENO, run_alias_everywhere, &partitions);
    LC_ASSERT_EQ(partitions, 7); /* the flag beats the environment and the file */
    LC_CHECK(log != NULL);
    if (log) {
        LC_ASSERT_EQ(count_lines_with(log, "deprecated setting name"), 1);
        LC_CHECK(strstr(log, "old=redis.partitions new=ingest.partitions") != NULL);
    }
    free(log);
    log = capture_fd(STDERR_FILENO, run_alias_again, &partitions);
    LC_ASSERT_EQ(partitions, 9);
    LC_ASSERT_EQ(count_lines_with(log, "deprecated setting name"), 0); /* once per process */
    free(log);
}

static void test_alias_sources(void)
{
    clear_env();
    lc_status_t st;
    LC_ASSERT_EQ(alias_partitions(&st, NULL), 16);
    /* Flags: the alias sets the same field, and the last flag wins as usual. */
    LC_ASSERT_EQ(alias_partitions(&st, (char *[]){"--redis.partitions=8", NULL}), 8);
    LC_ASSERT_EQ(
        alias_partitions(&st, (char *[]){"--redis.partitions=8", "--ingest.partitions=4", NULL}),
        4);
    /* Environment: the current name wins over the alias. */
    setenv("EMBER_REDIS_PARTITIONS", "7", 1);
    LC_ASSERT_EQ(alias_partitions(&st, NULL), 7);
    setenv("EMBER_INGEST_PARTITIONS", "5", 1);
    LC_ASSERT_EQ(alias_partitions(&st, NULL), 5);
    clear_env();
    /* The file: nested and flat spellings of the alias, beside its siblings. */
    alias_cfg_t cfg;
    const char *nested = "redis:\n  url: redis://x\n  partitions: 6\n";
    LC_ASSERT_OK(lc_cfg_defaults(alias_table, LC_ARRAY_LEN(alias_table), &cfg, &st));
    LC_ASSERT_OK(lc_cfg_load_yaml(alias_table, LC_ARRAY_LEN(alias_table), &cfg, "a.yaml", nested,
                                  strlen(nested), &st));
    LC_ASSERT_EQ(cfg.partitions, 6);
    LC_ASSERT_STR_EQ(cfg.url, "redis://x");
    const char *flat = "redis.partitions: 2\n";
    LC_ASSERT_OK(lc_cfg_load_yaml(alias_table, LC_ARRAY_LEN(alias_table), &cfg, "a.yaml", flat,
                                  strlen(flat), &st));
    LC_ASSERT_EQ(cfg.partitions, 2);
    const char *mapping = "redis:\n  partitions:\n    x: 1\n";
    LC_ASSERT_EQ(lc_cfg_load_yaml(alias_table, LC_ARRAY_LEN(alias_table), &cfg, "a.yaml", mapping,
                                  strlen(mapping), &st),
                 -1);
    LC_ASSERT_STR_EQ(st.msg, "config file a.yaml: key redis.partitions: expected a value, found a "
                             "mapping");
    lc_cfg_free(alias_table, LC_ARRAY_LEN(alias_table), &cfg);
}

static void test_alias_errors(void)
{
    clear_env();
    lc_status_t st;
    /* A bad value names the spelling the user wrote, and changes nothing. */
    LC_ASSERT_EQ(alias_partitions(&st, (char *[]){"--redis.partitions=0", NULL}), -1);
    LC_ASSERT_STR_EQ(st.msg, "flag --redis.partitions: 0 is out of range [1, 4096]");
    setenv("EMBER_REDIS_PARTITIONS", "many", 1);
    LC_ASSERT_EQ(alias_partitions(&st, NULL), -1);
    LC_CHECK(strncmp(st.msg, "env EMBER_REDIS_PARTITIONS: ", 28) == 0);
    clear_env();
    /* Only the exact old name is an alias. */
    LC_ASSERT_EQ(alias_partitions(&st, (char *[]){"--redis.partition=3", NULL}), -1);
    LC_ASSERT_STR_EQ(st.msg, "flag --redis.partition: unknown (see --help)");
    LC_ASSERT_EQ(alias_partitions(&st, (char *[]){"--partitions=3", NULL}), -1);
    /* --help names the alias under its setting. */
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    lc_cfg_help(alias_table, LC_ARRAY_LEN(alias_table), "", out);
    fclose(out);
    LC_CHECK(strstr(text, "  --ingest.partitions int (default 16, range 1..4096)\n"
                          "        stream partitions\n"
                          "        env EMBER_INGEST_PARTITIONS\n"
                          "        deprecated alias --redis.partitions, env "
                          "EMBER_REDIS_PARTITIONS\n"
                          "  --redis.url string\n") != NULL);
    free(text);
}

static const char help_golden[] =
    "Usage: prog [flags]\n"
    "\n"
    "Flags (precedence: flag > environment > config file > default):\n"
    "  --config.file string\n"
    "        YAML file with any of these settings\n"
    "        env EMBER_CONFIG_FILE\n"
    "  --http.address string (default \":4040\")\n"
    "        HTTP listen address\n"
    "        env EMBER_HTTP_ADDRESS\n"
    "  --data.dir string (default \"./data\")\n"
    "        directory of the blocks\n"
    "        env EMBER_DATA_DIR\n"
    "  --http.port int (default 4040, range 1..65535)\n"
    "        TCP port\n"
    "        env EMBER_HTTP_PORT\n"
    "  --debug bool\n"
    "        verbose logging\n"
    "        env EMBER_DEBUG\n"
    "  --retention duration (default 7d, range 1h..3650d)\n"
    "        how long profiles are kept\n"
    "        (whole blocks are dropped)\n"
    "        env EMBER_RETENTION\n"
    "  --http.max-body-bytes bytes (default 4MiB)\n"
    "        largest request body\n"
    "        env EMBER_HTTP_MAX_BODY_BYTES\n"
    "  --auth.token string\n"
    "        bearer token\n"
    "        env EMBER_AUTH_TOKEN\n"
    "  -h, --help\n"
    "        print this help and exit\n";

static void run_help_flag(void *arg)
{
    test_cfg_t cfg;
    lc_status_t st;
    *(int *)arg = load_args(&cfg, &st, (char *[]){"--debug", "-h", "--bogus", NULL});
    lc_cfg_free(table, N_TABLE, &cfg);
}

static void test_help(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    lc_cfg_help(table, N_TABLE, "Usage: prog [flags]", out);
    fclose(out);
    LC_ASSERT_STR_EQ(text, help_golden);
    free(text);

    int rc = -1;
    char *printed = capture_fd(STDOUT_FILENO, run_help_flag, &rc);
    LC_ASSERT_EQ(rc, 1); /* help wins over a later unknown flag */
    LC_ASSERT_STR_EQ(printed, help_golden);
    free(printed);
}

static void run_log(void *arg)
{
    lc_cfg_log(table, N_TABLE, arg);
}

static void test_log_line(void)
{
    clear_env();
    test_cfg_t cfg;
    lc_status_t st;
    LC_ASSERT_OK(load_args(
        &cfg, &st,
        (char *[]){"--data.dir=/my data", "--auth.token=s3cret", "--retention=36h", NULL}));
    char *line = capture_fd(STDERR_FILENO, run_log, &cfg);
    LC_CHECK(line != NULL);
    if (line) {
        LC_CHECK(strstr(line, "msg=\"effective configuration\" entries=7 http.address=:4040 "
                              "data.dir=\"/my data\" http.port=4040 debug=false "
                              "retention=1d12h http.max-body-bytes=4MiB "
                              "auth.token=<redacted>\n") != NULL);
        LC_CHECK(strstr(line, "s3cret") == NULL);
        LC_CHECK(strchr(line, '\n') == line + strlen(line) - 1); /* one line */
    }
    free(line);
    lc_cfg_free(table, N_TABLE, &cfg);
}

/* The YAML view (status.v1's config): exact text, the diff against the defaults,
 * secrets redacted, and what it says read back by the loader gives the same values. */
static void test_yaml_view(void)
{
    clear_env();
    test_cfg_t cfg, defaults, back;
    lc_status_t st;
    LC_ASSERT_OK(load_args(&cfg, &st,
                           (char *[]){"--data.dir=/a \"b\"\\c\td", "--debug", "--retention=36h",
                                      "--auth.token=s3cret", NULL}));
    LC_ASSERT_OK(lc_cfg_defaults(table, N_TABLE, &defaults, &st));
    lc_buf_t full, diff;
    lc_buf_init(&full, LC_BUF_UNLIMITED);
    lc_buf_init(&diff, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_cfg_yaml(table, N_TABLE, &cfg, NULL, &full));
    LC_ASSERT_OK(lc_cfg_yaml(table, N_TABLE, &cfg, &defaults, &diff));
    const char *want_diff = "data.dir: \"/a \\\"b\\\"\\\\c\\x09d\"\n"
                            "debug: true\n"
                            "retention: 1d12h\n"
                            "auth.token: \"<redacted>\"\n";
    LC_CHECK(diff.len == strlen(want_diff) && memcmp(diff.data, want_diff, diff.len) == 0);
    LC_CHECK(full.len > diff.len);
    LC_ASSERT_OK(lc_buf_putc(&full, '\0'));
    LC_CHECK(strstr((const char *)full.data, "\nhttp.port: 4040\n") != NULL);
    LC_CHECK(strstr((const char *)full.data, "s3cret") == NULL);
    LC_ASSERT_OK(lc_cfg_defaults(table, N_TABLE, &back, &st));
    LC_ASSERT_OK(lc_cfg_load_yaml(table, N_TABLE, &back, "view", (const char *)full.data,
                                  full.len - 1, &st));
    LC_ASSERT_STR_EQ(back.data_dir, "/a \"b\"\\c\td");
    LC_CHECK(back.debug);
    LC_ASSERT_EQ(back.retention_ns, 36 * HOUR);
    LC_ASSERT_EQ(back.port, 4040);
    LC_ASSERT_STR_EQ(back.auth_token, "<redacted>");
    lc_buf_fini(&full);
    lc_buf_fini(&diff);
    lc_cfg_free(table, N_TABLE, &back);
    lc_cfg_free(table, N_TABLE, &defaults);
    lc_cfg_free(table, N_TABLE, &cfg);
}

LC_TEST_MAIN(test_parse_duration, test_parse_bytes, test_defaults, test_precedence, test_flag_forms,
             test_errors_name_their_source, test_yaml_shapes, test_yaml_errors,
             test_yaml_depth_limit, test_config_file_entry, test_alias_warns_once,
             test_alias_sources, test_alias_errors, test_help, test_log_line, test_yaml_view)
