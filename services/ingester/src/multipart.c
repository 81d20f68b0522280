/*
 * multipart.c — a strict, capped multipart/form-data reader for /ingest
 * (pyroscope-api.md §2.5; RFC 2046 §5.1, RFC 7578).
 *
 * The whole body is in memory already (httpd caps it), so parts are returned
 * as zero-copy slices of it. Like Go's mime/multipart, which real clients are
 * tested against: a preamble before the first delimiter is skipped, the line
 * ending (CRLF or bare LF) is taken from the first delimiter line, transport
 * padding (spaces, tabs) may follow a delimiter, and the epilogue after the
 * close delimiter is ignored. Strict where Go is lenient or where input could
 * drive cost: a missing close delimiter, folded or over-long header lines,
 * duplicate parameters and more than ING_MULTIPART_MAX_PARTS parts are errors.
 * Content-Transfer-Encoding is not decoded (no SDK sends one).
 */
#define _GNU_SOURCE /* memmem */
#include <string.h>
#include <strings.h>

#include "receive_int.h"

#define BOUNDARY_MAX 70

typedef struct mp_reader_s {
    const uint8_t *p, *end;
    const char *nl; /* "\r\n" or "\n" */
    size_t nl_len;
    const char *dash; /* "--" boundary */
    size_t dash_len;
    lc_arena_t *arena;
    lc_status_t *st;
} mp_reader_t;

static int mp_error(lc_status_t *st, const char *what)
{
    return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "multipart: %s", what);
}

static bool mp_space(char c)
{
    return c == ' ' || c == '\t';
}

static const char *mp_skip_space(const char *s)
{
    while (mp_space(*s))
        s++;
    return s;
}

/* ---------------------------------------------------------------- parameters */

/* Reads a token or quoted-string value at *s into the arena; advances *s. */
static char *mp_param_value(const char **s, lc_arena_t *arena)
{
    const char *c = *s;
    if (*c != '"') {
        size_t n = strcspn(c, "; \t");
        *s = c + n;
        return lc_arena_strndup(arena, c, n);
    }
    char *out = lc_arena_alloc(arena, strlen(c) + 1);
    size_t n = 0;
    for (c++; *c && *c != '"'; c++) {
        if (*c == '\\' && c[1])
            c++;
        if (out)
            out[n++] = *c;
    }
    if (*c != '"' || !out)
        return NULL;
    out[n] = 0;
    *s = c + 1;
    return out;
}

typedef struct mp_param_s {
    const char *name; /* lower-case match target */
    const char **value;
    bool seen;
} mp_param_t;

/* Parses `; k=v; k2="v2"` after a media or disposition type, storing the
 * values of the wanted names. Unknown names are skipped; repeats are errors. */
static int mp_params(const char *s, mp_param_t *want, size_t n_want, lc_arena_t *arena,
                     lc_status_t *st)
{
    for (s = mp_skip_space(s); *s; s = mp_skip_space(s)) {
        if (*s++ != ';')
            return mp_error(st, "malformed header parameters");
        s = mp_skip_space(s);
        if (!*s)
            break; /* a trailing ';' is tolerated, as by Go */
        size_t klen = strcspn(s, "= \t;");
        const char *key = s;
        s = mp_skip_space(s + klen);
        if (klen == 0 || *s++ != '=')
            return mp_error(st, "malformed header parameter");
        s = mp_skip_space(s);
        const char *value = mp_param_value(&s, arena);
        if (!value)
            return mp_error(st, "unterminated quoted parameter");
        for (size_t i = 0; i < n_want; i++) {
            if (strlen(want[i].name) != klen || strncasecmp(key, want[i].name, klen) != 0)
                continue;
            if (want[i].seen)
                return mp_error(st, "duplicate header parameter");
            want[i].seen = true;
            *want[i].value = value;
        }
    }
    return 0;
}

/* Length of the type token before ';', trailing spaces excluded. */
static size_t mp_type_len(const char *s)
{
    size_t n = strcspn(s, ";");
    while (n > 0 && mp_space(s[n - 1]))
        n--;
    return n;
}

