/*
 * auth.c — credentials bound to tenants (lc/auth.h): the tokens file, its
 * SIGHUP reload, SHA-256, and the check every tenant lookup makes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "lc/alloc.h"
#include "lc/auth.h"
#include "lc/base64.h"
#include "lc/hash.h"
#include "lc/log.h"

/* ---------------------------------------------------------------- SHA-256 (FIPS 180-4) */

static const uint32_t sha_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha_block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            k + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + sha_k[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g, g = f, f = e, e = d + t1, d = c, c = b, b = a, a = t1 + t2;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e, h[5] += f, h[6] += g, h[7] += k;
}

void lc_sha256(const void *data, size_t len, uint8_t out[LC_SHA256_BYTES])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    const uint8_t *p = data;
    size_t left = len;
    for (; left >= 64; p += 64, left -= 64)
        sha_block(h, p);
    uint8_t tail[128] = {0};
    memcpy(tail, p, left);
    tail[left] = 0x80;
    size_t tl = left < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[tl - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha_block(h, tail);
    if (tl == 128)
        sha_block(h, tail + 64);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}

/* ---------------------------------------------------------------- the table */

typedef struct cred_s {
    bool basic; /* else a bearer token */
    char *user; /* basic only */
    uint8_t digest[LC_SHA256_BYTES];
    bool any_tenant, can_read, can_write;
    char **tenants;
    size_t n_tenants;
} cred_t;

typedef struct table_s {
    cred_t *v;
    size_t n;
} table_t;

static pthread_rwlock_t auth_lock = PTHREAD_RWLOCK_INITIALIZER;
static table_t *auth_table; /* NULL: auth is off */
static char *auth_path;
static uv_signal_t auth_sighup;

static void table_free(table_t *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->n; i++) {
        lc_free(t->v[i].user);
        for (size_t j = 0; j < t->v[i].n_tenants; j++)
            lc_free(t->v[i].tenants[j]);
        lc_free(t->v[i].tenants);
    }
    lc_free(t->v);
    lc_free(t);
}

static int parse_digest(const char *s, uint8_t out[LC_SHA256_BYTES])
{
    if (strncmp(s, "sha256:", 7) != 0 || strlen(s + 7) != 2 * LC_SHA256_BYTES)
        return -1;
    s += 7;
    for (int i = 0; i < LC_SHA256_BYTES; i++) {
        int hi = lc_hex_digit(s[2 * i]), lo = lc_hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* "a,b,c" -> list; "*" -> any. */
static int parse_tenants(char *v, cred_t *c)
{
    for (char *save = NULL, *t = strtok_r(v, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "*") == 0) {
            c->any_tenant = true;
            continue;
        }
        c->tenants = lc_xrealloc(c->tenants, (c->n_tenants + 1) * sizeof(char *));
        c->tenants[c->n_tenants++] = lc_xstrdup(t);
    }
    return c->any_tenant || c->n_tenants ? 0 : -1;
}

static int parse_scope(char *v, cred_t *c)
{
    for (char *save = NULL, *t = strtok_r(v, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (strcmp(t, "read") == 0)
            c->can_read = true;
        else if (strcmp(t, "write") == 0)
            c->can_write = true;
        else
            return -1;
    }
    return c->can_read || c->can_write ? 0 : -1;
}

/* One non-comment line: kind, [user], digest, tenants=..., scope=... */
static int parse_line(char *line, cred_t *c)
{
    char *f[6], *save = NULL;
    int n = 0;
    for (char *t = strtok_r(line, " \t", &save); t && n < 6; t = strtok_r(NULL, " \t", &save))
        f[n++] = t;
    memset(c, 0, sizeof(*c));
    int i = 0;
    if (n == 4 && strcmp(f[0], "token") == 0) {
        i = 1;
    } else if (n == 5 && strcmp(f[0], "basic") == 0 && !strchr(f[1], ':')) {
        c->basic = true;
        c->user = lc_xstrdup(f[1]);
        i = 2;
    } else {
        return -1;
    }
    if (parse_digest(f[i], c->digest) != 0 || strncmp(f[i + 1], "tenants=", 8) != 0 ||
        strncmp(f[i + 2], "scope=", 6) != 0 || parse_tenants(f[i + 1] + 8, c) != 0 ||
        parse_scope(f[i + 2] + 6, c) != 0)
        return -1;
    return 0;
}

static void cred_fini(cred_t *c)
{
    lc_free(c->user);
    for (size_t j = 0; j < c->n_tenants; j++)
        lc_free(c->tenants[j]);
    lc_free(c->tenants);
}

static int table_parse(const char *text, table_t **out, lc_status_t *st)
{
    table_t *t = lc_xcalloc(1, sizeof(*t));
    char *copy = lc_xstrdup(text), *save = NULL;
    int lineno = 0, rc = 0;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        line[strcspn(line, "\r#")] = '\0';
        if (line[strspn(line, " \t")] == '\0')
            continue;
        cred_t c;
        if (parse_line(line, &c) != 0) {
            cred_fini(&c);
            rc = lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                               "auth tokens file: line %d is not `token sha256:<hex> tenants=.. "
                               "scope=..` or `basic <user> sha256:<hex> tenants=.. scope=..`",
                               lineno);
            break;
        }
        t->v = lc_xrealloc(t->v, (t->n + 1) * sizeof(*t->v));
        t->v[t->n++] = c;
    }
    lc_free(copy);
    if (rc) {
        table_free(t);
        return LC_EINPUT;
    }
    *out = t;
    return 0;
}

