/*
 * parca_report_arrow.c — Parca's two Arrow reports (parca.md §4.3):
 * FLAMEGRAPH_ARROW, the call tree as one Arrow record (a row per node in
 * pre-order, row 0 the root, children as row numbers), and TABLE_ARROW,
 * TOP's rows as a record. String columns are dictionaries over the tree's
 * string table; arrow_ipc.c writes the IPC stream.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/arrow_write.h"
#include "parca_tree_int.h"

/* ------------------------------------------------------- FLAMEGRAPH_ARROW */

enum {
    FA_MAPPING_FILE,
    FA_BUILD_ID,
    FA_ADDRESS,
    FA_LINE,
    FA_INLINED,
    FA_STARTLINE,
    FA_NAME,
    FA_SYSTEM_NAME,
    FA_FILE_NAME,
    FA_CHILDREN,
    FA_PARENT,
    FA_CUMULATIVE,
    FA_FLAT,
    FA_DIFF,
    FA_DEPTH,
    FA_COLUMNS
};

static const lc_arw_field_t flame_fields[FA_COLUMNS] = {
    {"mapping_file", LC_ARW_DICT_UTF8},
    {"mapping_build_id", LC_ARW_DICT_UTF8},
    {"location_address", LC_ARW_UINT64},
    {"location_line", LC_ARW_INT64},
    {"inlined", LC_ARW_BOOL},
    {"function_startline", LC_ARW_INT64},
    {"function_name", LC_ARW_DICT_UTF8},
    {"function_system_name", LC_ARW_DICT_UTF8},
    {"function_file_name", LC_ARW_DICT_UTF8},
    {"children", LC_ARW_LIST_UINT32},
    {"parent", LC_ARW_INT32},
    {"cumulative", LC_ARW_INT64},
    {"flat", LC_ARW_INT64},
    {"diff", LC_ARW_INT64},
    {"depth", LC_ARW_UINT32},
};

/* Every string column is dictionary-encoded over the tree's string table
 * (string ids are the indices), as Parca's records are: a name is written
 * once, not once per node. */
static void set_string_dicts(lc_arw_batch_t *b, const parca_tree_t *t, const lc_arw_field_t *fields,
                             size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fields[i].type == LC_ARW_DICT_UTF8)
            lc_arw_set_dict(b, i, t->strings, t->n_strings);
}

/* Pre-order rows of the kept nodes: order[] the node ids, row[] the row of
 * each node (UINT32_MAX when trimmed). */
static size_t preorder_rows(const parca_tree_t *t, int64_t min_cum, uint32_t *order, uint32_t *row,
                            int64_t *trimmed)
{
    size_t n = 0;
    uint32_t *stack = lc_xcalloc(t->n_nodes + 1, sizeof(uint32_t));
    size_t top = 0;
    stack[top++] = 0;
    for (size_t i = 0; i < t->n_nodes; i++)
        row[i] = UINT32_MAX;
    while (top) {
        uint32_t id = stack[--top];
        row[id] = (uint32_t)n;
        order[n++] = id;
        for (uint32_t c = t->nodes[id].first_child; c != NO_FRAME; c = t->nodes[c].next_sibling) {
            if (parca_node_kept(t, c, min_cum))
                stack[top++] = c;
            else
                *trimmed += t->nodes[c].cum;
        }
    }
    lc_free(stack);
    return n;
}

