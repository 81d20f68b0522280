/*
 * objstore_xml.c — the bounded element-text reader of lc/objstore_xml.h.
 * Threading: pure functions.
 */
#include "lc/objstore_xml.h"

#include <string.h>

typedef struct {
    const char *name;
    char *out;
    size_t out_len;
    int found;
} first_ctx_t;

/* One entity at p (after '&') into *c; returns its length or 0 if unknown.
 * S3 sends the five predefined ones; numeric references are not needed for
 * the keys we allow (plain ASCII) and are refused. */
static size_t entity(const char *p, const char *end, char *c)
{
    static const struct {
        const char *text;
        char c;
    } table[] = {{"amp;", '&'}, {"lt;", '<'}, {"gt;", '>'}, {"quot;", '"'}, {"apos;", '\''}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        size_t n = strlen(table[i].text);
        if ((size_t)(end - p) >= n && memcmp(p, table[i].text, n) == 0) {
            *c = table[i].c;
            return n;
        }
    }
    return 0;
}

/* Decodes [p, end) into text (LC_XML_TEXT_MAX + 1 bytes). */
static int decode_text(const char *p, const char *end, char *text, size_t *len)
{
    size_t n = 0;
    while (p < end) {
        char c = *p++;
        if (c == '<')
            return LC_EINPUT;
        if (c == '&') {
            size_t used = entity(p, end, &c);
            if (used == 0)
                return LC_EINPUT;
            p += used;
        }
        if (n >= LC_XML_TEXT_MAX)
            return LC_ETOOBIG;
        text[n++] = c;
    }
    text[n] = '\0';
    *len = n;
    return 0;
}

/* The next "<name>" or "<name " at or after p, or NULL. */
static const char *find_open(const char *p, const char *end, const char *name, size_t name_len)
{
    while (p < end) {
        const char *lt = memchr(p, '<', (size_t)(end - p));
        if (!lt)
            return NULL;
        const char *after = lt + 1 + name_len;
        if (after < end && memcmp(lt + 1, name, name_len) == 0 && (*after == '>' || *after == ' '))
            return lt;
        p = lt + 1;
    }
    return NULL;
}

static const char *find_close(const char *p, const char *end, const char *name, size_t name_len)
{
    while (p < end) {
        const char *lt = memchr(p, '<', (size_t)(end - p));
        if (!lt)
            return NULL;
        if ((size_t)(end - lt) >= name_len + 3 && lt[1] == '/' &&
            memcmp(lt + 2, name, name_len) == 0 && lt[2 + name_len] == '>')
            return lt;
        p = lt + 1;
    }
    return NULL;
}

int lc_xml_each(const char *xml, size_t len, const char *name,
                int (*each)(void *arg, const char *text, size_t text_len), void *arg)
{
    const char *p = xml, *end = xml + len;
    size_t name_len = strlen(name);
    static __thread char text[LC_XML_TEXT_MAX + 1];
    const char *open;
    while ((open = find_open(p, end, name, name_len)) != NULL) {
        const char *gt = memchr(open, '>', (size_t)(end - open));
        if (!gt)
            return LC_EINPUT;
        if (gt[-1] == '/') { /* <name/>: empty */
            p = gt + 1;
            continue;
        }
        const char *close = find_close(gt + 1, end, name, name_len);
        if (!close)
            return LC_EINPUT;
        size_t n = 0;
        int rc = decode_text(gt + 1, close, text, &n);
        if (rc == 0)
            rc = each(arg, text, n);
        if (rc != 0)
            return rc;
        p = close + name_len + 3;
    }
    return 0;
}

static int keep_first(void *arg, const char *text, size_t len)
{
    first_ctx_t *f = arg;
    if (len + 1 > f->out_len)
        return LC_ETOOBIG;
    memcpy(f->out, text, len + 1);
    f->found = 1;
    return 1; /* stop */
}

int lc_xml_first(const char *xml, size_t len, const char *name, char *out, size_t out_len)
{
    first_ctx_t f = {.name = name, .out = out, .out_len = out_len};
    int rc = lc_xml_each(xml, len, name, keep_first, &f);
    if (rc < 0)
        return rc;
    return f.found ? 0 : LC_ENOTFOUND;
}
