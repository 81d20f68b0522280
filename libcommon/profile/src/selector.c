/*
 * selector.c — Prometheus-style label selectors: `{a="b", c!="d", e=~"re", f!~"re"}`.
 *
 * A hand-written recursive-descent parser over a byte span (the input need not
 * be NUL-terminated). Strings follow Go's escape rules as Prometheus does;
 * names may be bare (with dots, for OpenTelemetry-style `service.name`) or
 * quoted. Regexes go to PCRE2 (lc/regex.h) in UTF mode, anchored at both ends, with
 * `.` matching newlines as Prometheus' `^(?s:re)$` does. Matching is
 * thread-safe: compiled patterns are read-only; lc/regex.h keeps per-thread state.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lc/hash.h"
#include "lc/labels.h"
#include "lc/regex.h"

typedef struct sel_parser_s {
    const char *s;
    size_t len;
    size_t pos;
    lc_status_t *st;
} sel_parser_t;

/* ---------------------------------------------------------------- regex */

static int re_compile(lc_matcher_t *m, lc_status_t *st)
{
    char msg[200];
    if (lc_regex_compile(m->value, 0, &m->_re, msg, sizeof(msg)) != 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "invalid regular expression for label %s: %s in \"%.200s\"", m->name,
                             msg, m->value);
    return 0;
}

/* ---------------------------------------------------------------- matching */

int lc_matcher_match(const lc_matcher_t *m, const char *value)
{
    if (!value)
        value = "";
    int rc;
    switch (m->op) {
    case LC_MATCH_EQ:
        return strcmp(m->value, value) == 0;
    case LC_MATCH_NEQ:
        return strcmp(m->value, value) != 0;
    case LC_MATCH_RE:
        return lc_regex_match(m->_re, value, strlen(value), NULL);
    case LC_MATCH_NRE:
        rc = lc_regex_match(m->_re, value, strlen(value), NULL);
        return rc < 0 ? rc : !rc;
    }
    return 0;
}

int lc_selector_match(const lc_selector_t *sel, const lc_labels_t *ls)
{
    for (size_t i = 0; i < sel->n; i++) {
        int rc = lc_matcher_match(&sel->m[i], lc_labels_get(ls, sel->m[i].name));
        if (rc <= 0)
            return rc;
    }
    return 1;
}

/* ---------------------------------------------------------------- building */

void lc_selector_fini(lc_selector_t *sel)
{
    for (size_t i = 0; i < sel->n; i++) {
        lc_free(sel->m[i].name);
        lc_free(sel->m[i].value);
        lc_regex_free(sel->m[i]._re);
    }
    lc_free(sel->m);
    sel->m = NULL;
    sel->n = 0;
}

int lc_selector_add(lc_selector_t *sel, const char *name, lc_match_op_t op, const char *value,
                    lc_status_t *st)
{
    if (sel->n >= LC_SELECTOR_MAX_MATCHERS)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "too many matchers in selector (limit %d)", LC_SELECTOR_MAX_MATCHERS);
    if (!name[0])
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "empty label name in selector");
    lc_matcher_t m = {.name = lc_xstrdup(name), .value = lc_xstrdup(value), .op = op};
    if ((op == LC_MATCH_RE || op == LC_MATCH_NRE) && re_compile(&m, st) != 0) {
        lc_free(m.name);
        lc_free(m.value);
        return -1;
    }
    sel->m = lc_xrealloc(sel->m, (sel->n + 1) * sizeof(*sel->m));
    sel->m[sel->n++] = m;
    return 0;
}

/* ---------------------------------------------------------------- lexing helpers */

static int parse_error(sel_parser_t *ps, const char *fmt, ...) LC_PRINTF(2, 3);

static int parse_error(sel_parser_t *ps, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return lc_status_set(ps->st, LC_CODE_INVALID_ARGUMENT, "invalid selector: %s at position %zu",
                         what, ps->pos + 1);
}