static void flame_row(lc_arw_batch_t *b, const parca_tree_t *t, uint32_t id, const uint32_t *row,
                      uint32_t **kids, size_t *kids_cap)
{
    const node_t *nd = &t->nodes[id];
    const frame_t *f = nd->frame == NO_FRAME ? NULL : &t->frames[nd->frame];
    lc_arw_put_i32(b, FA_MAPPING_FILE, f ? f->mapping_file : 0);
    lc_arw_put_i32(b, FA_BUILD_ID, f ? f->build_id : 0);
    lc_arw_put_i64(b, FA_ADDRESS, f ? (int64_t)f->address : 0);
    lc_arw_put_i64(b, FA_LINE, f ? f->line : 0);
    lc_arw_put_bool(b, FA_INLINED, false);
    lc_arw_put_i64(b, FA_STARTLINE, f ? f->start_line : 0);
    lc_arw_put_i32(b, FA_NAME, f ? f->func : 0);
    lc_arw_put_i32(b, FA_SYSTEM_NAME, f ? f->system_name : 0);
    lc_arw_put_i32(b, FA_FILE_NAME, f ? f->file : 0);
    size_t n = 0;
    for (uint32_t c = nd->first_child; c != NO_FRAME; c = t->nodes[c].next_sibling) {
        if (row[c] == UINT32_MAX)
            continue;
        *kids = lc_xgrow(*kids, kids_cap, n + 1, sizeof(uint32_t));
        (*kids)[n++] = row[c];
    }
    lc_arw_put_list(b, FA_CHILDREN, *kids, n);
    lc_arw_put_i32(b, FA_PARENT, id == 0 ? -1 : (int64_t)row[nd->parent]);
    lc_arw_put_i64(b, FA_CUMULATIVE, nd->cum);
    lc_arw_put_i64(b, FA_FLAT, nd->flat);
    lc_arw_put_i64(b, FA_DIFF, nd->diff);
    lc_arw_put_i32(b, FA_DEPTH, nd->depth);
}

static int encode_batch(lc_arw_batch_t *b, lc_arena_t *a, ProtobufCBinaryData *out, lc_status_t *st)
{
    lc_buf_t buf;
    lc_buf_init(&buf, PARCA_MAX_REPORT);
    int rc = lc_arw_encode(b, &buf);
    lc_arw_batch_fini(b);
    if (rc == 0) {
        out->data = lc_arena_alloc(a, buf.len + 1);
        if (out->data)
            memcpy(out->data, buf.data, buf.len);
        out->len = buf.len;
        rc = out->data ? 0 : LC_ETOOBIG;
    }
    lc_buf_fini(&buf);
    return rc ? qry_fail(st, rc, "encoding the Arrow record") : 0;
}

int parca_report_flamegraph_arrow(parca_tree_t *t, const char *unit, double trim, lc_arena_t *a,
                                  Parca__Query__V1alpha1__QueryResponse *resp, lc_status_t *st)
{
    uint32_t *order = lc_xcalloc(t->n_nodes + 1, sizeof(uint32_t));
    uint32_t *row = lc_xcalloc(t->n_nodes + 1, sizeof(uint32_t));
    int64_t trimmed = 0;
    size_t n = preorder_rows(t, parca_min_cum_of(t, trim), order, row, &trimmed);
    lc_arw_batch_t b;
    lc_arw_batch_init(&b, flame_fields, FA_COLUMNS, PARCA_MAX_REPORT);
    lc_arw_batch_reserve(&b, n);
    set_string_dicts(&b, t, flame_fields, FA_COLUMNS);
    uint32_t *kids = NULL;
    size_t kids_cap = 0;
    for (size_t i = 0; i < n; i++)
        flame_row(&b, t, order[i], row, &kids, &kids_cap);
    lc_free(kids);
    lc_free(order);
    lc_free(row);
    Parca__Query__V1alpha1__FlamegraphArrow *fa = lc_arena_alloc(a, sizeof(*fa));
    if (!fa) {
        lc_arw_batch_fini(&b);
        return qry_fail_arena(st);
    }
    *fa = (Parca__Query__V1alpha1__FlamegraphArrow)PARCA__QUERY__V1ALPHA1__FLAMEGRAPH_ARROW__INIT;
    if (encode_batch(&b, a, &fa->record, st))
        return -1;
    fa->unit = (char *)unit;
    fa->height = t->max_depth + 1;
    fa->trimmed = trimmed;
    resp->report_case = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__REPORT_FLAMEGRAPH_ARROW;
    resp->flamegraph_arrow = fa;
    return 0;
}

