/*
 * labels.c — label sets: ownership, canonical order, a compact binary form and
 * the stable hash that ember uses for series fingerprints.
 *
 * The binary form is `uvarint count, then per label uvarint len + name bytes,
 * uvarint len + value bytes`. It is written to storage, so the hash and the
 * encoding must never depend on anything but the bytes of the labels.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/hash.h"
#include "lc/labels.h"
#include "lc/utf8.h"

/* Separates name from value and label from label in the hash input, so that
 * ("ab","c") and ("a","bc") hash differently. 0xff never occurs in UTF-8. */
#define HASH_SEPARATOR 0xff

/* ---------------------------------------------------------------- hashing */

uint64_t lc_labels_hash(const lc_labels_t *ls)
{
    static const uint8_t sep = HASH_SEPARATOR;
    uint64_t h = LC_FNV64_OFFSET;
    for (size_t i = 0; i < ls->n; i++) {
        h = lc_fnv1a64(h, ls->v[i].name, strlen(ls->v[i].name));
        h = lc_fnv1a64(h, &sep, 1);
        h = lc_fnv1a64(h, ls->v[i].value, strlen(ls->v[i].value));
        h = lc_fnv1a64(h, &sep, 1);
    }
    return lc_mix64(h ^ ls->n);
}

/* ---------------------------------------------------------------- set ops */

void lc_labels_init(lc_labels_t *ls)
{
    ls->v = NULL;
    ls->n = 0;
    ls->cap = 0;
}

void lc_labels_fini(lc_labels_t *ls)
{
    for (size_t i = 0; i < ls->n; i++) {
        lc_free(ls->v[i].name);
        lc_free(ls->v[i].value);
    }
    lc_free(ls->v);
    lc_labels_init(ls);
}

static void labels_push_owned(lc_labels_t *ls, char *name, char *value)
{
    ls->v = lc_xgrow(ls->v, &ls->cap, ls->n + 1, sizeof(*ls->v));
    ls->v[ls->n].name = name;
    ls->v[ls->n].value = value;
    ls->n++;
}

void lc_labels_add(lc_labels_t *ls, const char *name, const char *value)
{
    labels_push_owned(ls, lc_xstrdup(name), lc_xstrdup(value));
}

void lc_labels_copy(lc_labels_t *dst, const lc_labels_t *src)
{
    lc_labels_init(dst);
    for (size_t i = 0; i < src->n; i++)
        lc_labels_add(dst, src->v[i].name, src->v[i].value);
}

static lc_label_t *labels_find(const lc_labels_t *ls, const char *name)
{
    for (size_t i = 0; i < ls->n; i++)
        if (strcmp(ls->v[i].name, name) == 0)
            return &ls->v[i];
    return NULL;
}

void lc_labels_set(lc_labels_t *ls, const char *name, const char *value)
{
    lc_label_t *l = labels_find(ls, name);
    if (!l) {
        lc_labels_add(ls, name, value);
        return;
    }
    char *copy = lc_xstrdup(value); /* value may point into l->value */
    lc_free(l->value);
    l->value = copy;
}

const char *lc_labels_get(const lc_labels_t *ls, const char *name)
{
    const lc_label_t *l = labels_find(ls, name);
    return l ? l->value : NULL;
}

bool lc_labels_del(lc_labels_t *ls, const char *name)
{
    lc_label_t *l = labels_find(ls, name);
    if (!l)
        return false;
    lc_free(l->name);
    lc_free(l->value);
    size_t i = (size_t)(l - ls->v);
    memmove(&ls->v[i], &ls->v[i + 1], (ls->n - i - 1) * sizeof(*ls->v));
    ls->n--;
    return true;
}

/* strcmp compares as unsigned char, which is byte order. Ties on the name
 * order by value so that sorting is deterministic even with duplicates. */
static int label_cmp(const void *a, const void *b)
{
    const lc_label_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->value, y->value);
}

void lc_labels_sort(lc_labels_t *ls)
{
    if (ls->n > 1)
        qsort(ls->v, ls->n, sizeof(*ls->v), label_cmp);
}

const char *lc_labels_duplicate(const lc_labels_t *ls)
{
    for (size_t i = 1; i < ls->n; i++)
        if (strcmp(ls->v[i - 1].name, ls->v[i].name) == 0)
            return ls->v[i].name;
    return NULL;
}

