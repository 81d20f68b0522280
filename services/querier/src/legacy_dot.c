/*
 * legacy_dot.c — /pyroscope/render?format=dot: a Graphviz call graph of the
 * merged pprof, the way `go tool pprof -dot` draws one (Pyroscope runs pprof's
 * own report code; ember draws the same kind of graph, not the same bytes).
 *
 * Nodes are functions (inlined frames count as their own functions; a
 * location without lines is its "module+0xoffset" frame, lc/frame_name.h), with a
 * flat value (samples whose leaf they are) and a cumulative one (samples
 * they appear in, once per sample even under recursion). Nodes whose cum is
 * at most 0.5% of the total are dropped, then the node_count largest by cum
 * are kept. Edges join consecutive kept frames of each stack, caller to
 * callee; an edge that skips dropped frames is residual (dotted, as pprof
 * draws one), and edges at most 0.1% of the total are dropped. The legend
 * says what was kept. A profile without a value gives no graph at all.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lc/frame_name.h"
#include "querier_int.h"

#define DOT_NODE_FRACTION 0.005
#define DOT_EDGE_FRACTION 0.001

typedef struct dot_node_s {
    const char *name;
    bool owned; /* name was copied here (a "module+0xoffset" frame) */
    int64_t flat, cum;
    size_t seen;   /* sample number + 1 that counted cum last */
    uint32_t rank; /* 1-based output number if kept, else 0 */
} dot_node_t;

typedef struct dot_edge_s {
    uint32_t from, to;           /* caller, callee (node indices) */
    uint32_t from_rank, to_rank; /* for sorting */
    int64_t weight;
    bool residual;
    size_t seen;
} dot_edge_t;

typedef struct dot_graph_s {
    const Google__V1__Profile *p;
    const char *unit;
    int64_t total;
    dot_node_t *nodes;
    size_t n_nodes;
    uint32_t *func_node; /* by index in p->function */
    uint32_t *slots;     /* name hash: node + 1 */
    size_t mask;
    dot_edge_t *edges;
    size_t n_edges, edges_cap;
    uint32_t *edge_slots; /* (from, to) hash: edge + 1 */
    size_t edge_mask;
    uint32_t *frames; /* one stack, leaf first */
    size_t frames_cap;
} dot_graph_t;

/* ---------------------------------------------------------------- lookups */

static const char *pp_str(const Google__V1__Profile *p, int64_t i)
{
    return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "";
}

/* Index in p->function / p->location of an id (pprof ids need not be dense). */
static size_t find_function(const Google__V1__Profile *p, uint64_t id)
{
    if (id >= 1 && id <= p->n_function && p->function[id - 1]->id == id)
        return id - 1;
    for (size_t i = 0; i < p->n_function; i++) {
        if (p->function[i]->id == id)
            return i;
    }
    return SIZE_MAX;
}

static const Google__V1__Location *find_location(const Google__V1__Profile *p, uint64_t id)
{
    if (id >= 1 && id <= p->n_location && p->location[id - 1]->id == id)
        return p->location[id - 1];
    for (size_t i = 0; i < p->n_location; i++) {
        if (p->location[i]->id == id)
            return p->location[i];
    }
    return NULL;
}

/* One node per distinct function name; copy: name does not outlive the call. */
static uint32_t node_of_name(dot_graph_t *g, const char *name, bool copy)
{
    size_t len = strlen(name), i = lc_hash64(name, len, 0) & g->mask;
    for (; g->slots[i]; i = (i + 1) & g->mask) {
        if (strcmp(g->nodes[g->slots[i] - 1].name, name) == 0)
            return g->slots[i] - 1;
    }
    g->nodes[g->n_nodes] = (dot_node_t){.name = copy ? lc_xstrdup(name) : name, .owned = copy};
    g->slots[i] = (uint32_t)++g->n_nodes;
    return (uint32_t)g->n_nodes - 1;
}