static void table_swap(table_t *t)
{
    pthread_rwlock_wrlock(&auth_lock);
    table_t *old = auth_table;
    auth_table = t;
    pthread_rwlock_unlock(&auth_lock);
    table_free(old);
}

int lc_auth_load_text(const char *text, lc_status_t *st)
{
    table_t *t;
    int rc = table_parse(text, &t, st);
    if (rc == 0)
        table_swap(t);
    return rc;
}

void lc_auth_reset(void)
{
    table_swap(NULL);
}

bool lc_auth_enabled(void)
{
    pthread_rwlock_rdlock(&auth_lock);
    bool on = auth_table != NULL;
    pthread_rwlock_unlock(&auth_lock);
    return on;
}

/* ---------------------------------------------------------------- the file */

static int load_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        LC_LOG_ERROR("auth: cannot read the tokens file path=%s", path);
        return LC_EINPUT;
    }
    lc_buf_t b;
    lc_buf_init(&b, 16u << 20);
    char chunk[4096];
    size_t n;
    int rc = 0;
    while (rc == 0 && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        rc = lc_buf_append(&b, chunk, n);
    fclose(f);
    if (rc == 0)
        rc = lc_buf_append(&b, "", 1);
    lc_status_t st = {0};
    if (rc == 0)
        rc = lc_auth_load_text((const char *)b.data, &st);
    lc_buf_fini(&b);
    if (rc)
        LC_LOG_ERROR("auth: tokens file not loaded path=%s err=\"%s\"", path,
                     st.msg[0] ? st.msg : "too large");
    return rc ? LC_EINPUT : 0;
}

int lc_auth_reload(void)
{
    if (!auth_path)
        return 0;
    int rc = load_file(auth_path); /* a bad file keeps the table loaded before */
    if (rc == 0)
        LC_LOG_INFO("auth: tokens file loaded path=%s", auth_path);
    return rc;
}

static void auth_on_sighup(uv_signal_t *h, int signum)
{
    (void)h;
    (void)signum;
    if (lc_auth_reload() != 0)
        LC_LOG_WARN("auth: SIGHUP reload failed; the tokens loaded before stay in force");
}

int lc_auth_init(uv_loop_t *loop, const char *path)
{
    if (!path || !*path)
        return 0;
    lc_free(auth_path);
    auth_path = lc_xstrdup(path);
    int rc = lc_auth_reload();
    if (rc == 0 && loop && uv_signal_init(loop, &auth_sighup) == 0) {
        uv_signal_start(&auth_sighup, auth_on_sighup, SIGHUP);
        uv_unref((uv_handle_t *)&auth_sighup); /* never keeps the loop alive */
    }
    return rc;
}

/* ---------------------------------------------------------------- the check */

