/*
 * objstore_fs.c — the filesystem backend: one file per object under fs_dir,
 * key segments as directories. Each file starts with a fixed-size header line
 * carrying the SHA-256 of the bytes after it. Writes go to a hidden temp file
 * in the same directory, are fsynced and renamed over the key (the directory
 * synced after), so a reader (or a crash) never sees half an object.
 * Threading: as lc/objstore.h.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lc/alloc.h"
#include "objstore_int.h"

#define FS_MAGIC "ember-obj1 "
#define FS_HEADER_LEN (sizeof FS_MAGIC - 1 + 2 * LC_SHA256_BYTES + 1)
#define FS_TMP_MARK ".tmp-" /* temp files start with this; never listed */
#define FS_DEPTH_MAX 64

static char *fs_path(const lc_objstore_t *s, const char *key)
{
    size_t n = strlen(s->fs_dir) + 1 + strlen(key) + 1;
    char *p = lc_xmalloc(n);
    snprintf(p, n, "%s/%s", s->fs_dir, key);
    return p;
}

/* mkdir -p of every directory above path. */
static int make_parents(char *path)
{
    for (char *c = path + 1; *c; c++) {
        if (*c != '/')
            continue;
        *c = '\0';
        int rc = mkdir(path, 0755);
        *c = '/';
        if (rc != 0 && errno != EEXIST)
            return -errno;
    }
    return 0;
}