static bool at_end(const sel_parser_t *ps)
{
    return ps->pos >= ps->len;
}

static int peek(const sel_parser_t *ps)
{
    return at_end(ps) ? -1 : (unsigned char)ps->s[ps->pos];
}

static void skip_ws(sel_parser_t *ps)
{
    while (!at_end(ps) && strchr(" \t\r\n", ps->s[ps->pos]) && ps->s[ps->pos])
        ps->pos++;
}

static bool eat(sel_parser_t *ps, char c)
{
    if (peek(ps) != (unsigned char)c)
        return false;
    ps->pos++;
    return true;
}

/* Reads exactly `digits` digits in `base` (8 or 16). */
static int read_number(sel_parser_t *ps, int digits, int base, uint32_t *out)
{
    uint32_t v = 0;
    for (int i = 0; i < digits; i++) {
        int d = lc_hex_digit(peek(ps));
        if (d < 0 || d >= base)
            return parse_error(ps, "bad digit in escape sequence");
        v = v * (uint32_t)base + (uint32_t)d;
        ps->pos++;
    }
    *out = v;
    return 0;
}

static int put_utf8(lc_buf_t *out, uint32_t cp)
{
    uint8_t b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (uint8_t)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (uint8_t)(0xc0 | cp >> 6);
        b[1] = (uint8_t)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (uint8_t)(0xe0 | cp >> 12);
        b[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (uint8_t)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        b[0] = (uint8_t)(0xf0 | cp >> 18);
        b[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f));
        b[3] = (uint8_t)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return lc_buf_append(out, b, n);
}

static int simple_escape(int c)
{
    switch (c) {
    case 'a':
        return '\a';
    case 'b':
        return '\b';
    case 'f':
        return '\f';
    case 'n':
        return '\n';
    case 'r':
        return '\r';
    case 't':
        return '\t';
    case 'v':
        return '\v';
    case '\\':
        return '\\';
    default:
        return -1;
    }
}

/* A numeric escape: \xNN and \NNN give one raw byte, \uNNNN and \UNNNNNNNN a
 * code point in UTF-8 (surrogates and values past U+10FFFF are errors). */
static int numeric_escape(sel_parser_t *ps, int kind, lc_buf_t *out)
{
    uint32_t v = 0;
    bool is_byte = kind == 'x' || (kind >= '0' && kind <= '7');
    int digits = kind == 'x' ? 2 : kind == 'u' ? 4 : kind == 'U' ? 8 : 3;
    int rc = read_number(ps, digits, kind == 'x' || kind == 'u' || kind == 'U' ? 16 : 8, &v);
    if (rc)
        return rc;
    if (v == 0)
        return parse_error(ps, "NUL character in string");
    if (is_byte) {
        if (v > 0xff)
            return parse_error(ps, "octal escape value > 255");
        uint8_t byte = (uint8_t)v;
        return lc_buf_append(out, &byte, 1);
    }
    if (v > 0x10ffff || (v >= 0xd800 && v < 0xe000))
        return parse_error(ps, "escape sequence is an invalid Unicode code point");
    return put_utf8(out, v);
}

/* After the backslash. Only the string's own quote may be escaped (Go rule). */
static int parse_escape(sel_parser_t *ps, char quote, lc_buf_t *out)
{
    int c = peek(ps);
    if (c < 0)
        return parse_error(ps, "unterminated string");
    int simple = simple_escape(c);
    if (simple >= 0 || c == quote) {
        ps->pos++;
        return lc_buf_putc(out, (char)(simple >= 0 ? simple : c));
    }
    if (c == 'x' || c == 'u' || c == 'U') {
        ps->pos++;
        return numeric_escape(ps, c, out);
    }
    if (c >= '0' && c <= '7')
        return numeric_escape(ps, c, out); /* the first digit is part of the number */
    return parse_error(ps, "unknown escape sequence \\%c", c);
}

