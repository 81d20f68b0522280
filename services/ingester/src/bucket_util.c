/*
 * bucket_util.c — bucket_int.h: key names, the local upload records and
 * durable whole-file writes, shared by the uploader and the restore.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "bucket_int.h"
#include "lc/alloc.h"
#include "lc/log.h"

static uint32_t fnv1a(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static bool key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

void bkt_ingester_key(const char *id, char out[BKT_ING_MAX])
{
    size_t n = 0;
    for (const char *p = id; *p && n < BKT_ING_MAX - 10; p++)
        out[n++] = key_char(*p) ? *p : '_';
    if (n > 0 && out[0] == '.') /* "." and ".." are no key segment */
        out[0] = '_';
    snprintf(out + n, BKT_ING_MAX - n, "-%08" PRIx32, fnv1a(id));
}

void bkt_start_name(int64_t start_ns, char out[32])
{
    snprintf(out, 32, "%012" PRId64, start_ns / 1000000000);
}

void bkt_index_key(const char *ing, const char *name, char *out, size_t size)
{
    snprintf(out, size, "index/%s/%s.json", ing, name);
}

void bkt_data_key(const char *ing, const char *name, char *out, size_t size)
{
    snprintf(out, size, "blocks/%s/%s/block.mdb", ing, name);
}

bool bkt_index_key_parse(const char *key, int64_t *start_ns, char name[BKT_NAME_MAX])
{
    const char *slash = strrchr(key, '/');
    const char *base = slash ? slash + 1 : key;
    size_t len = strlen(base);
    long long sec;
    if (len <= 5 || len - 5 >= BKT_NAME_MAX || strcmp(base + len - 5, ".json") != 0 ||
        base[0] < '0' || base[0] > '9' || sscanf(base, "%lld-", &sec) != 1 ||
        sec > INT64_MAX / 1000000000 || sec < INT64_MIN / 1000000000)
        return false;
    *start_ns = (int64_t)sec * 1000000000;
    snprintf(name, BKT_NAME_MAX, "%.*s", (int)(len - 5), base);
    return true;
}

int bkt_uploads_dir(const char *data_dir, char *out, size_t size)
{
    snprintf(out, size, "%s/uploads", data_dir);
    if (mkdir(out, 0755) != 0 && errno != EEXIST) {
        LC_LOG_ERROR("cannot make dir=%s err=\"%s\"", out, strerror(errno));
        return LC_ESTORE;
    }
    return 0;
}

int bkt_life(const char *uploads, char out[17])
{
    char path[4096];
    snprintf(path, sizeof path, "%s/life", uploads);
    uint8_t *data;
    size_t len;
    if (bkt_file_read(path, 64, &data, &len) == 0) {
        bool ok = len >= 16;
        if (ok)
            memcpy(out, data, 16);
        out[16] = '\0';
        lc_free(data);
        if (ok)
            return 0;
    }
    uint8_t rnd[8];
    if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
        return LC_ESTORE;
    for (int i = 0; i < 8; i++)
        snprintf(out + 2 * i, 3, "%02x", rnd[i]);
    return bkt_file_write(path, out, 16);
}

int bkt_record_parse(const char *text, char name[BKT_NAME_MAX], char version[BKT_VERSION_MAX])
{
    size_t n_name = strcspn(text, " "), n_version;
    if (text[n_name] != ' ')
        return LC_ECORRUPT;
    n_version = strcspn(text + n_name + 1, " \n");
    if (n_name == 0 || n_name >= BKT_NAME_MAX || n_version == 0 || n_version >= BKT_VERSION_MAX)
        return LC_ECORRUPT;
    snprintf(name, BKT_NAME_MAX, "%.*s", (int)n_name, text);
    snprintf(version, BKT_VERSION_MAX, "%.*s", (int)n_version, text + n_name + 1);
    return 0;
}

int bkt_record_read(const char *uploads, const char *start, char name[BKT_NAME_MAX],
                    char version[BKT_VERSION_MAX])
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", uploads, start);
    uint8_t *data;
    size_t len;
    int rc = bkt_file_read(path, BKT_RECORD_MAX_BYTES, &data, &len);
    if (rc)
        return rc;
    char text[BKT_RECORD_MAX_BYTES + 1];
    memcpy(text, data, len);
    text[len] = '\0';
    lc_free(data);
    return bkt_record_parse(text, name, version);
}

int bkt_record_write(const char *uploads, const char *start, const char *name, const char *version)
{
    char path[4096], text[BKT_NAME_MAX + BKT_VERSION_MAX + 4];
    snprintf(path, sizeof path, "%s/%s", uploads, start);
    int n = snprintf(text, sizeof text, "%s %s\n", name, version);
    return bkt_file_write(path, text, (size_t)n);
}

int bkt_file_read(const char *path, size_t max, uint8_t **data, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? LC_ENOTFOUND : LC_ESTORE;
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size > max) {
        close(fd);
        return LC_ETOOBIG;
    }
    size_t n = (size_t)st.st_size, got = 0;
    uint8_t *buf = lc_xmalloc(n + 1);
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) {
        lc_free(buf);
        return LC_ESTORE;
    }
    *data = buf;
    *len = n;
    return 0;
}

static int bkt_write_all(int fd, const uint8_t *p, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static void bkt_sync_parent(const char *path)
{
    char copy[4096];
    snprintf(copy, sizeof copy, "%s", path);
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
}

int bkt_file_write(const char *path, const void *data, size_t len)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return LC_ESTORE;
    bool ok = bkt_write_all(fd, data, len) == 0 && fsync(fd) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        LC_LOG_ERROR("cannot write path=%s err=\"%s\"", path, strerror(errno));
        unlink(tmp);
        return LC_ESTORE;
    }
    bkt_sync_parent(path);
    return 0;
}

