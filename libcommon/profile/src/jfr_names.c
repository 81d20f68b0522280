/*
 * jfr_names.c — JVM-generated class and library names with their varying
 * part replaced by "_" (lc_jfr_merge_generated, jfr.h), as Pyroscope's
 * converter does, so that profiles of different runs share their functions.
 * The reader (jfr.c) applies it to every symbol it keeps; below both the
 * reader and the pprof builder (jfr_pprof.c).
 * Threading: pure; the library-name regexes compile once (pthread_once).
 */
#include <pthread.h>
#include <regex.h>
#include <stdbool.h>
#include <string.h>

#include "lc/jfr.h"

static bool all_of(const char *s, const char *end, const char *set)
{
    if (s >= end)
        return false;
    for (; s < end; s++) {
        if (!strchr(set, *s) || !*s)
            return false;
    }
    return true;
}

#define DIGITS "0123456789"
#define HEX "0123456789abcdef"

/* The tail after "$$Lambda": `$?\d*[./](0x)?[\da-f]+` or `\d+`. */
static bool lambda_tail(const char *s, const char *end)
{
    if (all_of(s, end, DIGITS))
        return true;
    if (s < end && *s == '$')
        s++;
    while (s < end && *s >= '0' && *s <= '9')
        s++;
    if (s >= end || (*s != '.' && *s != '/'))
        return false;
    s++;
    return all_of(s, end, HEX) ||
           (end - s > 2 && s[0] == '0' && s[1] == 'x' && all_of(s + 2, end, HEX));
}

/* The longest prefix ending in marker (at position >= 1) whose tail passes
 * ok (NULL: any tail); its length, or 0. Greedy, like `^(.+marker)`. */
static size_t prefix_before(const char *s, size_t len, const char *marker,
                            bool (*ok)(const char *, const char *))
{
    size_t m = strlen(marker);
    for (size_t i = len >= m ? len - m + 1 : 0; i-- > 1;) {
        if (!memcmp(s + i, marker, m) && (!ok || ok(s + i + m, s + len)))
            return i + m;
    }
    return 0;
}

typedef struct lib_re_s {
    const char *hint, *pattern, *replacement;
    regex_t re;
} lib_re_t;

static lib_re_t LIBS[] = {
    {"libzstd-jni-",
     "^(\\.?/tmp/)?(libzstd-jni-[0-9]+\\.[0-9]+\\.[0-9]+-)([0-9]+)(\\.so)( \\(deleted\\))?$",
     "libzstd-jni-_.so",
     {0}},
    {"amazonCorrettoCryptoProvider",
     "^(\\.?/tmp/)?(lib)?(amazonCorrettoCryptoProvider)(NativeLibraries\\.)?([0-9a-f]{16})"
     "(/libcrypto|/libamazonCorrettoCryptoProvider)?(\\.so)( \\(deleted\\))?$",
     "libamazonCorrettoCryptoProvider_.so",
     {0}},
    {"libasyncProfiler-",
     "^(\\.?/tmp/)?(libasyncProfiler)-(linux-arm64|linux-musl-x64|linux-x64|macos)-"
     "(17b9a1d8156277a98ccc871afa9a8f69215f92)(\\.so)( \\(deleted\\))?$",
     "libasyncProfiler-_.so",
     {0}},
};
static pthread_once_t libs_once = PTHREAD_ONCE_INIT;
static bool libs_ok;

static void libs_compile(void)
{
    libs_ok = true;
    for (size_t i = 0; i < sizeof(LIBS) / sizeof(LIBS[0]); i++)
        libs_ok &= regcomp(&LIBS[i].re, LIBS[i].pattern, REG_EXTENDED | REG_NOSUB) == 0;
}

static const char *merge_lib(const char *s)
{
    pthread_once(&libs_once, libs_compile);
    for (size_t i = 0; libs_ok && i < sizeof(LIBS) / sizeof(LIBS[0]); i++) {
        if (strstr(s, LIBS[i].hint) && regexec(&LIBS[i].re, s, 0, NULL, 0) == 0)
            return LIBS[i].replacement;
    }
    return NULL;
}

static bool has_so(const char *s, size_t len)
{
    const char *end = s + len;
    for (const char *p = s; (p = memchr(p, '.', (size_t)(end - p))) != NULL; p++) {
        if (end - p >= 3 && p[1] == 's' && p[2] == 'o')
            return true;
    }
    return false;
}

const char *lc_jfr_merge_generated(const char *s, size_t len, lc_arena_t *arena, size_t *out_len)
{
    static const char accessor[] = "jdk/internal/reflect/GeneratedMethodAccessor";
    size_t alen = sizeof(accessor) - 1, cut = 0;
    *out_len = len;
    /* applied in turn, as Pyroscope's regexes are */
    if (len > alen && !memcmp(s, accessor, alen) && all_of(s + alen, s + len, DIGITS))
        cut = alen;
    else if (memchr(s, '$', len))
        cut = prefix_before(s, len, "$$Lambda", lambda_tail);
    if (cut) {
        char *o = lc_arena_sprintf(arena, "%.*s_", (int)cut, s);
        if (!o)
            return s;
        s = o;
        len = *out_len = cut + 1;
    }
    size_t cglib =
        memchr(s, '$', len) ? prefix_before(s, len, "$$EnhancerBySpringCGLIB$$", NULL) : 0;
    if (cglib) {
        char *o = lc_arena_sprintf(arena, "%.*s_", (int)cglib, s);
        if (o) {
            s = o;
            len = *out_len = cglib + 1;
        }
    }
    /* every library pattern ends in ".so" (then maybe " (deleted)"): one
     * scan rules out the class and method names that are nearly all symbols */
    const char *lib = len > 12 && has_so(s, len) && !memchr(s, 0, len) ? merge_lib(s) : NULL;
    if (lib)
        *out_len = strlen(lib);
    return lib ? lib : s;
}
