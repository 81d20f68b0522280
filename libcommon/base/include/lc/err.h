/*
 * lc/err.h — error values and client-facing status.
 *
 * Internal calls return int: 0 is success, a negative value is -errno, a UV_E*
 * code (also -errno on Unix) or an LC_E* code from the reserved block below.
 * lc_strerror() names all three.
 *
 * Errors that reach a client carry a Connect code and a message in an
 * lc_status_t; lc_code_http() maps a code to its HTTP status (the Connect
 * table). Threading: everything here is pure and thread-safe.
 */
#ifndef LC_ERR_H
#define LC_ERR_H

#include <stdarg.h>

#define LC_MUST_CHECK __attribute__((warn_unused_result))
#define LC_PRINTF(a, b) __attribute__((format(printf, a, b)))
#define LC_UNUSED(x) ((void)(x))
#define LC_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define LC_CONTAINER_OF(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

/* Reserved block of ember's own error codes. */
enum {
    LC_EBASE = -30000,
    LC_EINPUT = -30000,   /* malformed input */
    LC_ETOOBIG = -30001,  /* an input-driven size passed its cap */
    LC_ECORRUPT = -30002, /* stored or compressed data failed to decode */
    LC_ENOTFOUND = -30003,
    LC_EUNSUPPORTED = -30004,
    LC_ETIMEOUT = -30005,
    LC_ESTORE = -30006,  /* LMDB failure (logged with the LMDB text where it happened) */
    LC_ECLOSED = -30007, /* the object is shutting down */
    LC_EFULL = -30008,   /* a queue or backlog is full */
    LC_EREGEX = -30009,  /* a regex match hit a PCRE2 limit: neither match nor miss */
    LC_ELAST = -30099,
};

/* Connect codes (numeric values as on the wire of gRPC/Connect). */
typedef enum {
    LC_CODE_OK = 0,
    LC_CODE_CANCELED = 1,
    LC_CODE_UNKNOWN = 2,
    LC_CODE_INVALID_ARGUMENT = 3,
    LC_CODE_DEADLINE_EXCEEDED = 4,
    LC_CODE_NOT_FOUND = 5,
    LC_CODE_ALREADY_EXISTS = 6,
    LC_CODE_PERMISSION_DENIED = 7,
    LC_CODE_RESOURCE_EXHAUSTED = 8,
    LC_CODE_FAILED_PRECONDITION = 9,
    LC_CODE_ABORTED = 10,
    LC_CODE_OUT_OF_RANGE = 11,
    LC_CODE_UNIMPLEMENTED = 12,
    LC_CODE_INTERNAL = 13,
    LC_CODE_UNAVAILABLE = 14,
    LC_CODE_DATA_LOSS = 15,
    LC_CODE_UNAUTHENTICATED = 16,
} lc_code_t;

#define LC_STATUS_MSG_MAX 512

/* A client-facing outcome. Zero-initialised means OK. */
typedef struct lc_status_s {
    lc_code_t code;
    int http_status; /* 0 = derive from code; set to force e.g. 413, 422 */
    char msg[LC_STATUS_MSG_MAX];
} lc_status_t;

const char *lc_strerror(int err);

/* Sets code and message; returns -1 so callers can `return lc_status_set(...)`. */
int lc_status_set(lc_status_t *st, lc_code_t code, const char *fmt, ...) LC_PRINTF(3, 4);
/* Like lc_status_set but also pins the HTTP status (legacy endpoints: 413, 422, ...). */
int lc_status_set_http(lc_status_t *st, int http_status, lc_code_t code, const char *fmt, ...)
    LC_PRINTF(4, 5);
static inline int lc_status_ok(const lc_status_t *st)
{
    return st->code == LC_CODE_OK;
}

const char *lc_code_name(lc_code_t code); /* "invalid_argument" */
int lc_code_from_name(const char *name);  /* -1 if unknown */
int lc_code_http(lc_code_t code);         /* Connect table: invalid_argument -> 400 */
/* Legacy HTTP error body code: derived from the HTTP status (pyroscope-api.md §2.11). */
lc_code_t lc_code_from_http(int http_status);

#endif
