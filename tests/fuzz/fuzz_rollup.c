/*
 * fuzz_rollup.c — arbitrary bytes as the records of a rollup (store_rollup.c,
 * <dir>/rollups/: derived data a reader trusts only after checking it), read
 * the way a merge reads them. The first byte chooses the record: even, a
 * window record (header, blocks, names, stack tree); odd, a series record
 * (series key, points, summed samples), of tenant "anonymous" (the default).
 *
 * Checks: no crash or over-read; a window that decodes has a tree whose every
 * node's parent comes before it and whose names are in range, and names that
 * fit in the input; a series' points and samples each consume input (their
 * count is bounded by its size) and end cleanly or with LC_ECORRUPT.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "../../libcommon/store/src/store_int.h"

static void fz_name(const char *name, size_t len, void *data)
{
    size_t *total = data;
    if (!name)
        abort();
    *total += len;
}

static void fz_window(const uint8_t *data, size_t size)
{
    MDB_val v = {.mv_size = size, .mv_data = (void *)data};
    size_t name_bytes = 0;
    lc_rollup_tree_t t;
    if (lc_store__rollup_window_record(&v, fz_name, &name_bytes, &t) != 0)
        return;
    if (name_bytes > size || t.n_nodes == 0 || t.parents[0] != 0)
        abort();
    for (uint32_t i = 1; i < t.n_nodes; i++)
        if (t.parents[i] >= i || t.names[i] == 0 || t.names[i] > t.n_names)
            abort();
    lc_free((void *)t.parents);
    lc_free((void *)t.names);
}

static int fz_series(const lc_rollup_series_t *se, void *data)
{
    size_t size = *(const size_t *)data;
    lc_rollup_points_t pts;
    lc_rollup_points_init(&pts, se);
    int64_t time_ns, total;
    size_t n = 0;
    int rc;
    while ((rc = lc_rollup_points_next(&pts, &time_ns, &total)) == 1)
        if (++n > size)
            abort();
    if (rc != 0 && rc != LC_ECORRUPT)
        abort();
    lc_sample_iter_t it;
    lc_sample_iter_init(&it, &se->sums);
    uint32_t node;
    int64_t value;
    n = 0;
    /* compressed sums unpack to at most 128 KiB per 3 input bytes (store_unpack.c),
     * each sample at least 2 bytes */
    while ((rc = lc_sample_iter_next(&it, &node, &value, NULL)) == 1)
        if (++n > (size / 3 + 1) * (64u << 10))
            abort();
    if (rc != 0 && rc != LC_ECORRUPT)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] % 2 == 0) {
        fz_window(data + 1, size - 1);
        return 0;
    }
    static const char *const tenants[] = {"anonymous"};
    MDB_val v = {.mv_size = size - 1, .mv_data = (void *)(data + 1)};
    size_t rest = size - 1;
    static store_unpack_t up; /* compressed sums: zstd without a dictionary */
    static bool up_ready;
    if (!up_ready) {
        lc_store__unpack_init_plain(&up);
        up_ready = true;
    }
    int rc = lc_store__rollup_series_record(&v, tenants, 1, NULL, &up, fz_series, &rest);
    if (rc != 0 && rc != LC_ECORRUPT)
        abort();
    return 0;
}
