/*
 * lc_test.h — the tiny assertion kit for ember's C unit tests.
 * Each check prints both operands on failure and counts it; LC_TEST_MAIN runs
 * the listed tests and prints "N passed, N failed", exiting 1 on any failure.
 */
#ifndef LC_TEST_H
#define LC_TEST_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int lc_test_failures;
static int lc_test_checks;

#define LC_FAIL_(fmt, ...)                                                                         \
    do {                                                                                           \
        lc_test_failures++;                                                                        \
        fprintf(stderr, "%s:%d: " fmt "\n", __FILE__, __LINE__, __VA_ARGS__);                      \
    } while (0)

#define LC_CHECK(cond)                                                                             \
    do {                                                                                           \
        lc_test_checks++;                                                                          \
        if (!(cond))                                                                               \
            LC_FAIL_("check failed: %s", #cond);                                                   \
    } while (0)

#define LC_ASSERT_EQ(a, b)                                                                         \
    do {                                                                                           \
        lc_test_checks++;                                                                          \
        long long va_ = (long long)(a), vb_ = (long long)(b);                                      \
        if (va_ != vb_)                                                                            \
            LC_FAIL_("%s == %s: %lld != %lld", #a, #b, va_, vb_);                                  \
    } while (0)

#define LC_ASSERT_OK(x) LC_ASSERT_EQ((x), 0)

#define LC_ASSERT_STR_EQ(a, b)                                                                     \
    do {                                                                                           \
        lc_test_checks++;                                                                          \
        const char *sa_ = (a), *sb_ = (b);                                                         \
        if (!sa_ || !sb_ || strcmp(sa_, sb_) != 0)                                                 \
            LC_FAIL_("%s == %s: \"%s\" != \"%s\"", #a, #b, sa_ ? sa_ : "(null)",                   \
                     sb_ ? sb_ : "(null)");                                                        \
    } while (0)

#define LC_ASSERT_MEM_EQ(a, b, n)                                                                  \
    do {                                                                                           \
        lc_test_checks++;                                                                          \
        if (memcmp((a), (b), (n)) != 0)                                                            \
            LC_FAIL_("%s == %s (%zu bytes) differ", #a, #b, (size_t)(n));                          \
    } while (0)

typedef void (*lc_test_fn)(void);

static inline int lc_test_run(const char *const *names, const lc_test_fn *fns, size_t n)
{
    int passed = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        int before = lc_test_failures;
        fns[i]();
        if (lc_test_failures == before) {
            passed++;
        } else {
            failed++;
            fprintf(stderr, "FAIL %s\n", names[i]);
        }
    }
    if (lc_test_checks == 0) {
        fprintf(stderr, "no checks ran\n");
        failed++;
    }
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

/* Usage: LC_TEST_MAIN(test_a, test_b, ...) */
#define LC_TEST_MAIN(...)                                                                          \
    int main(void)                                                                                 \
    {                                                                                              \
        const lc_test_fn fns_[] = {__VA_ARGS__};                                                   \
        static const char names_[] = #__VA_ARGS__;                                                 \
        const char *list_[sizeof(fns_) / sizeof(fns_[0])];                                         \
        static char buf_[sizeof(names_)];                                                          \
        memcpy(buf_, names_, sizeof(names_));                                                      \
        size_t k_ = 0;                                                                             \
        char *save_ = NULL;                                                                        \
        for (char *t_ = strtok_r(buf_, ", ", &save_); t_ && k_ < sizeof(fns_) / sizeof(fns_[0]);   \
             t_ = strtok_r(NULL, ", ", &save_))                                                    \
            list_[k_++] = t_;                                                                      \
        for (; k_ < sizeof(fns_) / sizeof(fns_[0]); k_++)                                          \
            list_[k_] = "?";                                                                       \
        return lc_test_run(list_, fns_, sizeof(fns_) / sizeof(fns_[0]));                           \
    }

/* Appends printf-style text to the NUL-terminated string in buf[size], cut to
 * fit: the bounded stand-in for strcat and sprintf(buf + strlen(buf), ...),
 * which scripts/check-banned.sh rejects. */
__attribute__((format(printf, 3, 4))) static inline void lc_test_appendf(char *buf, size_t size,
                                                                         const char *fmt, ...)
{
    size_t used = strlen(buf);
    if (used >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + used, size - used, fmt, ap);
    va_end(ap);
}

/* Reads a whole file into a malloc'd buffer (tests only). */
static inline unsigned char *lc_test_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *d = malloc((size_t)n + 1);
    if (d && fread(d, 1, (size_t)n, f) != (size_t)n) {
        free(d);
        d = NULL;
    }
    fclose(f);
    if (d) {
        d[n] = 0;
        *len = (size_t)n;
    }
    return d;
}

/* Every file of LC_TESTDATA_DIR/<rel> (not dot files, not .json), read whole
 * and handed to fn(name, bytes, len); returns how many. */
#ifdef LC_TESTDATA_DIR
#include <dirent.h>
static inline int lc_test_each_testdata_file(const char *rel,
                                             void (*fn)(const char *name, const unsigned char *d,
                                                        size_t len))
{
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/%s", LC_TESTDATA_DIR, rel);
    DIR *dh = opendir(dir);
    LC_CHECK(dh != NULL);
    if (!dh)
        return 0;
    int files = 0;
    struct dirent *e;
    while ((e = readdir(dh))) {
        if (e->d_name[0] == '.' || strstr(e->d_name, ".json"))
            continue;
        char path[2048];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        size_t len = 0;
        unsigned char *d = lc_test_read_file(path, &len);
        LC_CHECK(d != NULL);
        if (d)
            fn(e->d_name, d, len);
        free(d);
        files++;
    }
    closedir(dh);
    return files;
}
#endif

#endif