static bool mp_boundary_ok(const char *b)
{
    size_t n = strlen(b);
    if (n == 0 || n > BOUNDARY_MAX || b[n - 1] == ' ')
        return false;
    for (; *b; b++) {
        if (*b < ' ' || *b > '~')
            return false;
    }
    return true;
}

int ing_multipart_boundary(const char *content_type, lc_arena_t *arena, const char **boundary,
                           lc_status_t *st)
{
    static const char type[] = "multipart/form-data";
    const char *ct = mp_skip_space(content_type ? content_type : "");
    size_t tlen = mp_type_len(ct);
    if (tlen != sizeof(type) - 1 || strncasecmp(ct, type, tlen) != 0)
        return mp_error(st, "content type is not multipart/form-data");
    *boundary = NULL;
    mp_param_t want[] = {{"boundary", boundary, false}};
    if (mp_params(ct + tlen, want, 1, arena, st) < 0)
        return -1;
    if (!*boundary || !mp_boundary_ok(*boundary))
        return mp_error(st, "missing or invalid boundary");
    return 0;
}

int ing_multipart_sniff_boundary(const uint8_t *body, size_t len, lc_arena_t *arena,
                                 const char **boundary)
{
    if (len < 3 || body[0] != '-' || body[1] != '-')
        return LC_ENOTFOUND;
    size_t n = 2;
    while (n < len && n < BOUNDARY_MAX + 2 && body[n] != '\r' && body[n] != '\n')
        n++;
    while (n > 2 && mp_space((char)body[n - 1]))
        n--; /* transport padding */
    char *b = lc_arena_strndup(arena, (const char *)body + 2, n - 2);
    if (!b || !mp_boundary_ok(b))
        return LC_ENOTFOUND;
    *boundary = b;
    return 0;
}

/* ---------------------------------------------------------------- delimiters */

/* At p (just past "--boundary"): 1 for the close delimiter, 0 for a part
 * delimiter whose line ending is consumed, -1 if this is no delimiter. With
 * nl unset yet (first delimiter), the line ending found sets it. */
static int mp_delimiter_tail(mp_reader_t *r, const uint8_t **p)
{
    const uint8_t *c = *p;
    if (r->end - c >= 2 && c[0] == '-' && c[1] == '-') {
        *p = c + 2;
        return 1;
    }
    while (c < r->end && mp_space((char)*c))
        c++;
    if (!r->nl) {
        if (r->end - c >= 2 && c[0] == '\r' && c[1] == '\n')
            r->nl = "\r\n";
        else if (c < r->end && c[0] == '\n')
            r->nl = "\n";
        else
            return -1;
        r->nl_len = strlen(r->nl);
    }
    if ((size_t)(r->end - c) < r->nl_len || memcmp(c, r->nl, r->nl_len) != 0)
        return -1;
    *p = c + r->nl_len;
    return 0;
}

/* Finds the first delimiter line; preamble lines before it are skipped. */
static int mp_first_delimiter(mp_reader_t *r, const uint8_t **next)
{
    const uint8_t *line = r->p;
    while (line < r->end) {
        const uint8_t *after = line + r->dash_len;
        if ((size_t)(r->end - line) >= r->dash_len && memcmp(line, r->dash, r->dash_len) == 0) {
            int tail = mp_delimiter_tail(r, &after);
            if (tail >= 0) {
                *next = after;
                return tail;
            }
        }
        const uint8_t *nl = memchr(line, '\n', (size_t)(r->end - line));
        if (!nl)
            break;
        line = nl + 1;
    }
    return mp_error(r->st, "no boundary found");
}

/* Finds the delimiter that ends a part's data starting at data; sets the
 * data length and the position after the delimiter line. */
