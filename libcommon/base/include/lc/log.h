/*
 * lc/log.h — structured logging in logfmt to stderr, one line per event:
 *   ts=2026-11-22T04:41:49.123Z level=info svc=ember msg="listening" addr=0.0.0.0:4040
 *
 * Extra fields are passed preformatted in the message after the quoted text,
 * e.g. LC_LOG_INFO("listening addr=%s", addr) prints msg="listening" addr=....
 * The text up to the first " key=" is quoted as msg. Debug formatting costs
 * nothing when the level is off. Thread-safe (one write(2) per line).
 */
#ifndef LC_LOG_H
#define LC_LOG_H

#include "lc/err.h"

typedef enum {
    LC_LOG_LEVEL_DEBUG,
    LC_LOG_LEVEL_INFO,
    LC_LOG_LEVEL_WARN,
    LC_LOG_LEVEL_ERROR
} lc_log_level_t;

extern lc_log_level_t lc_log_level;

void lc_log_init(const char *service_name, lc_log_level_t level);
/* Parses "debug|info|warn|error"; returns 0 or LC_EINPUT. */
int lc_log_parse_level(const char *s, lc_log_level_t *out) LC_MUST_CHECK;
void lc_log_write(lc_log_level_t level, const char *file, int line, const char *fmt, ...)
    LC_PRINTF(4, 5);

#define LC_LOG_(lvl, ...)                                                                          \
    do {                                                                                           \
        if ((lvl) >= lc_log_level)                                                                 \
            lc_log_write((lvl), __FILE__, __LINE__, __VA_ARGS__);                                  \
    } while (0)
#define LC_LOG_DEBUG(...) LC_LOG_(LC_LOG_LEVEL_DEBUG, __VA_ARGS__)
#define LC_LOG_INFO(...) LC_LOG_(LC_LOG_LEVEL_INFO, __VA_ARGS__)
#define LC_LOG_WARN(...) LC_LOG_(LC_LOG_LEVEL_WARN, __VA_ARGS__)
#define LC_LOG_ERROR(...) LC_LOG_(LC_LOG_LEVEL_ERROR, __VA_ARGS__)

/* Invariant check kept in release builds: logs file:line and aborts. */
#define LC_ASSERT(cond)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            lc_log_write(LC_LOG_LEVEL_ERROR, __FILE__, __LINE__, "assertion failed: %s", #cond);   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#include <stdlib.h>

#endif
