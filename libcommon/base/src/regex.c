/*
 * regex.c — PCRE2 compile and match for selectors and relabelling (lc/regex.h).
 *
 * Why a per-thread JIT stack: PCRE2's JIT defaults to 32 KiB of machine stack,
 * which patterns with a repeated group exhaust at ~1,000 subject bytes (error
 * -46), far below the label values we accept. Each thread gets a JIT stack
 * that may grow to LC_REGEX_JIT_STACK_MAX; a subject that still overflows it
 * is matched again by the interpreter, whose backtracking frames live on the
 * heap under PCRE2's heap limit. Only when that also fails do we give up, and
 * then loudly (LC_EREGEX), never as a "no match".
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/regex.h"

struct lc_regex_s {
    pcre2_code *code;
    uint32_t n_groups; /* capture groups + 1 */
    char **names;      /* n_groups entries; NULL for unnamed groups */
};

/* What one thread needs to match: created on first use, freed at thread exit. */
typedef struct re_thread_s {
    pcre2_match_context *mctx;
    pcre2_jit_stack *jit_stack;
    pcre2_match_data *md; /* one ovector pair: "did it match" */
    int last_error;
} re_thread_t;

static pthread_once_t re_once = PTHREAD_ONCE_INIT;
static pthread_key_t re_key;

static void re_thread_free(void *p)
{
    re_thread_t *t = p;
    pcre2_match_data_free(t->md);
    pcre2_match_context_free(t->mctx);
    pcre2_jit_stack_free(t->jit_stack);
    free(t);
}

static void re_init_once(void)
{
    if (pthread_key_create(&re_key, re_thread_free) != 0)
        abort();
}

static re_thread_t *re_thread(void)
{
    pthread_once(&re_once, re_init_once);
    re_thread_t *t = pthread_getspecific(re_key);
    if (t)
        return t;
    t = calloc(1, sizeof(*t));
    if (!t)
        abort();
    t->mctx = pcre2_match_context_create(NULL);
    t->md = pcre2_match_data_create(1, NULL);
    /* 32 KiB to start, as PCRE2 would; grows on demand up to the max. */
    t->jit_stack = pcre2_jit_stack_create(32 << 10, LC_REGEX_JIT_STACK_MAX, NULL);
    if (!t->mctx || !t->md || !t->jit_stack || pthread_setspecific(re_key, t) != 0)
        abort();
    pcre2_set_match_limit(t->mctx, LC_REGEX_MATCH_LIMIT);
    pcre2_jit_stack_assign(t->mctx, NULL, t->jit_stack);
    return t;
}

/* ---------------------------------------------------------------- compile */

/* Group names by number, from PCRE2's name table. */
static void collect_names(lc_regex_t *re)
{
    uint32_t count = 0, entry = 0;
    PCRE2_SPTR table = NULL;
    pcre2_pattern_info(re->code, PCRE2_INFO_NAMECOUNT, &count);
    pcre2_pattern_info(re->code, PCRE2_INFO_NAMEENTRYSIZE, &entry);
    pcre2_pattern_info(re->code, PCRE2_INFO_NAMETABLE, &table);
    re->names = lc_xcalloc(re->n_groups, sizeof(char *));
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = table + (size_t)i * entry;
        uint32_t num = (uint32_t)e[0] << 8 | e[1];
        if (num < re->n_groups && !re->names[num])
            re->names[num] = lc_xstrdup((const char *)e + 2);
    }
}

int lc_regex_compile(const char *pattern, uint32_t flags, lc_regex_t **out, char *err,
                     size_t err_size)
{
    uint32_t opts = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF | PCRE2_ANCHORED | PCRE2_ENDANCHORED |
                    PCRE2_DOTALL | PCRE2_NEVER_BACKSLASH_C;
    if (flags & LC_REGEX_DOLLAR_ENDONLY)
        opts |= PCRE2_DOLLAR_ENDONLY;
    int code;
    PCRE2_SIZE off;
    *out = NULL;
    pcre2_code *c =
        pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, opts, &code, &off, NULL);
    if (!c) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof(msg));
        snprintf(err, err_size, "%s at offset %zu", (const char *)msg, (size_t)off);
        return LC_EINPUT;
    }
    (void)pcre2_jit_compile(c, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
    lc_regex_t *re = lc_xcalloc(1, sizeof(*re));
    uint32_t captures = 0;
    pcre2_pattern_info(c, PCRE2_INFO_CAPTURECOUNT, &captures);
    re->code = c;
    re->n_groups = captures + 1;
    collect_names(re);
    *out = re;
    return 0;
}

void lc_regex_free(lc_regex_t *re)
{
    if (!re)
        return;
    pcre2_code_free(re->code);
    for (uint32_t i = 0; re->names && i < re->n_groups; i++)
        lc_free(re->names[i]);
    lc_free(re->names);
    lc_free(re);
}

uint32_t lc_regex_groups(const lc_regex_t *re)
{
    return re->n_groups;
}

const char *lc_regex_group_name(const lc_regex_t *re, uint32_t i)
{
    return i < re->n_groups ? re->names[i] : NULL;
}

/* ---------------------------------------------------------------- match */

static void fill_groups(const lc_regex_t *re, pcre2_match_data *md, int rc, long *groups)
{
    const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
    uint32_t pairs = pcre2_get_ovector_count(md);
    for (uint32_t i = 0; i < re->n_groups; i++) {
        int set = i < pairs && (rc == 0 || (int)i < rc) && ov[2 * i] != PCRE2_UNSET;
        groups[2 * i] = set ? (long)ov[2 * i] : -1;
        groups[2 * i + 1] = set ? (long)ov[2 * i + 1] : -1;
    }
}

/* JIT first (fast); on a JIT stack overflow the interpreter, which keeps its
 * backtracking frames on the heap and so handles any length we accept. */
static int match_once(const lc_regex_t *re, re_thread_t *t, const char *s, size_t len,
                      pcre2_match_data *md)
{
    int rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, 0, 0, md, t->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(re->code, (PCRE2_SPTR)s, len, 0, PCRE2_NO_JIT, md, t->mctx);
    return rc;
}

int lc_regex_match(const lc_regex_t *re, const char *s, size_t len, long *groups)
{
    re_thread_t *t = re_thread();
    pcre2_match_data *md = t->md;
    if (groups) {
        md = pcre2_match_data_create_from_pattern(re->code, NULL);
        if (!md)
            abort();
    }
    int rc = match_once(re, t, s, len, md);
    int ret = rc >= 0 ? 1 : rc == PCRE2_ERROR_NOMATCH ? 0 : LC_EREGEX;
    if (ret == 1 && groups)
        fill_groups(re, md, rc, groups);
    if (ret == LC_EREGEX)
        t->last_error = rc;
    if (groups)
        pcre2_match_data_free(md);
    return ret;
}

int lc_regex_last_error(void)
{
    return re_thread()->last_error;
}