static size_t pow2_above(size_t n)
{
    size_t c = 16;
    while (c < n * 2)
        c <<= 1;
    return c;
}

static void graph_init(dot_graph_t *g, const Google__V1__Profile *p)
{
    *g = (dot_graph_t){.p = p};
    g->unit = p->n_sample_type ? pp_str(p, p->sample_type[0]->unit) : "";
    /* a node per function, and per location without lines at most */
    g->nodes = lc_xcalloc(p->n_function + p->n_location + 1, sizeof(*g->nodes));
    g->func_node = lc_xcalloc(p->n_function + 1, sizeof(uint32_t));
    size_t cap = pow2_above(p->n_function + p->n_location + 1);
    g->slots = lc_xcalloc(cap, sizeof(uint32_t));
    g->mask = cap - 1;
    for (size_t i = 0; i < p->n_function; i++)
        g->func_node[i] = node_of_name(g, pp_str(p, p->function[i]->name), false);
    g->edge_mask = 1023;
    g->edge_slots = lc_xcalloc(g->edge_mask + 1, sizeof(uint32_t));
}

static void graph_fini(dot_graph_t *g)
{
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].owned)
            lc_free((char *)g->nodes[i].name);
    }
    lc_free(g->nodes);
    lc_free(g->func_node);
    lc_free(g->slots);
    lc_free(g->edges);
    lc_free(g->edge_slots);
    lc_free(g->frames);
}

/* The node of a location without lines: its "module+0xoffset" frame. */
static uint32_t address_node(dot_graph_t *g, const Google__V1__Location *loc)
{
    const Google__V1__Profile *p = g->p;
    uint64_t id = loc->mapping_id;
    const Google__V1__Mapping *m = NULL;
    if (id >= 1 && id <= p->n_mapping && p->mapping[id - 1]->id == id)
        m = p->mapping[id - 1];
    for (size_t i = 0; id && !m && i < p->n_mapping; i++)
        m = p->mapping[i]->id == id ? p->mapping[i] : NULL;
    char name[LC_FRAME_NAME_MAX];
    lc_pprof_address_frame_name(g->p, m, loc->address, name);
    return node_of_name(g, name, true);
}

/* A sample's frames, leaf first (a location's lines innermost first). */
static int sample_frames(dot_graph_t *g, const Google__V1__Sample *s, size_t *n)
{
    *n = 0;
    for (size_t i = 0; i < s->n_location_id; i++) {
        const Google__V1__Location *loc = find_location(g->p, s->location_id[i]);
        if (!loc)
            return LC_ECORRUPT;
        if (loc->n_line == 0) {
            g->frames = lc_xgrow(g->frames, &g->frames_cap, *n + 1, sizeof(*g->frames));
            g->frames[(*n)++] = address_node(g, loc);
        }
        for (size_t j = 0; j < loc->n_line; j++) {
            size_t f = find_function(g->p, loc->line[j]->function_id);
            if (f == SIZE_MAX)
                return LC_ECORRUPT;
            g->frames = lc_xgrow(g->frames, &g->frames_cap, *n + 1, sizeof(*g->frames));
            g->frames[(*n)++] = g->func_node[f];
        }
    }
    return 0;
}

static int64_t dot_sample_value(const Google__V1__Sample *s)
{
    return s->n_value ? s->value[0] : 0;
}

/* ------------------------------------------------------------- the graph */

static int count_nodes(dot_graph_t *g)
{
    for (size_t k = 0; k < g->p->n_sample; k++) {
        const Google__V1__Sample *s = g->p->sample[k];
        int64_t v = dot_sample_value(s);
        size_t n;
        int rc = sample_frames(g, s, &n);
        if (rc)
            return rc;
        g->total += v;
        if (n)
            g->nodes[g->frames[0]].flat += v;
        for (size_t i = 0; i < n; i++) {
            dot_node_t *node = &g->nodes[g->frames[i]];
            if (node->seen != k + 1)
                node->cum += v;
            node->seen = k + 1;
        }
    }
    return 0;
}

