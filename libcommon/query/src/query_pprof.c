/*
 * query_pprof.c — the merged pprof of SelectMergeProfile (pyroscope-api.md
 * §5.9): the same per-block dense sums as the flame graph (query_merge.c),
 * but every node with a value becomes one sample whose stack is the node's
 * full location path, leaf first. Mappings, locations and functions are
 * re-emitted through the pprof builder, which de-duplicates them across blocks
 * by content (block ids differ between blocks) and sums samples that end up
 * with the same stack. Per block, each store id is resolved to a builder id
 * once.
 *
 * Go PGO export (lc_query_pgo_t, Pyroscope's GoPGO selector) keeps only the
 * keep_locations leaf-most locations of each stack and, with
 * aggregate_callees, replaces the leaf location by a copy whose innermost
 * line number is 0, so samples differing only in the callee's line merge.
 */
#include <stdlib.h>
#include <string.h>

#include "query_int.h"

typedef struct qp_block_s {
    lc_block_t *b;
    lc_pprof_builder_t *out;
    uint64_t *loc_id;  /* by store location id: builder id, 0 = not yet */
    uint64_t *leaf_id; /* the same for the PGO leaf variant (line 0), lazily */
    uint64_t *func_id;
    uint64_t *map_id;
    size_t n_locs, n_funcs, n_maps;
    lc_buf_t str[3]; /* NUL-terminated copies of block strings */
    lc_pprof_line_t *lines;
    size_t lines_cap;
} qp_block_t;

static int qp_init(qp_block_t *p, lc_block_t *b, lc_pprof_builder_t *out)
{
    lc_block_info_t info;
    int rc = lc_block_info(b, &info);
    if (rc)
        return rc;
    if (info.locations >= UINT32_MAX || info.functions >= UINT32_MAX || info.strings >= UINT32_MAX)
        return LC_ECORRUPT;
    *p = (qp_block_t){.b = b, .out = out, .n_locs = info.locations, .n_funcs = info.functions};
    /* Mappings are not counted in the block info; they are few, so grow on demand. */
    p->loc_id = lc_xcalloc(p->n_locs + 1, sizeof(uint64_t));
    p->func_id = lc_xcalloc(p->n_funcs + 1, sizeof(uint64_t));
    for (size_t i = 0; i < LC_ARRAY_LEN(p->str); i++)
        lc_buf_init(&p->str[i], LC_BUF_UNLIMITED);
    return 0;
}

static void qp_fini(qp_block_t *p)
{
    lc_free(p->loc_id);
    lc_free(p->leaf_id);
    lc_free(p->func_id);
    lc_free(p->map_id);
    lc_free(p->lines);
    for (size_t i = 0; i < LC_ARRAY_LEN(p->str); i++)
        lc_buf_fini(&p->str[i]);
}

/* The block string `id` as a C string in scratch buffer `slot`. */
static int qp_string(qp_block_t *p, uint32_t id, int slot, const char **out)
{
    const char *s;
    size_t len;
    int rc = lc_block_string(p->b, id, &s, &len);
    lc_buf_t *buf = &p->str[slot];
    lc_buf_reset(buf);
    if (rc == 0)
        rc = lc_buf_append(buf, s, len);
    if (rc == 0)
        rc = lc_buf_putc(buf, '\0');
    *out = (const char *)buf->data;
    return rc;
}

static int qp_function(qp_block_t *p, uint32_t fid, uint64_t *out)
{
    if (fid == 0 || fid > p->n_funcs)
        return LC_ECORRUPT;
    if (!p->func_id[fid]) {
        lc_store_function_t fn;
        const char *name, *system_name, *filename;
        int rc = lc_block_function(p->b, fid, &fn);
        if (rc == 0)
            rc = qp_string(p, fn.name, 0, &name);
        if (rc == 0)
            rc = qp_string(p, fn.system_name, 1, &system_name);
        if (rc == 0)
            rc = qp_string(p, fn.filename, 2, &filename);
        if (rc)
            return rc;
        p->func_id[fid] =
            lc_pprof_builder_function(p->out, name, system_name, filename, fn.start_line);
        if (!p->func_id[fid])
            return LC_ETOOBIG;
    }
    *out = p->func_id[fid];
    return 0;
}

static int qp_mapping(qp_block_t *p, uint32_t mid, uint64_t *out)
{
    *out = 0;
    if (mid == 0)
        return 0;
    if (mid >= p->n_maps) {
        size_t old = p->n_maps;
        p->map_id = lc_xgrow(p->map_id, &p->n_maps, (size_t)mid + 1, sizeof(uint64_t));
        memset(p->map_id + old, 0, (p->n_maps - old) * sizeof(uint64_t));
    }
    if (!p->map_id[mid]) {
        lc_store_mapping_t m;
        const char *filename, *build_id;
        int rc = lc_block_mapping(p->b, mid, &m);
        if (rc == 0)
            rc = qp_string(p, m.filename, 0, &filename);
        if (rc == 0)
            rc = qp_string(p, m.build_id, 1, &build_id);
        if (rc)
            return rc;
        p->map_id[mid] =
            lc_pprof_builder_mapping(p->out, m.memory_start, m.memory_limit, m.file_offset,
                                     filename, build_id, m.has_functions);
        if (!p->map_id[mid])
            return LC_ETOOBIG;
    }
    *out = p->map_id[mid];
    return 0;
}