static int parse_quoted_body(sel_parser_t *ps, char quote, lc_buf_t *out)
{
    for (;;) {
        int c = peek(ps);
        if (c < 0 || c == '\n')
            return parse_error(ps, "unterminated string");
        ps->pos++;
        if (c == quote)
            return 0;
        if (c == '\0')
            return parse_error(ps, "NUL character in string");
        int rc = c == '\\' ? parse_escape(ps, quote, out) : lc_buf_putc(out, (char)c);
        if (rc)
            return rc;
    }
}

/* Go raw string: no escapes, anything but a backtick until the next backtick. */
static int parse_raw_body(sel_parser_t *ps, lc_buf_t *out)
{
    size_t start = ps->pos;
    while (!at_end(ps) && ps->s[ps->pos] != '`') {
        if (ps->s[ps->pos] == '\0')
            return parse_error(ps, "NUL character in string");
        ps->pos++;
    }
    if (at_end(ps))
        return parse_error(ps, "unterminated raw string");
    ps->pos++;
    return lc_buf_append(out, ps->s + start, ps->pos - 1 - start);
}

/* Parses a quoted string at the cursor into a heap C string. */
static int parse_string(sel_parser_t *ps, char **out)
{
    lc_buf_t buf;
    lc_buf_init(&buf, LC_SELECTOR_MAX_BYTES);
    int quote = peek(ps);
    ps->pos++;
    int rc = quote == '`' ? parse_raw_body(ps, &buf) : parse_quoted_body(ps, (char)quote, &buf);
    if (rc == 0)
        *out = lc_xstrndup(buf.data ? (const char *)buf.data : "", buf.len);
    lc_buf_fini(&buf);
    return rc;
}

static bool is_quote(int c)
{
    return c == '"' || c == '\'' || c == '`';
}

static bool is_name_char(int c, bool first)
{
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    return alpha || (!first && ((c >= '0' && c <= '9') || c == '.'));
}

static int parse_name(sel_parser_t *ps, char **out)
{
    if (is_quote(peek(ps))) {
        size_t at = ps->pos;
        int rc = parse_string(ps, out);
        if (rc == 0 && !(*out)[0]) {
            lc_free(*out);
            ps->pos = at;
            return parse_error(ps, "empty label name");
        }
        return rc;
    }
    if (!is_name_char(peek(ps), true))
        return parse_error(ps, "expected label name");
    size_t start = ps->pos;
    while (is_name_char(peek(ps), false))
        ps->pos++;
    *out = lc_xstrndup(ps->s + start, ps->pos - start);
    return 0;
}

static int parse_op(sel_parser_t *ps, lc_match_op_t *op)
{
    if (eat(ps, '=')) {
        *op = eat(ps, '~') ? LC_MATCH_RE : LC_MATCH_EQ;
        return 0;
    }
    if (eat(ps, '!')) {
        if (eat(ps, '='))
            *op = LC_MATCH_NEQ;
        else if (eat(ps, '~'))
            *op = LC_MATCH_NRE;
        else
            return parse_error(ps, "expected '=' or '~' after '!'");
        return 0;
    }
    return parse_error(ps, "expected one of =, !=, =~, !~");
}

/* ---------------------------------------------------------------- grammar */

/* matcher := name ws op ws string */
static int parse_matcher(sel_parser_t *ps, lc_selector_t *sel)
{
    char *name = NULL, *value = NULL;
    lc_match_op_t op = LC_MATCH_EQ;
    int rc = parse_name(ps, &name);
    if (rc)
        return rc;
    skip_ws(ps);
    rc = parse_op(ps, &op);
    skip_ws(ps);
    if (rc == 0 && !is_quote(peek(ps)))
        rc = parse_error(ps, "expected quoted label value");
    if (rc == 0)
        rc = parse_string(ps, &value);
    if (rc == 0 && sel->n >= LC_SELECTOR_MAX_MATCHERS)
        rc = parse_error(ps, "too many matchers (limit %d)", LC_SELECTOR_MAX_MATCHERS);
    if (rc == 0)
        rc = lc_selector_add(sel, name, op, value, ps->st);
    lc_free(name);
    lc_free(value);
    return rc;
}

