/*
 * objstore_util.c — what the front (objstore.c) and both backends
 * (objstore_fs.c, objstore_s3*.c) share: the key rules, the error text, list
 * growth and SHA-256 in hex. In a file of its own, one level below them all,
 * so the front and the backends do not call each other in a circle.
 * Threading: as lc/objstore.h (a store is used by one thread at a time).
 */
#include <openssl/evp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/objstore.h"
#include "objstore_int.h"

bool objstore_key_char_ok(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-' || c == '/';
}

/* Keys stay plain so they are the same path on disk and in a URL (no
 * escaping), and can never climb out of the filesystem root. */
bool lc_objstore_key_valid(const char *key)
{
    size_t len = key ? strlen(key) : 0;
    if (len == 0 || len > LC_OBJSTORE_KEY_MAX || key[0] == '/' || key[len - 1] == '/')
        return false;
    const char *seg = key;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && !objstore_key_char_ok(key[i]))
            return false;
        if (i == len || key[i] == '/') {
            size_t n = (size_t)(key + i - seg);
            if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
                return false;
            seg = key + i + 1;
        }
    }
    return true;
}

int objstore_list_push(lc_objstore_t *s, lc_objstore_list_t *l, const char *key, size_t len,
                       uint64_t size)
{
    if (l->n >= s->o.max_list_keys) {
        objstore_set_error(s, "listing passed %zu keys", s->o.max_list_keys);
        return LC_ETOOBIG;
    }
    if (l->n == 0 || (l->n >= 16 && (l->n & (l->n - 1)) == 0)) { /* full: double */
        size_t cap = l->n ? 2 * l->n : 16;
        l->keys = lc_xrealloc(l->keys, cap * sizeof *l->keys);
        l->sizes = lc_xrealloc(l->sizes, cap * sizeof *l->sizes);
    }
    l->sizes[l->n] = size;
    l->keys[l->n++] = lc_xstrndup(key, len);
    return 0;
}

void objstore_set_error(lc_objstore_t *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->last_error, sizeof s->last_error, fmt, ap);
    va_end(ap);
}

void objstore_sha256_hex(const void *data, size_t len, char hex[LC_SHA256_HEX])
{
    uint8_t d[LC_SHA256_BYTES];
    unsigned int dlen = 0;
    EVP_Digest(data, len, d, &dlen, EVP_sha256(), NULL);
    for (size_t i = 0; i < LC_SHA256_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}