static int by_cum_desc(const void *a, const void *b)
{
    const dot_node_t *x = *(dot_node_t *const *)a, *y = *(dot_node_t *const *)b;
    if (x->cum != y->cum)
        return x->cum > y->cum ? -1 : 1;
    if (x->flat != y->flat)
        return x->flat > y->flat ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* Ranks the kept nodes 1..kept; *dropped counts those under the cutoff. */
static size_t select_nodes(dot_graph_t *g, size_t node_count, size_t *dropped, int64_t *cutoff)
{
    *cutoff = (int64_t)(fabs((double)g->total) * DOT_NODE_FRACTION);
    dot_node_t **order = lc_xcalloc(g->n_nodes + 1, sizeof(*order));
    size_t n = 0;
    *dropped = 0;
    for (size_t i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].cum == 0 && g->nodes[i].flat == 0)
            continue; /* a function no sample reaches */
        if (llabs(g->nodes[i].cum) <= *cutoff)
            (*dropped)++;
        else
            order[n++] = &g->nodes[i];
    }
    qsort(order, n, sizeof(*order), by_cum_desc);
    size_t kept = n < node_count ? n : node_count;
    for (size_t i = 0; i < kept; i++)
        order[i]->rank = (uint32_t)i + 1;
    lc_free(order);
    return kept;
}

static size_t edge_hash(uint32_t from, uint32_t to)
{
    uint64_t key = (uint64_t)from << 32 | to;
    return (size_t)lc_hash64(&key, sizeof(key), 0);
}

static dot_edge_t *edge_of(dot_graph_t *g, uint32_t from, uint32_t to)
{
    size_t i = edge_hash(from, to) & g->edge_mask;
    for (; g->edge_slots[i]; i = (i + 1) & g->edge_mask) {
        dot_edge_t *e = &g->edges[g->edge_slots[i] - 1];
        if (e->from == from && e->to == to)
            return e;
    }
    g->edges = lc_xgrow(g->edges, &g->edges_cap, g->n_edges + 1, sizeof(*g->edges));
    g->edges[g->n_edges] = (dot_edge_t){.from = from, .to = to};
    g->edge_slots[i] = (uint32_t)++g->n_edges;
    if (g->n_edges * 2 > g->edge_mask + 1) {
        size_t cap = (g->edge_mask + 1) * 2;
        lc_free(g->edge_slots);
        g->edge_slots = lc_xcalloc(cap, sizeof(uint32_t));
        g->edge_mask = cap - 1;
        for (size_t k = 0; k < g->n_edges; k++) {
            size_t j = edge_hash(g->edges[k].from, g->edges[k].to) & g->edge_mask;
            while (g->edge_slots[j])
                j = (j + 1) & g->edge_mask;
            g->edge_slots[j] = (uint32_t)k + 1;
        }
    }
    return &g->edges[g->n_edges - 1];
}