/* The lines of a location stored without any, from the reader's symbolizer
 * (lc_block_symbols): the merged pprof names what the flame graph names, so
 * `go tool pprof` and Parca's reports see the same functions. *n = 0 when
 * nothing names it: the location goes out as stored (mapping, address). */
static int qp_symbolized_lines(qp_block_t *p, const lc_store_location_t *l, size_t *n)
{
    lc_symbols_t sy;
    *n = 0;
    /* a lookup that fails (the reader's arena full) leaves the frame as
     * stored, as lc_block_frame_count does for the flame graph */
    if (lc_block_symbols(p->b, l, &sy) != 0 || sy.n == 0)
        return 0;
    p->lines = lc_xgrow(p->lines, &p->lines_cap, sy.n, sizeof(*p->lines));
    for (size_t j = 0; j < sy.n; j++) {
        const lc_symbol_frame_t *f = &sy.frames[j];
        p->lines[j] = (lc_pprof_line_t){
            .function_id = lc_pprof_builder_function(p->out, f->function, f->function, f->file, 0),
            .line = f->line};
        if (!p->lines[j].function_id)
            return LC_ETOOBIG;
    }
    *n = sy.n;
    return 0;
}

/* The builder id of store location lid; zero_line: the PGO leaf variant
 * whose innermost line (lines[0]) has line number 0. */
static int qp_location(qp_block_t *p, uint32_t lid, bool zero_line, uint64_t *out)
{
    if (lid == 0 || lid > p->n_locs)
        return LC_ECORRUPT;
    if (zero_line && !p->leaf_id)
        p->leaf_id = lc_xcalloc(p->n_locs + 1, sizeof(uint64_t));
    uint64_t *cache = zero_line ? p->leaf_id : p->loc_id;
    if (cache[lid]) {
        *out = cache[lid];
        return 0;
    }
    lc_store_location_t l;
    uint64_t mapping;
    int rc = lc_block_location(p->b, lid, &l);
    if (rc == 0)
        rc = qp_mapping(p, l.mapping_id, &mapping);
    if (rc)
        return rc;
    size_t n_lines = l.n_lines;
    if (n_lines == 0)
        rc = qp_symbolized_lines(p, &l, &n_lines);
    else {
        p->lines = lc_xgrow(p->lines, &p->lines_cap, n_lines, sizeof(*p->lines));
        for (size_t j = 0; j < n_lines && rc == 0; j++) {
            p->lines[j].line = l.lines[j].line;
            rc = qp_function(p, l.lines[j].function_id, &p->lines[j].function_id);
        }
    }
    if (rc)
        return rc;
    if (zero_line && n_lines)
        p->lines[0].line = 0;
    cache[lid] = lc_pprof_builder_location(p->out, mapping, l.address, p->lines, n_lines);
    *out = cache[lid];
    return *out ? 0 : LC_ETOOBIG;
}

/* One sample per node with a value; its stack is the node's path, leaf first
 * (with PGO: its leaf-most keep_locations locations). */
static int qp_emit(qp_block_t *p, const qm_sums_t *s, const lc_query_pgo_t *pgo)
{
    uint64_t *stack = NULL;
    size_t cap = 0, keep = pgo->enabled && pgo->keep_locations ? pgo->keep_locations : SIZE_MAX;
    bool zero_leaf_line = pgo->enabled && pgo->aggregate_callees;
    int rc = 0;
    for (uint32_t i = 0; rc == 0 && i < s->n; i++) {
        if (s->self[i] == 0)
            continue;
        size_t depth = 0;
        for (uint32_t n = i; n != 0 && rc == 0 && depth < keep; n = s->parents[n]) {
            stack = lc_xgrow(stack, &cap, depth + 1, sizeof(*stack));
            rc = qp_location(p, s->locations[n], zero_leaf_line && depth == 0, &stack[depth]);
            depth++;
        }
        if (rc == 0)
            lc_pprof_builder_sample(p->out, stack, depth, &s->self[i], NULL, 0);
    }
    lc_free(stack);
    return rc;
}

int lc_query_merge_pprof(lc_store_reader_t *r, const lc_query_t *q, lc_pprof_builder_t *b,
                         lc_status_t *st)
{
    qm_sums_t sums = {0};
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < lc_query__blocks(r); i++) {
        lc_block_t *blk = lc_store_reader_block(r, i);
        rc = lc_query__block_sum(blk, q, &sums);
        if (rc || sums.n == 0)
            continue;
        qp_block_t p;
        rc = qp_init(&p, blk, b);
        if (rc == 0) {
            rc = qp_emit(&p, &sums, &q->pgo);
            qp_fini(&p);
        }
    }
    lc_query__sums_fini(&sums);
    return rc ? lc_query__fail(st, rc, "merging profiles") : 0;
}