int bkt_cache_file_write(const char *path, const void *data, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return LC_ESTORE;
    bool ok = bkt_write_all(fd, data, len) == 0;
    if (!(close(fd) == 0 && ok)) {
        LC_LOG_ERROR("cannot write path=%s err=\"%s\"", path, strerror(errno));
        return LC_ESTORE;
    }
    return 0;
}

int bkt_meta_parse(const uint8_t *text, size_t len, bkt_meta_t *m)
{
    json_t *j = json_loadb((const char *)text, len, 0, NULL);
    const char *format = NULL, *start = NULL, *data = NULL, *version = NULL;
    json_int_t end_ns = 0;
    int rc = j && json_unpack(j, "{s:s, s:s, s:s, s:s, s:I}", "format", &format, "block", &start,
                              "data", &data, "version", &version, "end_ns", &end_ns) == 0
                 ? 0
                 : LC_ECORRUPT;
    if (!rc && (strcmp(format, BKT_FORMAT) != 0 || !start[0] || strlen(start) >= sizeof m->start ||
                strspn(start, "-0123456789") != strlen(start) || !lc_objstore_key_valid(data) ||
                strlen(version) >= sizeof m->version))
        rc = LC_ECORRUPT;
    if (!rc) {
        snprintf(m->start, sizeof m->start, "%s", start);
        snprintf(m->data, sizeof m->data, "%s", data);
        snprintf(m->version, sizeof m->version, "%s", version);
        m->end_ns = (int64_t)end_ns;
    }
    json_decref(j);
    return rc;
}

/* ---------------------------------------------------------------- rollup entries */

int64_t bkt_rollup_level_ns(int level)
{
    static const int64_t ns[BKT_ROLLUP_LEVELS] = {6 * 3600 * 1000000000LL,
                                                  24 * 3600 * 1000000000LL};
    return level >= 0 && level < BKT_ROLLUP_LEVELS ? ns[level] : 0;
}

bool bkt_rollup_index_key_parse(const char *key, int64_t *window_ns, int *level)
{
    char name[BKT_NAME_MAX];
    long long sec;
    int lv, used = 0;
    if (!bkt_index_key_parse(key, window_ns, name) ||
        sscanf(name, "%lld-%d-%n", &sec, &lv, &used) != 2 || used == 0 ||
        bkt_rollup_level_ns(lv) == 0 || *window_ns % bkt_rollup_level_ns(lv) != 0)
        return false;
    *level = lv;
    return true;
}

/* "rollups/<ing>/<name>/rollup.mdb" -> name (digits, '-', lower hex). */
static bool rollup_data_name(const char *key, char name[BKT_NAME_MAX])
{
    static const char suffix[] = "/rollup.mdb";
    size_t len = strlen(key), sl = sizeof suffix - 1;
    if (!lc_objstore_key_valid(key) || strncmp(key, "rollups/", 8) != 0 || len <= sl ||
        strcmp(key + len - sl, suffix) != 0)
        return false;
    const char *end = key + len - sl, *p = end;
    while (p > key && p[-1] != '/')
        p--;
    size_t n = (size_t)(end - p);
    if (n == 0 || n >= BKT_NAME_MAX || p[0] < '0' || p[0] > '9' ||
        strspn(p, "0123456789abcdef-") < n)
        return false;
    snprintf(name, BKT_NAME_MAX, "%.*s", (int)n, p);
    return true;
}

static int rollup_objects_parse(json_t *objs, bkt_rollup_entry_t *e)
{
    size_t n = json_array_size(objs);
    if (n == 0 || n > BKT_ROLLUP_MAX_OBJECTS)
        return LC_ECORRUPT;
    for (size_t i = 0; i < n; i++) {
        const char *name = NULL, *version = NULL;
        if (json_unpack(json_array_get(objs, i), "{s:s, s:s}", "name", &name, "version",
                        &version) != 0 ||
            !name[0] || strlen(name) >= BKT_NAME_MAX || !version[0] ||
            strlen(version) >= BKT_VERSION_MAX)
            return LC_ECORRUPT;
        snprintf(e->objs[i].name, BKT_NAME_MAX, "%s", name);
        snprintf(e->objs[i].version, BKT_VERSION_MAX, "%s", version);
    }
    e->n = n;
    return 0;
}

int bkt_rollup_entry_parse(const uint8_t *text, size_t len, bkt_rollup_entry_t *e)
{
    if (len > BKT_ROLLUP_ENTRY_MAX_BYTES)
        return LC_ECORRUPT;
    json_t *j = json_loadb((const char *)text, len, 0, NULL), *objs = NULL;
    const char *format = NULL, *data = NULL;
    json_int_t level = -1, start_ns = 0;
    int guarded = 0; /* absent in entries written before the rule */
    int rc = j && json_unpack(j, "{s:s, s:I, s:I, s:s, s:o, s?b}", "format", &format, "level",
                              &level, "start_ns", &start_ns, "data", &data, "objects", &objs,
                              "guarded", &guarded) == 0
                 ? 0
                 : LC_ECORRUPT;
    if (!rc && (strcmp(format, BKT_ROLLUP_FORMAT) != 0 || level < 0 || level >= BKT_ROLLUP_LEVELS ||
                start_ns % bkt_rollup_level_ns((int)level) != 0 ||
                strlen(data) > LC_OBJSTORE_KEY_MAX || !rollup_data_name(data, e->data_name)))
        rc = LC_ECORRUPT;
    if (!rc)
        rc = rollup_objects_parse(objs, e);
    if (!rc) {
        e->level = (int)level;
        e->guarded = guarded != 0;
        e->start_ns = (int64_t)start_ns;
        snprintf(e->data, sizeof e->data, "%s", data);
    }
    json_decref(j);
    return rc;
}