static int write_all(int fd, const void *data, size_t len)
{
    const uint8_t *p = data;
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static int write_temp(int fd, const void *data, size_t len)
{
    char hex[LC_SHA256_HEX];
    char header[FS_HEADER_LEN + 1];
    objstore_sha256_hex(data, len, hex);
    snprintf(header, sizeof header, "%s%s\n", FS_MAGIC, hex);
    int rc = write_all(fd, header, FS_HEADER_LEN);
    if (rc == 0)
        rc = write_all(fd, data, len);
    if (rc == 0 && fsync(fd) != 0)
        rc = -errno;
    return rc;
}

/* The rename is durable only once the directory is synced too. */
static int sync_parent(const char *path)
{
    const char *slash = strrchr(path, '/');
    char *dir = lc_xstrndup(path, (size_t)(slash - path));
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int rc = fd < 0 || fsync(fd) != 0 ? -errno : 0;
    if (fd >= 0)
        close(fd);
    lc_free(dir);
    return rc;
}

static int fs_put(lc_objstore_t *s, const char *key, const void *data, size_t len)
{
    char *path = fs_path(s, key);
    size_t tn = strlen(path) + sizeof FS_TMP_MARK + 8;
    char *tmp = lc_xmalloc(tn);
    const char *slash = strrchr(path, '/');
    snprintf(tmp, tn, "%.*s/" FS_TMP_MARK "XXXXXX", (int)(slash - path), path);
    int rc = make_parents(path);
    int fd = rc == 0 ? mkstemp(tmp) : -1;
    if (rc == 0 && fd < 0)
        rc = -errno;
    if (fd >= 0) {
        rc = write_temp(fd, data, len);
        close(fd);
        if (rc == 0 && rename(tmp, path) != 0)
            rc = -errno;
        if (rc == 0)
            rc = sync_parent(path);
        if (rc != 0)
            unlink(tmp);
    }
    if (rc != 0)
        objstore_set_error(s, "writing %s: %s", path, strerror(-rc));
    lc_free(tmp);
    lc_free(path);
    return rc;
}

static int read_at(int fd, uint8_t *buf, size_t n, off_t off, size_t *got)
{
    *got = 0;
    while (*got < n) {
        ssize_t r = pread(fd, buf + *got, n - *got, off + (off_t)*got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    return 0;
}

/* Opens the object and checks its header; *size is the object's size. */
static int fs_open_obj(lc_objstore_t *s, const char *key, char header[FS_HEADER_LEN],
                       uint64_t *size, int *fd_out)
{
    char *path = fs_path(s, key);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    lc_free(path);
    if (fd < 0)
        return errno == ENOENT || errno == ENOTDIR ? LC_ENOTFOUND : -errno;
    struct stat st;
    size_t got = 0;
    int rc = fstat(fd, &st) != 0 ? -errno : read_at(fd, (uint8_t *)header, FS_HEADER_LEN, 0, &got);
    if (rc == 0 && (got != FS_HEADER_LEN || memcmp(header, FS_MAGIC, sizeof FS_MAGIC - 1) != 0 ||
                    header[FS_HEADER_LEN - 1] != '\n')) {
        objstore_set_error(s, "%s: not an ember object (bad header)", key);
        rc = LC_ECORRUPT;
    }
    if (rc != 0) {
        close(fd);
        return rc;
    }
    *size = (uint64_t)st.st_size - FS_HEADER_LEN;
    *fd_out = fd;
    return 0;
}

static int fs_verify(lc_objstore_t *s, const char *key, const char header[FS_HEADER_LEN],
                     const uint8_t *data, size_t len)
{
    char hex[LC_SHA256_HEX];
    objstore_sha256_hex(data, len, hex);
    if (memcmp(hex, header + sizeof FS_MAGIC - 1, 2 * LC_SHA256_BYTES) == 0)
        return 0;
    objstore_set_error(s, "%s: sha256 mismatch (stored %.64s, read %s)", key,
                       header + sizeof FS_MAGIC - 1, hex);
    return LC_ECORRUPT;
}

static int fs_get(lc_objstore_t *s, const char *key, uint64_t off, uint64_t n, uint8_t **data,
                  size_t *len)
{
    char header[FS_HEADER_LEN];
    uint64_t size = 0;
    int fd = -1;
    int rc = fs_open_obj(s, key, header, &size, &fd);
    if (rc != 0)
        return rc;
    if (n == 0 && size > s->o.max_object_bytes) {
        close(fd);
        return LC_ETOOBIG;
    }
    uint64_t want = n == 0 ? size : (off >= size ? 0 : (size - off < n ? size - off : n));
    uint8_t *buf = lc_xmalloc(want ? want : 1);
    size_t got = 0;
    rc = read_at(fd, buf, want, (off_t)(FS_HEADER_LEN + (n == 0 ? 0 : off)), &got);
    close(fd);
    if (rc == 0 && got != want)
        rc = LC_ECORRUPT; /* shrank under us: only a foreign writer does that */
    if (rc == 0 && n == 0)
        rc = fs_verify(s, key, header, buf, got);
    if (rc != 0) {
        lc_free(buf);
        return rc;
    }
    *data = buf;
    *len = got;
    return 0;
}

static int fs_head(lc_objstore_t *s, const char *key, uint64_t *size)
{
    char header[FS_HEADER_LEN];
    int fd = -1;
    int rc = fs_open_obj(s, key, header, size, &fd);
    if (rc == 0)
        close(fd);
    return rc;
}

static int fs_del(lc_objstore_t *s, const char *key)
{
    char *path = fs_path(s, key);
    int rc = unlink(path) == 0 || errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
    lc_free(path);
    return rc;
}

static int fs_walk(lc_objstore_t *s, char *rel, size_t rel_cap, const char *prefix,
                   lc_objstore_list_t *out, int depth);

/* One directory entry: recurse into directories, list matching files. */
static int fs_walk_entry(lc_objstore_t *s, char *rel, size_t rel_cap, const char *name,
                         const char *prefix, lc_objstore_list_t *out, int depth)
{
    size_t base = strlen(rel);
    if (base + 1 + strlen(name) + 1 > rel_cap)
        return 0; /* longer than any valid key */
    snprintf(rel + base, rel_cap - base, "%s%s", base ? "/" : "", name);
    char *path = fs_path(s, rel);
    struct stat st;
    int rc = 0;
    bool seen = lstat(path, &st) == 0;
    if (seen && S_ISDIR(st.st_mode))
        rc = fs_walk(s, rel, rel_cap, prefix, out, depth + 1);
    else if (seen && S_ISREG(st.st_mode) && strncmp(rel, prefix, strlen(prefix)) == 0 &&
             lc_objstore_key_valid(rel))
        rc = objstore_list_push(
            s, out, rel, strlen(rel),
            st.st_size > (off_t)FS_HEADER_LEN ? (uint64_t)st.st_size - FS_HEADER_LEN : 0);
    lc_free(path);
    rel[base] = '\0';
    return rc;
}

static int fs_walk(lc_objstore_t *s, char *rel, size_t rel_cap, const char *prefix,
                   lc_objstore_list_t *out, int depth)
{
    if (depth > FS_DEPTH_MAX)
        return 0;
    char *path = *rel ? fs_path(s, rel) : lc_xstrdup(s->fs_dir);
    DIR *d = opendir(path);
    lc_free(path);
    if (!d)
        return 0;
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') /* ".", "..", temp files */
            continue;
        rc = fs_walk_entry(s, rel, rel_cap, e->d_name, prefix, out, depth);
    }
    closedir(d);
    return rc;
}

typedef struct {
    char *key;
    uint64_t size;
} listed_t;

static int cmp_listed(const void *a, const void *b)
{
    return strcmp(((const listed_t *)a)->key, ((const listed_t *)b)->key);
}

/* S3's order: lexical by key, each size staying with its key. */
static void sort_listed(lc_objstore_list_t *l)
{
    listed_t *v = lc_xmalloc(l->n * sizeof *v);
    for (size_t i = 0; i < l->n; i++)
        v[i] = (listed_t){l->keys[i], l->sizes[i]};
    qsort(v, l->n, sizeof *v, cmp_listed);
    for (size_t i = 0; i < l->n; i++) {
        l->keys[i] = v[i].key;
        l->sizes[i] = v[i].size;
    }
    lc_free(v);
}

static int fs_list(lc_objstore_t *s, const char *prefix, lc_objstore_list_t *out)
{
    char rel[LC_OBJSTORE_KEY_MAX + 2] = "";
    int rc = fs_walk(s, rel, sizeof rel, prefix, out, 0);
    if (rc == 0 && out->n > 1)
        sort_listed(out);
    return rc;
}

static void fs_close(lc_objstore_t *s)
{
    LC_UNUSED(s);
}

static const objstore_ops_t fs_ops = {
    .put = fs_put,
    .get = fs_get,
    .head = fs_head,
    .del = fs_del,
    .list = fs_list,
    .close = fs_close,
};

int objstore_fs_open(lc_objstore_t *s)
{
    size_t n = strlen(s->fs_dir);
    while (n > 1 && s->fs_dir[n - 1] == '/')
        s->fs_dir[--n] = '\0';
    char *probe = fs_path(s, "x"); /* make_parents creates fs_dir itself */
    int rc = make_parents(probe);
    lc_free(probe);
    if (rc != 0)
        return rc;
    s->ops = &fs_ops;
    return 0;
}
