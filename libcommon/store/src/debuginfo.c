/*
 * debuginfo.c — the debug-file store on disk (lc/debuginfo.h): one directory
 * per tenant, one file per build id, written whole through a temporary name.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lc/alloc.h"
#include "lc/debuginfo.h"
#include "lc/log.h"

#define DEBUG_SUFFIX ".debug"
/* A tenant's directory name: each byte escaped as at most 3 characters. */
#define TENANT_DIR_MAX (3 * 256 + 1)

struct lc_debuginfo_s {
    char *dir;
    lc_debuginfo_limits_t limits;
    pthread_mutex_t put_lock; /* a tenant's total is checked and raised as one step */
};

int lc_debuginfo_open(const char *dir, const lc_debuginfo_limits_t *limits, lc_debuginfo_t **out)
{
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        int e = errno;
        LC_LOG_ERROR("debuginfo: cannot create %s: %s", dir, strerror(e));
        return -e;
    }
    lc_debuginfo_t *d = lc_xcalloc(1, sizeof(*d));
    d->dir = lc_xstrdup(dir);
    d->limits = *limits;
    pthread_mutex_init(&d->put_lock, NULL);
    *out = d;
    return 0;
}

void lc_debuginfo_close(lc_debuginfo_t *d)
{
    if (!d)
        return;
    pthread_mutex_destroy(&d->put_lock);
    lc_free(d->dir);
    lc_free(d);
}

const lc_debuginfo_limits_t *lc_debuginfo_limits(const lc_debuginfo_t *d)
{
    return &d->limits;
}

int lc_build_id_normalize(const char *in, char out[LC_BUILD_ID_HEX_MAX + 1], lc_status_t *st)
{
    size_t n = in ? strlen(in) : 0;
    if (n == 0 || n % 2 || n > LC_BUILD_ID_HEX_MAX)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "build id must be 2 to %d hex digits, an even number",
                             LC_BUILD_ID_HEX_MAX);
    for (size_t i = 0; i < n; i++) {
        char c = in[i];
        if (c >= 'A' && c <= 'F')
            c = (char)(c - 'A' + 'a');
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "build id is not hex");
        out[i] = c;
    }
    out[n] = '\0';
    return 0;
}

/* A tenant id as one safe path component: letters, digits, '_' and '-' as
 * they are, every other byte as %XX (so "." and ".." cannot occur). */
static void tenant_dir_name(const char *tenant, char out[TENANT_DIR_MAX])
{
    size_t k = 0;
    for (const unsigned char *p = (const unsigned char *)tenant; *p && k + 4 < TENANT_DIR_MAX;
         p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
            *p == '_' || *p == '-')
            out[k++] = (char)*p;
        else
            k += (size_t)snprintf(out + k, 4, "%%%02X", *p);
    }
    if (k == 0)
        out[k++] = '_';
    out[k] = '\0';
}

static int tenant_path(const lc_debuginfo_t *d, const char *tenant, char out[LC_DEBUGINFO_PATH_MAX])
{
    char t[TENANT_DIR_MAX];
    tenant_dir_name(tenant, t);
    int n = snprintf(out, LC_DEBUGINFO_PATH_MAX, "%s/%s", d->dir, t);
    return n > 0 && n < LC_DEBUGINFO_PATH_MAX ? 0 : LC_ETOOBIG;
}

/* build_id must be normalised already. */
static int file_path(const lc_debuginfo_t *d, const char *tenant, const char *build_id,
                     char out[LC_DEBUGINFO_PATH_MAX])
{
    char t[TENANT_DIR_MAX];
    tenant_dir_name(tenant, t);
    int n = snprintf(out, LC_DEBUGINFO_PATH_MAX, "%s/%s/%s" DEBUG_SUFFIX, d->dir, t, build_id);
    return n > 0 && n < LC_DEBUGINFO_PATH_MAX ? 0 : LC_ETOOBIG;
}

static bool normalized(const char *build_id, char out[LC_BUILD_ID_HEX_MAX + 1])
{
    lc_status_t st;
    return lc_build_id_normalize(build_id, out, &st) == 0;
}

/* The build id of a stored file's name ("<hex>.debug"), or false. */
static bool entry_build_id(const char *name, char out[LC_BUILD_ID_HEX_MAX + 1])
{
    size_t n = strlen(name), s = strlen(DEBUG_SUFFIX);
    if (n <= s || n - s > LC_BUILD_ID_HEX_MAX || strcmp(name + n - s, DEBUG_SUFFIX) != 0)
        return false;
    char id[LC_BUILD_ID_HEX_MAX + 1];
    memcpy(id, name, n - s);
    id[n - s] = '\0';
    return normalized(id, out) && strcmp(id, out) == 0;
}

int lc_debuginfo_list(lc_debuginfo_t *d, const char *tenant, lc_debuginfo_list_fn fn, void *data)
{
    char dir[LC_DEBUGINFO_PATH_MAX];
    if (tenant_path(d, tenant, dir))
        return 0;
    DIR *dh = opendir(dir);
    if (!dh)
        return 0;
    int rc = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(dh)) != NULL) {
        lc_debuginfo_entry_t e;
        struct stat sb;
        if (!entry_build_id(de->d_name, e.build_id) || fstatat(dirfd(dh), de->d_name, &sb, 0))
            continue;
        e.size = (uint64_t)sb.st_size;
        e.mtime_ns = (int64_t)sb.st_mtim.tv_sec * 1000000000LL + sb.st_mtim.tv_nsec;
        rc = fn(&e, data);
    }
    closedir(dh);
    return rc;
}