static bool digest_eq(const uint8_t *a, const uint8_t *b)
{
    uint8_t diff = 0;
    for (int i = 0; i < LC_SHA256_BYTES; i++)
        diff |= a[i] ^ b[i];
    return diff == 0;
}

/* Strict base64 (padding required) into out (NUL-terminated); -1 if bad. */
static int b64_decode(const char *s, char *out, size_t size)
{
    size_t len = strlen(s), o = 0;
    if (len == 0 || len % 4 || len / 4 * 3 >= size)
        return -1;
    for (size_t i = 0; i < len; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++) {
            v[j] = s[i + j] == '=' && i + 4 == len && j >= 2 ? 0 : lc_base64_digit(s[i + j], false);
            if (v[j] < 0)
                return -1;
        }
        uint32_t x =
            (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
        out[o++] = (char)(x >> 16);
        if (s[i + 2] != '=')
            out[o++] = (char)(x >> 8);
        if (s[i + 3] != '=')
            out[o++] = (char)x;
    }
    out[o] = '\0';
    return memchr(out, '\0', o) ? -1 : 0;
}

/* The credential the header names, or NULL. Every entry is compared (no
 * early exit) so the time does not tell which entry came close. */
static const cred_t *find_cred(const table_t *t, const char *authz)
{
    uint8_t d[LC_SHA256_BYTES];
    char buf[1024];
    const char *user = NULL;
    if (strncasecmp(authz, "Bearer ", 7) == 0) {
        const char *tok = authz + 7;
        lc_sha256(tok, strlen(tok), d);
    } else if (strncasecmp(authz, "Basic ", 6) == 0) {
        if (b64_decode(authz + 6, buf, sizeof(buf)) != 0)
            return NULL;
        char *colon = strchr(buf, ':');
        if (!colon)
            return NULL;
        *colon = '\0';
        user = buf;
        lc_sha256(colon + 1, strlen(colon + 1), d);
    } else {
        return NULL;
    }
    const cred_t *found = NULL;
    for (size_t i = 0; i < t->n; i++) {
        const cred_t *c = &t->v[i];
        bool same_kind = c->basic == (user != NULL);
        bool eq = digest_eq(c->digest, d);
        bool user_ok = !user || (c->user && strcmp(c->user, user) == 0);
        if (same_kind && eq && user_ok && !found)
            found = c;
    }
    return found;
}

static bool holds_tenant(const cred_t *c, const char *tenant)
{
    if (c->any_tenant)
        return true;
    for (size_t i = 0; i < c->n_tenants; i++)
        if (strcmp(c->tenants[i], tenant) == 0)
            return true;
    return false;
}

static int check_cred(const cred_t *c, bool write, const char *const *tenants, size_t n,
                      lc_status_t *st)
{
    if (!c)
        return lc_status_set_http(st, 401, LC_CODE_UNAUTHENTICATED,
                                  "missing or invalid credentials");
    if (write ? !c->can_write : !c->can_read)
        return lc_status_set_http(st, 403, LC_CODE_PERMISSION_DENIED,
                                  "the credential has no %s scope", write ? "write" : "read");
    for (size_t i = 0; i < n; i++)
        if (!holds_tenant(c, tenants[i]))
            return lc_status_set_http(st, 403, LC_CODE_PERMISSION_DENIED,
                                      "the credential may not act for tenant %.150s", tenants[i]);
    return 0;
}

int lc_auth_check(lc_http_req_t *req, bool write, const char *const *tenants, size_t n,
                  lc_status_t *st)
{
    pthread_rwlock_rdlock(&auth_lock);
    const table_t *t = auth_table;
    int rc = 0;
    if (t) {
        const char *authz = lc_http_header(req, "authorization");
        rc = check_cred(authz ? find_cred(t, authz) : NULL, write, tenants, n, st);
    }
    pthread_rwlock_unlock(&auth_lock);
    return rc;
}

int lc_auth_guard(lc_http_req_t *req, lc_http_scope_t scope, lc_status_t *st)
{
    if (scope == LC_HTTP_SCOPE_PUBLIC)
        return 0;
    return lc_auth_check(req, scope != LC_HTTP_SCOPE_READ, NULL, 0, st);
}