/* ------------------------------------------------------------ TABLE_ARROW */

enum {
    TA_MAPPING_FILE,
    TA_BUILD_ID,
    TA_ADDRESS,
    TA_LINE,
    TA_STARTLINE,
    TA_NAME,
    TA_SYSTEM_NAME,
    TA_FILE_NAME,
    TA_CUMULATIVE,
    TA_CUMULATIVE_DIFF,
    TA_FLAT,
    TA_FLAT_DIFF,
    TA_COLUMNS
};

static const lc_arw_field_t table_fields[TA_COLUMNS] = {
    {"mapping_file", LC_ARW_DICT_UTF8},
    {"mapping_build_id", LC_ARW_DICT_UTF8},
    {"location_address", LC_ARW_UINT64},
    {"location_line", LC_ARW_INT64},
    {"function_startline", LC_ARW_INT64},
    {"function_name", LC_ARW_DICT_UTF8},
    {"function_system_name", LC_ARW_DICT_UTF8},
    {"function_file_name", LC_ARW_DICT_UTF8},
    {"cumulative", LC_ARW_INT64},
    {"cumulative_diff", LC_ARW_INT64},
    {"flat", LC_ARW_INT64},
    {"flat_diff", LC_ARW_INT64},
};

int parca_report_table_arrow(parca_tree_t *t, const char *unit, lc_arena_t *a,
                             Parca__Query__V1alpha1__QueryResponse *resp, lc_status_t *st)
{
    frame_totals_t ft;
    parca_frame_totals(t, &ft);
    size_t n;
    uint32_t *ids = parca_frames_sorted(t, &ft, &n);
    lc_arw_batch_t b;
    lc_arw_batch_init(&b, table_fields, TA_COLUMNS, PARCA_MAX_REPORT);
    lc_arw_batch_reserve(&b, n);
    set_string_dicts(&b, t, table_fields, TA_COLUMNS);
    for (size_t i = 0; i < n; i++) {
        const frame_t *f = &t->frames[ids[i]];
        lc_arw_put_i32(&b, TA_MAPPING_FILE, f->mapping_file);
        lc_arw_put_i32(&b, TA_BUILD_ID, f->build_id);
        lc_arw_put_i64(&b, TA_ADDRESS, (int64_t)f->address);
        lc_arw_put_i64(&b, TA_LINE, f->line);
        lc_arw_put_i64(&b, TA_STARTLINE, f->start_line);
        lc_arw_put_i32(&b, TA_NAME, f->func);
        lc_arw_put_i32(&b, TA_SYSTEM_NAME, f->system_name);
        lc_arw_put_i32(&b, TA_FILE_NAME, f->file);
        lc_arw_put_i64(&b, TA_CUMULATIVE, ft.cum[ids[i]]);
        lc_arw_put_i64(&b, TA_CUMULATIVE_DIFF, ft.cum_diff[ids[i]]);
        lc_arw_put_i64(&b, TA_FLAT, ft.flat[ids[i]]);
        lc_arw_put_i64(&b, TA_FLAT_DIFF, ft.flat_diff[ids[i]]);
    }
    lc_free(ids);
    parca_frame_totals_fini(&ft);
    Parca__Query__V1alpha1__TableArrow *ta = lc_arena_alloc(a, sizeof(*ta));
    if (!ta) {
        lc_arw_batch_fini(&b);
        return qry_fail_arena(st);
    }
    *ta = (Parca__Query__V1alpha1__TableArrow)PARCA__QUERY__V1ALPHA1__TABLE_ARROW__INIT;
    if (encode_batch(&b, a, &ta->record, st))
        return -1;
    ta->unit = (char *)unit;
    resp->report_case = PARCA__QUERY__V1ALPHA1__QUERY_RESPONSE__REPORT_TABLE_ARROW;
    resp->table_arrow = ta;
    return 0;
}