static int add_size(const lc_debuginfo_entry_t *e, void *data)
{
    *(uint64_t *)data += e->size;
    return 0;
}

bool lc_debuginfo_has(lc_debuginfo_t *d, const char *tenant, const char *build_id, uint64_t *size)
{
    char id[LC_BUILD_ID_HEX_MAX + 1], path[LC_DEBUGINFO_PATH_MAX];
    struct stat sb;
    if (!normalized(build_id, id) || file_path(d, tenant, id, path) || stat(path, &sb) != 0)
        return false;
    if (size)
        *size = (uint64_t)sb.st_size;
    return true;
}

int lc_debuginfo_path(lc_debuginfo_t *d, const char *tenant, const char *build_id,
                      char out[LC_DEBUGINFO_PATH_MAX])
{
    char id[LC_BUILD_ID_HEX_MAX + 1];
    if (!normalized(build_id, id) || file_path(d, tenant, id, out) || access(out, R_OK) != 0)
        return LC_ENOTFOUND;
    return 0;
}

int lc_debuginfo_delete(lc_debuginfo_t *d, const char *tenant, const char *build_id)
{
    char id[LC_BUILD_ID_HEX_MAX + 1], path[LC_DEBUGINFO_PATH_MAX];
    if (!normalized(build_id, id) || file_path(d, tenant, id, path) || unlink(path) != 0)
        return LC_ENOTFOUND;
    return 0;
}

static int write_fully(int fd, const uint8_t *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Writes data to path through path.tmp: synced, then renamed into place. */
static int write_file_atomically(const char *path, const uint8_t *data, size_t len, lc_status_t *st)
{
    char tmp[LC_DEBUGINFO_PATH_MAX + 8];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return lc_status_set(st, LC_CODE_INTERNAL, "cannot write the debug file: %s",
                             strerror(errno));
    int rc = write_fully(fd, data, len);
    if (rc == 0)
        rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc == 0 && rename(tmp, path) == 0)
        return 0;
    e = rc ? e : errno;
    unlink(tmp);
    return lc_status_set(st, LC_CODE_INTERNAL, "cannot write the debug file: %s", strerror(e));
}

/* Under put_lock: the tenant's total with this file (replacing its own
 * previous version) within the limit, then the write. */
static int put_locked(lc_debuginfo_t *d, const char *tenant, const char *id, const uint8_t *data,
                      size_t len, lc_status_t *st)
{
    char dir[LC_DEBUGINFO_PATH_MAX], path[LC_DEBUGINFO_PATH_MAX];
    if (tenant_path(d, tenant, dir) || file_path(d, tenant, id, path))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "tenant id too long");
    uint64_t total = 0, previous = 0;
    if (lc_debuginfo_list(d, tenant, add_size, &total) != 0)
        return lc_status_set(st, LC_CODE_INTERNAL, "cannot list the tenant's debug files");
    (void)lc_debuginfo_has(d, tenant, id, &previous);
    uint64_t need = total - previous + len;
    if (need > d->limits.max_tenant_bytes)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "the tenant's debug files would take %llu bytes, over the limit of "
                             "%llu; nothing was stored (delete some first)",
                             (unsigned long long)need,
                             (unsigned long long)d->limits.max_tenant_bytes);
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return lc_status_set(st, LC_CODE_INTERNAL, "cannot create %s: %s", dir, strerror(errno));
    return write_file_atomically(path, data, len, st);
}

/* gnu: the id must be the file's NT_GNU_BUILD_ID note. */
static int put_checked(lc_debuginfo_t *d, const char *tenant, const char *build_id, bool gnu,
                       const uint8_t *data, size_t len, lc_status_t *st)
{
    char id[LC_BUILD_ID_HEX_MAX + 1];
    if (lc_build_id_normalize(build_id, id, st))
        return -1;
    if (len > d->limits.max_file_bytes)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED,
                             "debug file of %zu bytes is over the limit of %llu; nothing was "
                             "stored",
                             len, (unsigned long long)d->limits.max_file_bytes);
    if (lc_debuginfo_check_elf(data, len, gnu ? id : NULL, d->limits.max_inflated_bytes, st))
        return -1;
    pthread_mutex_lock(&d->put_lock);
    int rc = put_locked(d, tenant, id, data, len, st);
    pthread_mutex_unlock(&d->put_lock);
    if (rc == 0)
        LC_LOG_INFO("debuginfo: stored %s for tenant %s (%zu bytes)", id, tenant, len);
    return rc;
}

int lc_debuginfo_put(lc_debuginfo_t *d, const char *tenant, const char *build_id,
                     const uint8_t *data, size_t len, lc_status_t *st)
{
    return put_checked(d, tenant, build_id, true, data, len, st);
}

int lc_debuginfo_put_file_hash(lc_debuginfo_t *d, const char *tenant, const char *file_hash,
                               const uint8_t *data, size_t len, lc_status_t *st)
{
    return put_checked(d, tenant, file_hash, false, data, len, st);
}
