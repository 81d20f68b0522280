/*
 * log.c — logfmt lines to stderr. The message text is quoted as msg="..."; any
 * " key=value" pairs the caller appended after it are passed through.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "lc/log.h"

lc_log_level_t lc_log_level = LC_LOG_LEVEL_INFO;
static char log_service[32] = "ember";

static const char *const level_names[] = {"debug", "info", "warn", "error"};

void lc_log_init(const char *service_name, lc_log_level_t level)
{
    snprintf(log_service, sizeof(log_service), "%s", service_name);
    lc_log_level = level;
}

int lc_log_parse_level(const char *s, lc_log_level_t *out)
{
    for (int i = 0; i < 4; i++) {
        if (strcmp(s, level_names[i]) == 0) {
            *out = (lc_log_level_t)i;
            return 0;
        }
    }
    return LC_EINPUT;
}

/* Finds where the free text ends: the first " key=" with a bare key. */
static size_t msg_text_len(const char *m)
{
    for (const char *p = strchr(m, ' '); p; p = strchr(p + 1, ' ')) {
        const char *k = p + 1;
        while (*k &&
               (*k == '_' || *k == '.' || (*k >= 'a' && *k <= 'z') || (*k >= '0' && *k <= '9')))
            k++;
        if (*k == '=' && k > p + 1)
            return (size_t)(p - m);
    }
    return strlen(m);
}

void lc_log_write(lc_log_level_t level, const char *file, int line, const char *fmt, ...)
{
    char msg[2048], out[2560];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    struct timeval tv;
    gettimeofday(&tv, NULL);
    struct tm tm;
    gmtime_r(&tv.tv_sec, &tm);
    size_t tl = msg_text_len(msg);
    char text[2048];
    size_t j = 0;
    for (size_t i = 0; i < tl && j + 2 < sizeof(text); i++) {
        if (msg[i] == '"' || msg[i] == '\\')
            text[j++] = '\\';
        text[j++] = msg[i] == '\n' ? ' ' : msg[i];
    }
    text[j] = '\0';
    const char *base = strrchr(file, '/');
    int n = snprintf(out, sizeof(out),
                     "ts=%04d-%02d-%02dT%02d:%02d:%02d.%03dZ level=%s svc=%s pid=%d caller=%s:%d "
                     "msg=\"%s\"%s\n",
                     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                     (int)(tv.tv_usec / 1000), level_names[level], log_service, (int)getpid(),
                     base ? base + 1 : file, line, text, msg + tl);
    if (n > (int)sizeof(out))
        n = (int)sizeof(out);
    ssize_t w = write(STDERR_FILENO, out, (size_t)n);
    LC_UNUSED(w);
}