static int mp_part_end(mp_reader_t *r, const uint8_t *data, size_t *len, const uint8_t **next)
{
    const uint8_t *c = data;
    for (;;) {
        size_t left = (size_t)(r->end - c);
        const uint8_t *hit = memmem(c, left, r->nl, r->nl_len);
        if (!hit)
            return mp_error(r->st, "truncated body: closing boundary missing");
        const uint8_t *after = hit + r->nl_len;
        if ((size_t)(r->end - after) >= r->dash_len && memcmp(after, r->dash, r->dash_len) == 0) {
            after += r->dash_len;
            int tail = mp_delimiter_tail(r, &after);
            if (tail >= 0) {
                *len = (size_t)(hit - data);
                *next = after;
                return tail;
            }
        }
        c = hit + 1;
    }
}

/* ---------------------------------------------------------------- part headers */

static int mp_header(mp_reader_t *r, const char *line, ing_part_t *part)
{
    const char *colon = strchr(line, ':');
    if (!colon || colon == line || mp_space(line[0]))
        return mp_error(r->st, "malformed part header");
    size_t nlen = (size_t)(colon - line);
    const char *value = mp_skip_space(colon + 1);
    if (nlen == 12 && strncasecmp(line, "content-type", nlen) == 0) {
        part->content_type = value;
        return 0;
    }
    if (nlen != 19 || strncasecmp(line, "content-disposition", nlen) != 0)
        return 0;
    size_t tlen = mp_type_len(value);
    const char *name = NULL;
    mp_param_t want[] = {{"name", &name, false}, {"filename", &part->filename, false}};
    if (mp_params(value + tlen, want, LC_ARRAY_LEN(want), r->arena, r->st) < 0)
        return -1;
    /* Only form-data dispositions name a form field (Go's FormName). */
    if (tlen == 9 && strncasecmp(value, "form-data", 9) == 0 && name)
        part->name = name;
    return 0;
}

/* Reads header lines up to the blank line; *p moves to the part data. */
static int mp_headers(mp_reader_t *r, const uint8_t **p, ing_part_t *part)
{
    const uint8_t *start = *p;
    for (;;) {
        size_t left = (size_t)(r->end - *p);
        const uint8_t *eol = memmem(*p, left, r->nl, r->nl_len);
        if (!eol)
            return mp_error(r->st, "truncated part headers");
        if ((size_t)(eol + r->nl_len - start) > ING_MULTIPART_MAX_HEADER_BYTES)
            return mp_error(r->st, "part headers too large");
        size_t llen = (size_t)(eol - *p);
        if (memchr(*p, 0, llen))
            return mp_error(r->st, "NUL byte in part header");
        const char *line = lc_arena_strndup(r->arena, (const char *)*p, llen);
        *p = eol + r->nl_len;
        if (!line)
            return mp_error(r->st, "out of request memory");
        if (llen == 0)
            return 0;
        if (mp_header(r, line, part) < 0)
            return -1;
    }
}

/* ---------------------------------------------------------------- the form */

int ing_multipart_parse(const uint8_t *body, size_t len, const char *boundary, lc_arena_t *arena,
                        ing_form_t *out, lc_status_t *st)
{
    *out = (ing_form_t){0};
    if (!boundary || !mp_boundary_ok(boundary))
        return mp_error(st, "missing or invalid boundary");
    mp_reader_t r = {.p = body, .end = body + len, .arena = arena, .st = st};
    r.dash = lc_arena_sprintf(arena, "--%s", boundary);
    out->parts = lc_arena_calloc(arena, ING_MULTIPART_MAX_PARTS, sizeof(*out->parts));
    if (!r.dash || !out->parts)
        return mp_error(st, "out of request memory");
    r.dash_len = strlen(r.dash);
    const uint8_t *p = NULL;
    int closed = mp_first_delimiter(&r, &p);
    while (closed == 0) {
        if (out->n == ING_MULTIPART_MAX_PARTS)
            return mp_error(st, "too many parts");
        ing_part_t *part = &out->parts[out->n++];
        part->name = "";
        if (mp_headers(&r, &p, part) < 0)
            return -1;
        part->data = p;
        closed = mp_part_end(&r, p, &part->len, &p);
    }
    return closed < 0 ? -1 : 0;
}

const ing_part_t *ing_form_file(const ing_form_t *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++) {
        if (f->parts[i].filename && strcmp(f->parts[i].name, name) == 0)
            return &f->parts[i];
    }
    return NULL;
}