/* Edges between consecutive kept frames of each stack (once per sample). */
static int count_edges(dot_graph_t *g)
{
    for (size_t k = 0; k < g->p->n_sample; k++) {
        const Google__V1__Sample *s = g->p->sample[k];
        int64_t v = dot_sample_value(s);
        size_t n, callee = SIZE_MAX;
        int rc = sample_frames(g, s, &n);
        if (rc)
            return rc;
        for (size_t i = 0; i < n; i++) {
            if (!g->nodes[g->frames[i]].rank)
                continue;
            if (callee != SIZE_MAX && g->frames[i] != g->frames[callee]) {
                dot_edge_t *e = edge_of(g, g->frames[i], g->frames[callee]);
                e->residual |= i != callee + 1;
                if (e->seen != k + 1)
                    e->weight += v;
                e->seen = k + 1;
            }
            callee = i;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- output */

/* A value in the profile's unit, scaled as pprof labels it (10ms, 1.50s, 2MB). */
static void dot_format_value(const char *unit, int64_t v, char *out, size_t size)
{
    static const struct {
        const char *unit;
        double to_base; /* ns or bytes */
    } bases[] = {{"nanoseconds", 1},
                 {"microseconds", 1e3},
                 {"milliseconds", 1e6},
                 {"seconds", 1e9},
                 {"bytes", 1}};
    static const struct {
        const char *name;
        double size;
    } time_units[] = {{"hrs", 3600e9}, {"mins", 60e9}, {"s", 1e9}, {"ms", 1e6}, {"us", 1e3}},
      byte_units[] = {
          {"TB", 1099511627776.0}, {"GB", 1073741824.0}, {"MB", 1048576.0}, {"kB", 1024.0}};
    double x = (double)v, base = 0;
    bool bytes = false;
    for (size_t i = 0; i < LC_ARRAY_LEN(bases); i++) {
        if (strcmp(unit, bases[i].unit) == 0) {
            base = bases[i].to_base;
            bytes = i == LC_ARRAY_LEN(bases) - 1;
        }
    }
    const char *suffix = bytes ? "B" : base ? "ns" : "";
    if (base) {
        x *= base;
        size_t n = bytes ? LC_ARRAY_LEN(byte_units) : LC_ARRAY_LEN(time_units);
        for (size_t i = 0; i < n; i++) {
            double sz = bytes ? byte_units[i].size : time_units[i].size;
            if (fabs(x) >= sz) {
                x /= sz;
                suffix = bytes ? byte_units[i].name : time_units[i].name;
                break;
            }
        }
    }
    if (v == 0) {
        snprintf(out, size, "0");
        return;
    }
    int len = snprintf(out, size, "%.2f", x);
    if (len >= 3 && (size_t)len < size && strcmp(out + len - 3, ".00") == 0)
        out[len - 3] = '\0';
    size_t used = strlen(out);
    if (used < size)
        snprintf(out + used, size - used, "%s", suffix);
}

static void format_percent(int64_t v, int64_t total, char *out, size_t size)
{
    if (v == total)
        snprintf(out, size, "100%%");
    else
        snprintf(out, size, "%.2f%%", total ? 100.0 * (double)v / (double)total : 0.0);
}

/* A name inside a DOT string: quotes and backslashes escaped. */
static int put_escaped(lc_buf_t *out, const char *s)
{
    int rc = 0;
    for (; *s && rc == 0; s++)
        rc = (*s == '"' || *s == '\\') ? lc_buf_printf(out, "\\%c", *s) : lc_buf_putc(out, *s);
    return rc;
}

/* Grey for a small share of the total, red for a large one. */
static void node_colors(double share, char color[8], char fill[8])
{
    double f = share < 0 ? 0 : share > 1 ? 1 : sqrt(share);
    int g = (int)(0xb2 * (1 - f)), fg = (int)(0xec - (0xec - 0xd5) * f);
    snprintf(color, 8, "#b2%02x%02x", g, g);
    snprintf(fill, 8, "#ed%02x%02x", fg, fg);
}

static int put_legend(const dot_graph_t *g, lc_buf_t *out, size_t kept, size_t shown_total,
                      size_t dropped_nodes, int64_t node_cutoff, size_t dropped_edges,
                      int64_t edge_cutoff)
{
    const char *type = g->p->n_sample_type ? pp_str(g->p, g->p->sample_type[0]->type) : "";
    int64_t shown = 0;
    for (size_t i = 0; i < g->n_nodes; i++)
        shown += g->nodes[i].rank ? g->nodes[i].flat : 0;
    char a[64], b[64], pct[32];
    dot_format_value(g->unit, shown, a, sizeof(a));
    dot_format_value(g->unit, g->total, b, sizeof(b));
    format_percent(shown, g->total, pct, sizeof(pct));
    int rc = lc_buf_puts(out, "subgraph cluster_L { \"Type: ");
    rc = rc ? rc : put_escaped(out, type);
    rc = rc ? rc : lc_buf_puts(out, "\" [shape=box fontsize=16 label=\"Type: ");
    rc = rc ? rc : put_escaped(out, type);
    rc =
        rc ? rc
           : lc_buf_printf(out, "\\lShowing nodes accounting for %s, %s of %s total\\l", a, pct, b);
    if (rc == 0 && dropped_nodes) {
        dot_format_value(g->unit, node_cutoff, a, sizeof(a));
        rc = lc_buf_printf(out, "Dropped %zu nodes (cum <= %s)\\l", dropped_nodes, a);
    }
    if (rc == 0 && dropped_edges) {
        dot_format_value(g->unit, edge_cutoff, a, sizeof(a));
        rc = lc_buf_printf(out, "Dropped %zu edges (freq <= %s)\\l", dropped_edges, a);
    }
    if (rc == 0 && kept < shown_total)
        rc = lc_buf_printf(out, "Showing top %zu nodes out of %zu\\l", kept, shown_total);
    return rc ? rc : lc_buf_puts(out, "\" tooltip=\"ember\"] }\n");
}

static int put_node(const dot_graph_t *g, const dot_node_t *n, int64_t max_flat, lc_buf_t *out)
{
    char flat[64], cum[64], flat_pct[32], cum_pct[32], color[8], fill[8];
    dot_format_value(g->unit, n->flat, flat, sizeof(flat));
    dot_format_value(g->unit, n->cum, cum, sizeof(cum));
    format_percent(n->flat, g->total, flat_pct, sizeof(flat_pct));
    format_percent(n->cum, g->total, cum_pct, sizeof(cum_pct));
    node_colors(g->total ? (double)n->cum / (double)g->total : 0, color, fill);
    int font = 8 + (int)ceil(16 * sqrt(max_flat ? fabs((double)n->flat) / (double)max_flat : 0));
    int rc = lc_buf_printf(out, "N%u [label=\"", n->rank);
    rc = rc ? rc : put_escaped(out, n->name);
    if (rc == 0 && n->flat == 0) /* pprof's "0 of <cum>" */
        rc = lc_buf_printf(out, "\\n0 of %s (%s)", cum, cum_pct);
    else if (rc == 0)
        rc = lc_buf_printf(out, "\\n%s (%s)", flat, flat_pct);
    if (rc == 0 && n->flat != 0 && n->cum != n->flat)
        rc = lc_buf_printf(out, "\\nof %s (%s)", cum, cum_pct);
    rc =
        rc ? rc
           : lc_buf_printf(out, "\" id=\"node%u\" fontsize=%d shape=box tooltip=\"", n->rank, font);
    rc = rc ? rc : put_escaped(out, n->name);
    return rc ? rc
              : lc_buf_printf(out, " (%s)\" color=\"%s\" fillcolor=\"%s\"]\n", cum, color, fill);
}

static int put_edge(const dot_graph_t *g, const dot_edge_t *e, lc_buf_t *out)
{
    const dot_node_t *from = &g->nodes[e->from], *to = &g->nodes[e->to];
    char w[64], color[8], fill[8];
    dot_format_value(g->unit, e->weight, w, sizeof(w));
    double share = g->total ? fabs((double)e->weight) / fabs((double)g->total) : 0;
    node_colors(share, color, fill);
    int rc = lc_buf_printf(out, "N%u -> N%u [label=\" %s\" weight=%d penwidth=%d color=\"%s\"%s",
                           from->rank, to->rank, w, 1 + (int)(share * 100), 1 + (int)(share * 5),
                           color, e->residual ? " style=\"dotted\"" : "");
    for (int k = 0; k < 2 && rc == 0; k++) {
        rc = lc_buf_puts(out, k ? " labeltooltip=\"" : " tooltip=\"");
        rc = rc ? rc : put_escaped(out, from->name);
        rc = rc ? rc : lc_buf_puts(out, e->residual ? " ... " : " -> ");
        rc = rc ? rc : put_escaped(out, to->name);
        rc = rc ? rc : lc_buf_printf(out, " (%s)\"", w);
    }
    return rc ? rc : lc_buf_puts(out, "]\n");
}

/* Heaviest edges first, then by the nodes' order, so the output is stable. */
static int edge_cmp(const void *a, const void *b)
{
    const dot_edge_t *x = a, *y = b;
    if (llabs(x->weight) != llabs(y->weight))
        return llabs(x->weight) > llabs(y->weight) ? -1 : 1;
    if (x->from_rank != y->from_rank)
        return x->from_rank < y->from_rank ? -1 : 1;
    return (x->to_rank > y->to_rank) - (x->to_rank < y->to_rank);
}

/* Sorts the edges for output (the edge hash is not used after this). */
static void sort_edges(dot_graph_t *g)
{
    for (size_t i = 0; i < g->n_edges; i++) {
        g->edges[i].from_rank = g->nodes[g->edges[i].from].rank;
        g->edges[i].to_rank = g->nodes[g->edges[i].to].rank;
    }
    if (g->n_edges)
        qsort(g->edges, g->n_edges, sizeof(*g->edges), edge_cmp);
}

static int by_rank(const void *a, const void *b)
{
    const dot_node_t *x = *(dot_node_t *const *)a, *y = *(dot_node_t *const *)b;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static int put_graph(dot_graph_t *g, size_t kept, size_t dropped_nodes, int64_t node_cutoff,
                     lc_buf_t *out)
{
    int64_t edge_cutoff = (int64_t)(fabs((double)g->total) * DOT_EDGE_FRACTION), max_flat = 0;
    size_t dropped_edges = 0, reached = 0;
    dot_node_t **order = lc_xcalloc(kept + 1, sizeof(*order));
    for (size_t i = 0; i < g->n_nodes; i++) {
        reached += g->nodes[i].cum || g->nodes[i].flat;
        if (g->nodes[i].rank) {
            order[g->nodes[i].rank - 1] = &g->nodes[i];
            max_flat = llabs(g->nodes[i].flat) > max_flat ? llabs(g->nodes[i].flat) : max_flat;
        }
    }
    sort_edges(g);
    for (size_t i = 0; i < g->n_edges; i++)
        dropped_edges += llabs(g->edges[i].weight) <= edge_cutoff;
    int rc = lc_buf_puts(out, "digraph \"unnamed\" {\nnode [style=filled fillcolor=\"#f8f8f8\"]\n");
    rc = rc ? rc
            : put_legend(g, out, kept, reached - dropped_nodes, dropped_nodes, node_cutoff,
                         dropped_edges, edge_cutoff);
    qsort(order, kept, sizeof(*order), by_rank);
    for (size_t i = 0; i < kept && rc == 0; i++)
        rc = put_node(g, order[i], max_flat, out);
    for (size_t i = 0; i < g->n_edges && rc == 0; i++) {
        if (llabs(g->edges[i].weight) > edge_cutoff)
            rc = put_edge(g, &g->edges[i], out);
    }
    lc_free(order);
    return rc ? rc : lc_buf_puts(out, "}\n");
}

int qry_pprof_to_dot(const Google__V1__Profile *p, size_t node_count, lc_buf_t *out)
{
    dot_graph_t g;
    graph_init(&g, p);
    int rc = count_nodes(&g);
    if (rc == 0 && g.total != 0) {
        size_t dropped;
        int64_t cutoff;
        size_t kept = select_nodes(&g, node_count, &dropped, &cutoff);
        rc = count_edges(&g);
        if (rc == 0)
            rc = put_graph(&g, kept, dropped, cutoff, out);
    }
    graph_fini(&g);
    return rc;
}
