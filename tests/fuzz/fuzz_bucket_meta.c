/*
 * fuzz_bucket_meta.c — what the ingester reads back from the bucket and its
 * data dir (services/ingester/src/bucket_int.h): an index entry (meta
 * object, JSON) and an upload record. Checks that an accepted entry names a
 * block of digits, a valid object key and a version within their caps, and
 * that an accepted record's name and version are non-empty and fit; an index
 * key from a listing (its start and name: digits first, no '/', fits), a
 * gone list (each of its lines is found in it), and a rollup's index entry
 * and index key (bucket_read.c reads them back).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bucket_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_meta(const uint8_t *data, size_t size)
{
    bkt_meta_t m;
    if (bkt_meta_parse(data, size, &m) != 0)
        return;
    size_t n = strlen(m.start);
    if (n == 0 || n >= sizeof m.start || strspn(m.start, "-0123456789") != n)
        abort();
    if (!lc_objstore_key_valid(m.data) || strlen(m.version) >= sizeof m.version)
        abort();
}

static void check_record(const uint8_t *data, size_t size)
{
    char text[BKT_RECORD_MAX_BYTES + 1], name[BKT_NAME_MAX], version[BKT_VERSION_MAX];
    size_t n = size < BKT_RECORD_MAX_BYTES ? size : BKT_RECORD_MAX_BYTES;
    memcpy(text, data, n);
    text[n] = '\0';
    if (bkt_record_parse(text, name, version) != 0)
        return;
    if (!name[0] || !version[0] || strlen(name) >= BKT_NAME_MAX ||
        strlen(version) >= BKT_VERSION_MAX || strchr(name, ' '))
        abort();
}

static void check_index_key(const char *text)
{
    int64_t start;
    char name[BKT_NAME_MAX];
    if (!bkt_index_key_parse(text, &start, name))
        return;
    if (!name[0] || strlen(name) >= BKT_NAME_MAX || strchr(name, '/') || name[0] < '0' ||
        name[0] > '9' || start % 1000000000 != 0)
        abort();
}

/* An accepted rollup entry: a window of its level, 1..max objects with
 * names and versions that fit, a data name of [0-9a-f-] digits first. */
static void check_rollup_entry(const uint8_t *data, size_t size)
{
    static bkt_rollup_entry_t e;
    if (bkt_rollup_entry_parse(data, size, &e) != 0)
        return;
    int64_t len = bkt_rollup_level_ns(e.level);
    size_t dn = strlen(e.data_name);
    if (len == 0 || e.start_ns % len != 0 || e.n == 0 || e.n > BKT_ROLLUP_MAX_OBJECTS ||
        !lc_objstore_key_valid(e.data) || dn == 0 || dn >= BKT_NAME_MAX ||
        strspn(e.data_name, "0123456789abcdef-") != dn || !strstr(e.data, e.data_name))
        abort();
    for (size_t i = 0; i < e.n; i++)
        if (!e.objs[i].name[0] || !e.objs[i].version[0])
            abort();
}

static void check_rollup_key(const char *text)
{
    int64_t window;
    int level;
    if (bkt_rollup_index_key_parse(text, &window, &level) &&
        (bkt_rollup_level_ns(level) == 0 || window % bkt_rollup_level_ns(level) != 0))
        abort();
}

static void check_gone(const char *text)
{
    size_t n = strcspn(text, "\n");
    if (n == 0 || n >= BKT_NAME_MAX)
        return;
    char first[BKT_NAME_MAX];
    memcpy(first, text, n);
    first[n] = '\0';
    if (!bkt_gone_lists(text, first))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size <= BKT_RECORD_MAX_BYTES) {
        char text[BKT_RECORD_MAX_BYTES + 1];
        memcpy(text, data, size);
        text[size] = '\0';
        check_index_key(text);
        check_rollup_key(text);
        check_gone(text);
    }
    if (size <= BKT_META_MAX_BYTES)
        check_meta(data, size);
    check_record(data, size);
    check_rollup_entry(data, size);
    return 0;
}