int lc_labels_cmp(const lc_labels_t *a, const lc_labels_t *b)
{
    size_t n = a->n < b->n ? a->n : b->n;
    for (size_t i = 0; i < n; i++) {
        int c = label_cmp(&a->v[i], &b->v[i]);
        if (c)
            return c < 0 ? -1 : 1;
    }
    return a->n < b->n ? -1 : a->n > b->n;
}

bool lc_label_name_is_legacy(const char *name)
{
    if (!name[0])
        return false;
    for (size_t i = 0; name[i]; i++) {
        char c = name[i];
        bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
        if (!alpha && !(i > 0 && c >= '0' && c <= '9'))
            return false;
    }
    return true;
}

/* ---------------------------------------------------------------- binary form */

static int put_string(lc_buf_t *out, const char *s)
{
    size_t len = strlen(s);
    int rc = lc_buf_put_uvarint(out, len);
    return rc ? rc : lc_buf_append(out, s, len);
}

int lc_labels_encode(const lc_labels_t *ls, lc_buf_t *out)
{
    int rc = lc_buf_put_uvarint(out, ls->n);
    for (size_t i = 0; i < ls->n && !rc; i++) {
        rc = put_string(out, ls->v[i].name);
        if (!rc)
            rc = put_string(out, ls->v[i].value);
    }
    return rc;
}

/* Reads one length-prefixed string. Strings are C strings in memory, so a NUL
 * byte inside one could never have been encoded by us: reject it. */
static int get_string(const uint8_t **p, const uint8_t *end, char **out)
{
    uint64_t len;
    if (lc_uvarint_get(p, end, &len) || len > (uint64_t)(end - *p))
        return LC_ECORRUPT;
    if (memchr(*p, '\0', len))
        return LC_ECORRUPT;
    *out = lc_xstrndup((const char *)*p, len);
    *p += len;
    return 0;
}

static int decode_labels(const uint8_t *p, const uint8_t *end, lc_labels_t *out)
{
    uint64_t count;
    if (lc_uvarint_get(&p, end, &count))
        return LC_ECORRUPT;
    /* Every label takes at least two bytes, so a larger count is a lie that
     * must not drive an allocation. */
    if (count > (uint64_t)(end - p) / 2)
        return LC_ECORRUPT;
    for (uint64_t i = 0; i < count; i++) {
        char *name, *value;
        if (get_string(&p, end, &name))
            return LC_ECORRUPT;
        if (get_string(&p, end, &value)) {
            lc_free(name);
            return LC_ECORRUPT;
        }
        labels_push_owned(out, name, value);
    }
    return p == end ? 0 : LC_ECORRUPT;
}

int lc_labels_decode(const uint8_t *p, size_t len, lc_labels_t *out)
{
    lc_labels_init(out);
    if (!p || len == 0)
        return LC_ECORRUPT; /* even the empty set has its count byte */
    int rc = decode_labels(p, p + len, out);
    if (rc)
        lc_labels_fini(out);
    return rc;
}

/* Why text is not a label's, or NULL. */
static const char *label_text_fault(const char *s, size_t len, bool name)
{
    const uint8_t *p = (const uint8_t *)s;
    for (size_t i = 0; i < len;) {
        if (p[i] < 0x80) { /* ASCII, nearly every byte: nothing to decode */
            if (p[i] == 0)
                return "a NUL byte";
            if (name && (p[i] < 0x20 || p[i] == 0x7f))
                return "a control character";
            i++;
            continue;
        }
        uint32_t cp = 0;
        size_t n = lc_utf8_decode(p + i, len - i, &cp);
        if (n == 0)
            return "invalid UTF-8";
        if (cp == 0)
            return "a NUL byte";
        if (cp == 0xfffd)
            return "U+FFFD (bytes that were not text)";
        if (name && (cp < 0x20 || cp == 0x7f))
            return "a control character";
        i += n;
    }
    return NULL;
}

/* At most 64 bytes of s for a message, cut before a NUL (what %s prints). */
static int label_shown(const char *s, size_t len)
{
    size_t n = len < 64 ? len : 64;
    const char *nul = memchr(s, 0, n);
    return (int)(nul ? (size_t)(nul - s) : n);
}

int lc_label_check(const char *name, size_t name_len, const char *value, size_t value_len,
                   lc_status_t *st)
{
    if (name_len == 0)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "label with an empty name");
    const char *why = label_text_fault(name, name_len, true);
    if (why)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "label name %.*s...: %s is not allowed",
                             label_shown(name, name_len), name, why);
    why = label_text_fault(value, value_len, false);
    if (why)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "value of label %.*s: %s is not allowed",
                             label_shown(name, name_len), name, why);
    return 0;
}
