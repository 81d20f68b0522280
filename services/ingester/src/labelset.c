/*
 * labelset.c — the `name` parameter of /ingest: `app.name{k=v,k2=v2}`
 * (pyroscope-api.md §2.3).
 *
 * A three-state scanner like Pyroscope's: the app name runs up to '{'; inside
 * the braces '=' separates key and value and ',' or '}' ends a pair; keys and
 * values are whitespace-trimmed and values are raw (they may hold '/', '{',
 * '=' and anything but ',' and '}'). A '}' that closes the set ends parsing:
 * whatever follows is ignored, and so is an unterminated last pair. The
 * reserved key `__name__` skips key validation and replaces the app name.
 */
#include <string.h>

#include "receive_int.h"

#define NAME_KEY "__name__"

typedef enum { LS_APP, LS_KEY, LS_VALUE, LS_DONE } ls_state_t;

typedef struct ls_parser_s {
    const char *s;
    size_t key_start, key_end, val_start;
    ls_state_t state;
    size_t cap;
    ing_labelset_t *out;
    lc_arena_t *arena;
    lc_status_t *st;
} ls_parser_t;

static bool ls_is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* Trimmed copy of s[start, end) in the arena. */
static char *ls_trimmed(ls_parser_t *p, size_t start, size_t end)
{
    while (start < end && ls_is_space(p->s[start]))
        start++;
    while (end > start && ls_is_space(p->s[end - 1]))
        end--;
    return lc_arena_strndup(p->arena, p->s + start, end - start);
}

static bool ls_key_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '.';
}

static bool ls_app_char(char c)
{
    return ls_key_char(c) || c == '-' || c == '/';
}

static int ls_validate(lc_status_t *st, const char *what, const char *s, bool (*ok)(char))
{
    if (!*s)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "name: %s is required", what);
    for (const char *c = s; *c; c++) {
        if (!ok(*c))
            return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                                 "name: invalid %s: %s: character is not allowed: '%c'", what, s,
                                 *c);
    }
    return 0;
}

static int ls_put(ls_parser_t *p, const char *key, const char *value)
{
    ing_labelset_t *ls = p->out;
    if (strcmp(key, NAME_KEY) == 0) {
        ls->app_name = value;
        return 0;
    }
    for (size_t i = 0; i < ls->n; i++) {
        if (strcmp(ls->v[i].name, key) == 0) {
            ls->v[i].value = value;
            return 0;
        }
    }
    if (ls->n == ING_LABELSET_MAX_PAIRS)
        return lc_status_set(p->st, LC_CODE_INVALID_ARGUMENT, "name: more than %d labels",
                             ING_LABELSET_MAX_PAIRS);
    ls->v[ls->n++] = (ing_kv_t){key, value};
    return 0;
}

static int ls_end_pair(ls_parser_t *p, size_t at)
{
    char *key = ls_trimmed(p, p->key_start, p->key_end);
    char *value = ls_trimmed(p, p->val_start, at);
    if (!key || !value)
        return lc_status_set(p->st, LC_CODE_INVALID_ARGUMENT, "name: too long");
    if (strcmp(key, NAME_KEY) != 0 && ls_validate(p->st, "label name", key, ls_key_char) < 0)
        return -1;
    return ls_put(p, key, value);
}

/* The app name ends at the first '{' (or at the end of the string). */
static int ls_end_app(ls_parser_t *p, size_t at)
{
    p->out->app_name = ls_trimmed(p, 0, at);
    if (!p->out->app_name)
        return lc_status_set(p->st, LC_CODE_INVALID_ARGUMENT, "name: too long");
    p->state = LS_KEY;
    p->key_start = at + 1;
    return ls_validate(p->st, "service name", p->out->app_name, ls_app_char);
}

static int ls_step(ls_parser_t *p, size_t i)
{
    char c = p->s[i];
    switch (p->state) {
    case LS_APP:
        return c == '{' ? ls_end_app(p, i) : 0;
    case LS_KEY:
        if (c == '}') {
            p->state = LS_DONE;
        } else if (c == '=') {
            p->key_end = i;
            p->val_start = i + 1;
            p->state = LS_VALUE;
        }
        return 0;
    case LS_VALUE:
        if (c != ',' && c != '}')
            return 0;
        if (ls_end_pair(p, i) < 0)
            return -1;
        p->state = c == '}' ? LS_DONE : LS_KEY;
        p->key_start = i + 1;
        return 0;
    case LS_DONE:
        return 0;
    }
    return 0;
}

int ing_labelset_parse(const char *s, lc_arena_t *arena, ing_labelset_t *out, lc_status_t *st)
{
    *out = (ing_labelset_t){0};
    out->v = lc_arena_calloc(arena, ING_LABELSET_MAX_PAIRS, sizeof(*out->v));
    if (!out->v)
        return lc_status_set(st, LC_CODE_RESOURCE_EXHAUSTED, "name: out of request memory");
    ls_parser_t p = {.s = s ? s : "", .state = LS_APP, .out = out, .arena = arena, .st = st};
    size_t len = strlen(p.s);
    for (size_t i = 0; i < len && p.state != LS_DONE; i++) {
        if (ls_step(&p, i) < 0)
            return -1;
    }
    if (p.state == LS_APP && ls_end_app(&p, len) < 0) /* no '{': all of s is the app name */
        return -1;
    /* An override skips validation (as in Pyroscope), but an empty one would
     * leave the series without a service name. */
    if (!*out->app_name)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "name: service name is required");
    return 0;
}

const char *ing_labelset_get(const ing_labelset_t *ls, const char *name)
{
    if (strcmp(name, NAME_KEY) == 0)
        return ls->app_name;
    for (size_t i = 0; i < ls->n; i++) {
        if (strcmp(ls->v[i].name, name) == 0)
            return ls->v[i].value;
    }
    return NULL;
}
