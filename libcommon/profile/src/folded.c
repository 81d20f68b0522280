/*
 * folded.c — the text formats of /ingest (pyroscope-api.md §2.6).
 *
 * folded ("groups"): `frame1;frame2;leaf 12` per line, split at the LAST
 * space because frames may contain spaces; lines without a space are skipped;
 * a count that is not an integer fails the request. lines: every line is one
 * stack with count 1, identical lines are counted, empty lines are skipped.
 * Like Go's bufio.Scanner, a trailing '\r' is dropped and a line longer than
 * 64 KiB ends parsing (silently for folded, as an error for lines, exactly
 * as Pyroscope's two parsers behave). Negative counts are rejected too: a
 * profile value cannot be negative.
 */
#include <string.h>

#include "lc/folded.h"
#include "lc/labels.h"

typedef struct fl_line_s {
    const char *s;
    size_t len;
} fl_line_t;

/* Next line of [*p, end) without its "\n" or "\r\n"; false at the end. */
static bool fl_next_line(const uint8_t **p, const uint8_t *end, fl_line_t *line, bool *too_long)
{
    if (*p >= end)
        return false;
    const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
    const uint8_t *stop = nl ? nl : end;
    line->s = (const char *)*p;
    line->len = (size_t)(stop - *p);
    *p = nl ? nl + 1 : end;
    if (line->len > 0 && line->s[line->len - 1] == '\r')
        line->len--;
    *too_long = line->len > LC_FOLDED_MAX_LINE;
    return true;
}

/* Go's strconv.Atoi: optional sign, decimal digits, no overflow. */
static bool fl_parse_count(const char *s, size_t n, int64_t *out)
{
    bool neg = n > 0 && s[0] == '-';
    size_t i = n > 0 && (s[0] == '-' || s[0] == '+') ? 1 : 0;
    if (i == n)
        return false;
    int64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, s[i] - '0', &v))
            return false;
    }
    *out = neg ? -v : v;
    return true;
}

static int fl_folded_line(const fl_line_t *l, lc_stack_cb cb, void *data, lc_status_t *st)
{
    const char *sp = NULL;
    for (size_t i = l->len; i > 0 && !sp; i--)
        sp = l->s[i - 1] == ' ' ? l->s + i - 1 : NULL;
    if (!sp)
        return 0;
    size_t stack_len = (size_t)(sp - l->s);
    int64_t count;
    if (!fl_parse_count(sp + 1, l->len - stack_len - 1, &count))
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "folded: invalid count in line \"%.*s\"",
                             (int)(l->len > 80 ? 80 : l->len), l->s);
    if (count < 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "folded: negative count %lld",
                             (long long)count);
    return cb(l->s, stack_len, count, data);
}

static int fl_parse_folded(const uint8_t *p, const uint8_t *end, lc_stack_cb cb, void *data,
                           lc_status_t *st)
{
    fl_line_t line;
    bool too_long;
    while (fl_next_line(&p, end, &line, &too_long) && !too_long) {
        int rc = fl_folded_line(&line, cb, data, st);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- lines: count identical lines with an open-addressing table. */
typedef struct fl_count_s {
    fl_line_t line;
    uint64_t hash;
    int64_t count;
} fl_count_t;

typedef struct fl_counts_s {
    fl_count_t *slots;
    size_t cap, n;
    fl_line_t *order; /* first-seen order, so output is deterministic */
} fl_counts_t;

static int fl_counts_init(fl_counts_t *c, size_t max_lines, lc_arena_t *arena)
{
    c->cap = 16;
    while (c->cap < max_lines * 2)
        c->cap *= 2;
    c->n = 0;
    c->slots = lc_arena_calloc(arena, c->cap, sizeof(*c->slots));
    c->order = lc_arena_calloc(arena, max_lines ? max_lines : 1, sizeof(*c->order));
    return c->slots && c->order ? 0 : LC_ETOOBIG;
}

static void fl_counts_add(fl_counts_t *c, const fl_line_t *l)
{
    uint64_t h = lc_hash64(l->s, l->len, 0);
    size_t i = (size_t)h & (c->cap - 1);
    for (; c->slots[i].count; i = (i + 1) & (c->cap - 1)) {
        fl_count_t *e = &c->slots[i];
        if (e->hash == h && e->line.len == l->len && memcmp(e->line.s, l->s, l->len) == 0) {
            e->count++;
            return;
        }
    }
    c->slots[i] = (fl_count_t){*l, h, 1};
    c->order[c->n++] = *l;
}

static int64_t fl_counts_get(const fl_counts_t *c, const fl_line_t *l)
{
    uint64_t h = lc_hash64(l->s, l->len, 0);
    for (size_t i = (size_t)h & (c->cap - 1); c->slots[i].count; i = (i + 1) & (c->cap - 1)) {
        const fl_count_t *e = &c->slots[i];
        if (e->hash == h && e->line.len == l->len && memcmp(e->line.s, l->s, l->len) == 0)
            return e->count;
    }
    return 0;
}

static size_t fl_count_lines(const uint8_t *p, const uint8_t *end)
{
    size_t n = 1;
    for (; p < end && (p = memchr(p, '\n', (size_t)(end - p))); p++)
        n++;
    return n;
}

static int fl_parse_lines(const uint8_t *p, const uint8_t *end, lc_arena_t *arena, lc_stack_cb cb,
                          void *data, lc_status_t *st)
{
    fl_counts_t counts;
    if (fl_counts_init(&counts, fl_count_lines(p, end), arena) < 0)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "lines: out of request memory");
    fl_line_t line;
    bool too_long;
    while (fl_next_line(&p, end, &line, &too_long)) {
        if (too_long)
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "lines: line too long");
        if (line.len > 0)
            fl_counts_add(&counts, &line);
    }
    for (size_t i = 0; i < counts.n; i++) {
        int rc = cb(counts.order[i].s, counts.order[i].len,
                    fl_counts_get(&counts, &counts.order[i]), data);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int lc_folded_parse(const uint8_t *body, size_t len, bool lines_format, lc_arena_t *arena,
                    lc_stack_cb cb, void *data, lc_status_t *st)
{
    const uint8_t *end = body + len;
    if (lines_format)
        return fl_parse_lines(body, end, arena, cb, data, st);
    return fl_parse_folded(body, end, cb, data, st);
}
