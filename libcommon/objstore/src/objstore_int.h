/*
 * objstore_int.h — what the objstore front (objstore.c) and its two backends
 * share. Threading: as lc/objstore.h (one thread per store).
 */
#ifndef LC_OBJSTORE_INT_H
#define LC_OBJSTORE_INT_H

#include "lc/objstore.h"

#define LC_SHA256_BYTES 32
#define LC_SHA256_HEX (2 * LC_SHA256_BYTES + 1)

typedef struct objstore_ops {
    int (*put)(lc_objstore_t *s, const char *full_key, const void *data, size_t len);
    /* n == 0: the whole object (verified); else the range, unverified. */
    int (*get)(lc_objstore_t *s, const char *full_key, uint64_t off, uint64_t n, uint8_t **data,
               size_t *len);
    int (*head)(lc_objstore_t *s, const char *full_key, uint64_t *size);
    int (*del)(lc_objstore_t *s, const char *full_key);
    /* Appends full keys starting with full_prefix to out. */
    int (*list)(lc_objstore_t *s, const char *full_prefix, lc_objstore_list_t *out);
    void (*close)(lc_objstore_t *s);
} objstore_ops_t;

struct lc_objstore {
    const objstore_ops_t *ops;
    lc_objstore_opts_t o; /* limits resolved; strings point into the copies below */
    char *prefix, *fs_dir, *endpoint, *bucket, *region, *access_key_id, *secret_access_key;
    void *backend; /* the backend's own state */
    char last_error[512];
};

/* objstore_util.c: shared by the front and both backends. */
bool objstore_key_char_ok(char c); /* a character a key may hold */
void objstore_sha256_hex(const void *data, size_t len, char hex[LC_SHA256_HEX]);
void objstore_set_error(lc_objstore_t *s, const char *fmt, ...) LC_PRINTF(2, 3);
/* Appends one key to a list, enforcing o.max_list_keys. */
int objstore_list_push(lc_objstore_t *s, lc_objstore_list_t *l, const char *key, size_t len,
                       uint64_t size);

int objstore_fs_open(lc_objstore_t *s);
int objstore_s3_open(lc_objstore_t *s);

#endif