/* '{' [matcher (',' matcher)* [',']] '}', with whitespace anywhere. */
static int parse_braces(sel_parser_t *ps, lc_selector_t *sel)
{
    if (!eat(ps, '{'))
        return parse_error(ps, "expected '{'");
    skip_ws(ps);
    while (!eat(ps, '}')) {
        if (at_end(ps))
            return parse_error(ps, "unexpected end of input, expected '}'");
        int rc = parse_matcher(ps, sel);
        if (rc)
            return rc;
        skip_ws(ps);
        if (!eat(ps, ',') && peek(ps) != '}')
            return parse_error(ps, "expected ',' or '}'");
        skip_ws(ps);
    }
    skip_ws(ps);
    if (!at_end(ps))
        return parse_error(ps, "unexpected characters after '}'");
    return 0;
}

int lc_selector_parse(const char *s, size_t len, lc_selector_t *out, lc_status_t *st)
{
    out->m = NULL;
    out->n = 0;
    if (len > LC_SELECTOR_MAX_BYTES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "invalid selector: longer than %d bytes",
                             LC_SELECTOR_MAX_BYTES);
    sel_parser_t ps = {.s = s, .len = len, .pos = 0, .st = st};
    skip_ws(&ps);
    if (at_end(&ps))
        return 0; /* "" selects everything, like "{}" */
    int rc = parse_braces(&ps, out);
    if (rc)
        lc_selector_fini(out);
    return rc;
}

/* ---------------------------------------------------------------- query form */

static bool profile_type_char_ok(unsigned char c)
{
    return c > 0x20 && c != 0x7f && !strchr("\"'`{}=,!~", c);
}

/* A profile type id is name:sample_type:sample_unit:period_type:period_unit,
 * optionally with a sixth (legacy ":delta") part; pyroscope-api.md §4.2. */
static int check_profile_type(const char *pt, size_t len, lc_status_t *st)
{
    size_t parts = 1;
    for (size_t i = 0; i < len; i++) {
        if (!profile_type_char_ok((unsigned char)pt[i]))
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "invalid query: bad character in profile type at position %zu",
                                 i + 1);
        parts += pt[i] == ':';
    }
    if (len == 0 || pt[0] == ':')
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "invalid query: missing profile type before '{'");
    if (parts != 5 && parts != 6)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "invalid query: profile type must be of the form "
                             "<name>:<sample-type>:<sample-unit>:<period-type>:<period-unit>, "
                             "got %zu parts in \"%.*s\"",
                             parts, (int)(len > 200 ? 200 : len), pt);
    return 0;
}

int lc_selector_parse_query(const char *s, size_t len, char **profile_type, lc_selector_t *out,
                            lc_status_t *st)
{
    out->m = NULL;
    out->n = 0;
    *profile_type = NULL;
    if (len > LC_SELECTOR_MAX_BYTES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "invalid query: longer than %d bytes",
                             LC_SELECTOR_MAX_BYTES);
    const char *brace = len ? memchr(s, '{', len) : NULL;
    if (!brace)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "invalid query: expected <profile type>{<selector>}, missing '{'");
    size_t start = 0, end = (size_t)(brace - s);
    while (start < end && strchr(" \t\r\n", s[start]) && s[start])
        start++;
    while (end > start && strchr(" \t\r\n", s[end - 1]) && s[end - 1])
        end--;
    if (check_profile_type(s + start, end - start, st))
        return -1;
    int rc = lc_selector_parse(brace, len - (size_t)(brace - s), out, st);
    if (rc)
        return rc;
    *profile_type = lc_xstrndup(s + start, end - start);
    return 0;
}
