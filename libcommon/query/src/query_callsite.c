/*
 * query_callsite.c — the call-site focus of a stack-trace selector
 * (types.v1.StackTraceSelector.call_site, pyroscope-api.md §3.2): a sample is
 * kept when its stack, root first, begins with the call-site function names.
 * As in Pyroscope, frames are a location's lines outermost first and names are
 * compared whole (a location without lines is its "module+0xoffset" frame,
 * lc_block_frame_name, as the flame graph shows it); the rest of a kept stack (the call site's
 * callees) is kept as it is.
 *
 * A block stores stacks as a parent-pointer tree with parent < child, so one
 * ascending pass decides every node: a node inherits its parent's verdict once
 * the call site is fully matched (or has failed), and only nodes still
 * matching it read their location's names. The work is proportional to the
 * part of the tree above and at the call site, not to the block.
 */
#include <string.h>

#include "query_int.h"

#define QC_FAILED UINT32_MAX /* the stack left the call site */

/* Advances `pos` (call-site frames matched so far) over one location's frames. */
static int match_location(lc_block_t *b, const lc_query_t *q, uint32_t loc, uint32_t *pos)
{
    if (loc == 0)
        return 0; /* the virtual root: no frame */
    lc_store_location_t l;
    int rc = lc_block_location(b, loc, &l);
    size_t n_frames = rc == 0 ? lc_block_frame_count(b, &l) : 0;
    for (size_t j = 0; rc == 0 && j < n_frames && *pos < q->n_call_site; j++) {
        char scratch[LC_FRAME_NAME_MAX];
        const char *name;
        size_t len;
        rc = lc_block_frame_name(b, &l, j, scratch, &name, &len);
        if (rc)
            break;
        const char *want = q->call_site[*pos];
        if (strlen(want) != len || memcmp(want, name, len) != 0) {
            *pos = QC_FAILED;
            break;
        }
        (*pos)++;
    }
    return rc;
}

int lc_query__callsite_mark(lc_block_t *b, const lc_query_t *q, const uint32_t *parents,
                            const uint32_t *locations, uint32_t n, uint8_t *keep)
{
    if (n == 0)
        return 0;
    uint32_t depth = (uint32_t)q->n_call_site;
    uint32_t *pos = lc_xmalloc((size_t)n * sizeof(*pos));
    int rc = 0;
    pos[0] = 0;
    keep[0] = depth == 0;
    for (uint32_t i = 1; rc == 0 && i < n; i++) {
        pos[i] = pos[parents[i]];
        if (pos[i] != QC_FAILED && pos[i] < depth)
            rc = match_location(b, q, locations[i], &pos[i]);
        keep[i] = pos[i] == depth;
    }
    lc_free(pos);
    return rc;
}
