/*
 * test_store.c — the LMDB block store, end to end in a temporary directory.
 *
 * Oracles are independent of the store: MANIFEST.jsonl totals (computed by
 * Go's pprof library) and the input pprof itself. Stacks are compared by
 * content (function names, files, lines, mappings, addresses, leaf to root),
 * never by store ids, so a wrong tree or a mixed-up symbol table shows up.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "lc/labels.h"
#include "lc/store.h"
#include "lc_test.h"

#define HOUR_NS (3600LL * 1000000000LL)
#define TEN_MIN_NS (600LL * 1000000000LL)
#define T0 (1700000000LL / 3600 * 3600 * 1000000000LL) /* an hour boundary */

/* ---------------------------------------------------------------- fixtures */

static char tmp_root[64];

static int rm_entry(const char *p, const struct stat *sb, int f, struct FTW *w)
{
    (void)sb, (void)f, (void)w;
    return remove(p);
}

static const char *tmp_dir(void)
{
    snprintf(tmp_root, sizeof(tmp_root), "/tmp/ember-store-XXXXXX");
    if (!mkdtemp(tmp_root))
        abort();
    return tmp_root;
}

static void tmp_cleanup(void)
{
    nftw(tmp_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static lc_store_t *store_open_opts(const char *dir, int64_t retention_ns, size_t max_open)
{
    lc_store_opts_t o = {.dir = dir,
                         .block_duration_ns = HOUR_NS,
                         .retention_ns = retention_ns,
                         .map_size_bytes = (size_t)4 << 30,
                         .max_open_blocks = max_open};
    lc_store_t *s = NULL;
    LC_ASSERT_OK(lc_store_open(&o, &s));
    if (!s)
        abort();
    return s;
}

static lc_store_t *store_open(const char *dir)
{
    return store_open_opts(dir, 0, 8);
}

typedef struct loaded_s {
    lc_arena_t *arena;
    lc_pprof_t *p;
    lc_pprof_index_t *ix;
} loaded_t;

/* Gunzips (when gzip magic) with zlib directly, not via ember's decoder. */
static uint8_t *gunzip_maybe(uint8_t *d, size_t *len)
{
    if (*len < 2 || d[0] != 0x1f || d[1] != 0x8b)
        return d;
    size_t cap = *len * 8 + 4096, n = 0;
    uint8_t *out = malloc(cap);
    z_stream z = {.next_in = d, .avail_in = (uInt)*len};
    if (inflateInit2(&z, 16 + MAX_WBITS) != Z_OK)
        abort();
    int zr;
    do {
        if (n == cap)
            out = realloc(out, cap *= 2);
        z.next_out = out + n;
        z.avail_out = (uInt)(cap - n);
        zr = inflate(&z, Z_NO_FLUSH);
        n = cap - z.avail_out;
    } while (zr == Z_OK);
    if (zr != Z_STREAM_END)
        abort();
    inflateEnd(&z);
    free(d);
    *len = n;
    return out;
}

static loaded_t load_pprof(const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/pprof/%s", LC_TESTDATA_DIR, name);
    size_t len;
    uint8_t *d = lc_test_read_file(path, &len);
    if (!d) {
        fprintf(stderr, "cannot read %s\n", path);
        abort();
    }
    d = gunzip_maybe(d, &len);
    loaded_t l = {.arena = lc_arena_new((size_t)1 << 30)};
    ProtobufCAllocator alloc;
    lc_arena_pb_allocator(l.arena, &alloc);
    l.p = (lc_pprof_t *)protobuf_c_message_unpack(&google__v1__profile__descriptor, &alloc, len, d);
    free(d);
    if (!l.p || lc_pprof_index_new(l.p, l.arena, &l.ix))
        abort();
    return l;
}

/* The "total" of one sample type of one file, parsed out of MANIFEST.jsonl. */
static int64_t manifest_total(const char *file, const char *type)
{
    size_t len;
    char path[512], key[256], tkey[128];
    snprintf(path, sizeof(path), "%s/MANIFEST.jsonl", LC_TESTDATA_DIR);
    char *m = (char *)lc_test_read_file(path, &len);
    snprintf(key, sizeof(key), "\"file\": \"pprof/%s\"", file);
    snprintf(tkey, sizeof(tkey), "\"type\": \"%s\"", type);
    char *line = m ? strstr(m, key) : NULL;
    char *eol = line ? strchr(line, '\n') : NULL;
    char *t = line ? strstr(line, tkey) : NULL;
    char *tot = t ? strstr(t, "\"total\": ") : NULL;
    int64_t v = tot && (!eol || tot < eol) ? strtoll(tot + 9, NULL, 10) : -1;
    free(m);
    return v;
}

static void labels_of(lc_labels_t *ls, const char *service, const char *type)
{
    lc_labels_init(ls);
    lc_labels_add(ls, "__name__", type);
    lc_labels_add(ls, "__profile_type__", type);
    lc_labels_add(ls, "service_name", service);
    lc_labels_sort(ls);
}

static int write_one(lc_store_t *s, const char *tenant, const lc_labels_t *ls, int64_t t,
                     const loaded_t *l, size_t vi, const uint64_t *spans)
{
    lc_store_txn_t *txn;
    int rc = lc_store_write_begin(s, &txn);
    if (rc)
        return rc;
    lc_store_write_t w = {.tenant = tenant,
                          .labels = ls,
                          .time_ns = t,
                          .profile = l->p,
                          .index = l->ix,
                          .value_index = vi,
                          .span_ids = spans};
    rc = lc_store_write_profile(txn, &w);
    if (rc) {
        lc_store_write_abort(txn);
        return rc;
    }
    return lc_store_write_commit(txn);
}

/* ---------------------------------------------------------------- stack fingerprints */

typedef struct stack_sum_s {
    uint64_t fp, span;
    int64_t value;
} stack_sum_t;

typedef struct sums_s {
    stack_sum_t *v;
    size_t n, cap;
} sums_t;

static void sums_add(sums_t *s, uint64_t fp, uint64_t span, int64_t value)
{
    if (s->n == s->cap)
        s->v = realloc(s->v, (s->cap = s->cap ? s->cap * 2 : 256) * sizeof(*s->v));
    s->v[s->n++] = (stack_sum_t){fp, span, value};
}

static int sum_cmp(const void *a, const void *b)
{
    const stack_sum_t *x = a, *y = b;
    if (x->fp != y->fp)
        return x->fp < y->fp ? -1 : 1;
    return x->span < y->span ? -1 : x->span > y->span;
}

/* Sorts and sums equal (fp, span); drops zero sums. */
static void sums_fold(sums_t *s)
{
    qsort(s->v, s->n, sizeof(*s->v), sum_cmp);
    size_t out = 0;
    for (size_t i = 0; i < s->n;) {
        stack_sum_t acc = s->v[i++];
        for (; i < s->n && s->v[i].fp == acc.fp && s->v[i].span == acc.span; i++)
            acc.value += s->v[i].value;
        if (acc.value)
            s->v[out++] = acc;
    }
    s->n = out;
}

static uint64_t fp_str(uint64_t h, const char *s, size_t len)
{
    return lc_hash64(s, len, h);
}
static uint64_t fp_int(uint64_t h, int64_t v)
{
    return lc_hash64(&v, sizeof(v), h);
}

static uint64_t pprof_loc_fp(const loaded_t *l, uint64_t id)
{
    const Google__V1__Location *loc = lc_pprof_location(l->ix, id);
    uint64_t h = 1;
    if (!loc)
        return 0;
    const Google__V1__Mapping *m = loc->mapping_id ? lc_pprof_mapping(l->ix, loc->mapping_id) : 0;
    if (m) {
        const char *f = lc_pprof_str(l->p, m->filename), *b = lc_pprof_str(l->p, m->build_id);
        h = fp_str(h, f, strlen(f));
        h = fp_str(h, b, strlen(b));
        h = fp_int(fp_int(fp_int(h, (int64_t)m->memory_start), (int64_t)m->memory_limit),
                   (int64_t)m->file_offset);
    }
    h = fp_int(h, (int64_t)loc->address);
    for (size_t i = 0; i < loc->n_line; i++) {
        const Google__V1__Function *fn = lc_pprof_function(l->ix, loc->line[i]->function_id);
        const char *name = fn ? lc_pprof_str(l->p, fn->name) : "";
        const char *file = fn ? lc_pprof_str(l->p, fn->filename) : "";
        h = fp_str(fp_str(h, name, strlen(name)), file, strlen(file));
        h = fp_int(fp_int(h, fn ? fn->start_line : 0), loc->line[i]->line);
    }
    return h;
}

/* What the store should hold for value type vi: from the pprof alone. */
static sums_t pprof_sums(const loaded_t *l, size_t vi, const uint64_t *spans)
{
    sums_t s = {0};
    for (size_t i = 0; i < l->p->n_sample; i++) {
        const Google__V1__Sample *smp = l->p->sample[i];
        uint64_t h = 7;
        for (size_t k = 0; k < smp->n_location_id; k++)
            h = fp_int(h, (int64_t)pprof_loc_fp(l, smp->location_id[k]));
        if (smp->value[vi])
            sums_add(&s, h, spans ? spans[i] : 0, smp->value[vi]);
    }
    sums_fold(&s);
    return s;
}

static uint64_t store_loc_fp(lc_block_t *b, uint32_t id)
{
    lc_store_location_t loc;
    uint64_t h = 1;
    if (lc_block_location(b, id, &loc))
        return 0;
    lc_store_mapping_t m;
    const char *f, *bid;
    size_t fl, bl;
    if (loc.mapping_id && !lc_block_mapping(b, loc.mapping_id, &m) &&
        !lc_block_string(b, m.filename, &f, &fl) && !lc_block_string(b, m.build_id, &bid, &bl)) {
        h = fp_str(fp_str(h, f, fl), bid, bl);
        h = fp_int(fp_int(fp_int(h, (int64_t)m.memory_start), (int64_t)m.memory_limit),
                   (int64_t)m.file_offset);
    }
    h = fp_int(h, (int64_t)loc.address);
    for (size_t i = 0; i < loc.n_lines; i++) {
        lc_store_function_t fn = {0};
        const char *name = "", *file = "";
        size_t nl = 0, fil = 0;
        if (loc.lines[i].function_id) {
            LC_ASSERT_OK(lc_block_function(b, loc.lines[i].function_id, &fn));
            LC_ASSERT_OK(lc_block_string(b, fn.name, &name, &nl));
            LC_ASSERT_OK(lc_block_string(b, fn.filename, &file, &fil));
        }
        h = fp_str(fp_str(h, name, nl), file, fil);
        h = fp_int(fp_int(h, fn.start_line), loc.lines[i].line);
    }
    return h;
}

typedef struct tree_s {
    uint32_t n;
    uint32_t *parents, *locations;
} tree_t;

static tree_t tree_read(lc_block_t *b)
{
    tree_t t = {.n = lc_block_node_count(b)};
    t.parents = calloc(t.n, sizeof(uint32_t));
    t.locations = calloc(t.n, sizeof(uint32_t));
    LC_ASSERT_OK(lc_block_nodes(b, t.parents, t.locations, t.n));
    return t;
}

static void tree_free(tree_t *t)
{
    free(t->parents);
    free(t->locations);
}

/* Rebuilds each sample's stack from the tree, leaf to root, by content. */
static sums_t stored_sums(lc_block_t *b, const lc_stored_profile_t *p, int64_t *sum)
{
    tree_t t = tree_read(b);
    sums_t s = {0};
    lc_sample_iter_t it;
    uint32_t node;
    int64_t v;
    uint64_t span;
    int rc;
    *sum = 0;
    lc_sample_iter_init(&it, p);
    while ((rc = lc_sample_iter_next(&it, &node, &v, &span)) == 1) {
        uint64_t h = 7;
        LC_CHECK(node < t.n);
        for (uint32_t n = node; n && n < t.n; n = t.parents[n])
            h = fp_int(h, (int64_t)store_loc_fp(b, t.locations[n]));
        sums_add(&s, h, span, v);
        *sum += v;
    }
    LC_ASSERT_EQ(rc, 0);
    tree_free(&t);
    sums_fold(&s);
    return s;
}

static void sums_expect_equal(sums_t *want, sums_t *got)
{
    LC_ASSERT_EQ(got->n, want->n);
    size_t bad = 0;
    for (size_t i = 0; i < want->n && i < got->n; i++)
        bad += memcmp(&want->v[i], &got->v[i], sizeof(stack_sum_t)) != 0;
    LC_ASSERT_EQ(bad, 0);
    free(want->v);
    free(got->v);
}

/* ---------------------------------------------------------------- read helpers */

typedef struct found_s {
    uint32_t ids[64];
    char services[64][64];
    size_t n;
} found_t;

static int found_cb(lc_block_t *b, uint32_t id, const char *tenant, const lc_labels_t *ls,
                    void *data)
{
    (void)b, (void)tenant;
    found_t *f = data;
    const char *svc = lc_labels_get(ls, "service_name");
    if (f->n < 64) {
        f->ids[f->n] = id;
        snprintf(f->services[f->n], 64, "%s", svc ? svc : "");
        f->n++;
    }
    return 0;
}

static found_t find_series(lc_block_t *b, const char *tenant, const char *sel_text)
{
    found_t f = {0};
    lc_selector_t sel = {0};
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_selector_parse(sel_text, strlen(sel_text), &sel, &st));
    const char *tenants[] = {tenant};
    LC_ASSERT_OK(lc_block_series(b, tenants, 1, &sel, found_cb, &f));
    lc_selector_fini(&sel);
    return f;
}

typedef struct profs_s {
    lc_stored_profile_t v[256];
    uint8_t *data[256];
    size_t n;
} profs_t;

/* Copies each profile's encoded samples: _data is valid during the callback only. */
static int profs_cb(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    (void)b;
    profs_t *ps = data;
    if (ps->n == 256)
        return 1;
    ps->data[ps->n] = malloc(p->_len + 1);
    memcpy(ps->data[ps->n], p->_data, p->_len);
    ps->v[ps->n] = *p;
    ps->v[ps->n]._data = ps->data[ps->n];
    ps->n++;
    return 0;
}

static void profs_free(profs_t *ps)
{
    for (size_t i = 0; i < ps->n; i++)
        free(ps->data[i]);
    ps->n = 0;
}

static profs_t profiles_of(lc_block_t *b, uint32_t series, int64_t from, int64_t to)
{
    profs_t ps = {.n = 0};
    LC_ASSERT_OK(lc_block_profiles(b, series, from, to, profs_cb, &ps));
    return ps;
}

/* ---------------------------------------------------------------- a hand-made profile */

static char *hand_strings[] = {"",        "samples", "count",   "cpu",  "nanoseconds",
                               "main",    "foo",     "bar",     "baz",  "main.go",
                               "libc.so", "inlined", "build-1", "foo.c"};

#define HAND_NSTR (sizeof(hand_strings) / sizeof(hand_strings[0]))

typedef struct hand_s {
    Google__V1__Profile p;
    Google__V1__ValueType vt[2], *vtp[2];
    Google__V1__Function fn[5], *fnp[5];
    Google__V1__Mapping map, *mapp[1];
    Google__V1__Line line[5], *linep[4][2];
    Google__V1__Location loc[4], *locp[4];
    Google__V1__Sample smp[5], *smpp[5];
    uint64_t stacks[5][3];
    int64_t values[5][2];
    loaded_t l;
} hand_t;

/* Functions main foo bar baz inlined; mapping libc.so. Locations: 1 main:10;
 * 2 inlined:5 inside foo:20; 3 bar:30 in libc at 0x1234; 4 baz:40. */
static void hand_symbols(hand_t *h)
{
    static const int64_t fn_names[5] = {5, 6, 7, 8, 11};
    static const uint64_t line_fn[5] = {1, 5, 2, 3, 4};
    static const int64_t line_no[5] = {10, 5, 20, 30, 40};
    static const size_t nlines[4] = {1, 2, 1, 1};
    for (int i = 0; i < 5; i++) {
        h->fn[i] = (Google__V1__Function)GOOGLE__V1__FUNCTION__INIT;
        h->fn[i].id = (uint64_t)i + 1;
        h->fn[i].name = fn_names[i];
        h->fn[i].filename = i == 2 ? 13 : 9;
        h->fn[i].start_line = 10 * i;
        h->fnp[i] = &h->fn[i];
        h->line[i] = (Google__V1__Line)GOOGLE__V1__LINE__INIT;
        h->line[i].function_id = line_fn[i];
        h->line[i].line = line_no[i];
    }
    h->map = (Google__V1__Mapping)GOOGLE__V1__MAPPING__INIT;
    h->map.id = 1, h->map.memory_start = 0x1000, h->map.memory_limit = 0x2000;
    h->map.filename = 10, h->map.build_id = 12, h->map.has_functions = 1;
    h->mapp[0] = &h->map;
    h->linep[0][0] = &h->line[0];
    h->linep[1][0] = &h->line[1], h->linep[1][1] = &h->line[2];
    h->linep[2][0] = &h->line[3];
    h->linep[3][0] = &h->line[4];
    for (int i = 0; i < 4; i++) {
        h->loc[i] = (Google__V1__Location)GOOGLE__V1__LOCATION__INIT;
        h->loc[i].id = (uint64_t)i + 1;
        h->loc[i].n_line = nlines[i];
        h->loc[i].line = h->linep[i];
        h->locp[i] = &h->loc[i];
    }
    h->loc[2].mapping_id = 1, h->loc[2].address = 0x1234;
}

/* Stacks leaf first: bar;foo;main  baz;foo;main  foo;main  bar;foo;main  baz;main,
 * two value types (samples, cpu); the last sample is 0 in the first type. */
static void hand_samples(hand_t *h)
{
    static const uint64_t stacks[5][3] = {{3, 2, 1}, {4, 2, 1}, {2, 1, 0}, {3, 2, 1}, {4, 1, 0}};
    static const size_t depth[5] = {3, 3, 2, 3, 2};
    static const int64_t values[5][2] = {{1, 10}, {2, 20}, {3, 30}, {4, 40}, {0, 50}};
    memcpy(h->stacks, stacks, sizeof(stacks));
    memcpy(h->values, values, sizeof(values));
    for (int i = 0; i < 5; i++) {
        h->smp[i] = (Google__V1__Sample)GOOGLE__V1__SAMPLE__INIT;
        h->smp[i].n_location_id = depth[i];
        h->smp[i].location_id = h->stacks[i];
        h->smp[i].n_value = 2;
        h->smp[i].value = h->values[i];
        h->smpp[i] = &h->smp[i];
    }
    for (int i = 0; i < 2; i++) {
        h->vt[i] = (Google__V1__ValueType)GOOGLE__V1__VALUE_TYPE__INIT;
        h->vt[i].type = i ? 3 : 1;
        h->vt[i].unit = i ? 4 : 2;
        h->vtp[i] = &h->vt[i];
    }
}

static void hand_build(hand_t *h)
{
    memset(h, 0, sizeof(*h));
    hand_symbols(h);
    hand_samples(h);
    h->p = (Google__V1__Profile)GOOGLE__V1__PROFILE__INIT;
    h->p.n_sample_type = 2, h->p.sample_type = h->vtp;
    h->p.n_sample = 5, h->p.sample = h->smpp;
    h->p.n_mapping = 1, h->p.mapping = h->mapp;
    h->p.n_location = 4, h->p.location = h->locp;
    h->p.n_function = 5, h->p.function = h->fnp;
    h->p.n_string_table = HAND_NSTR, h->p.string_table = hand_strings;
    h->l.arena = lc_arena_new(1 << 20);
    h->l.p = &h->p;
    if (lc_pprof_index_new(&h->p, h->l.arena, &h->l.ix))
        abort();
}

/* Walks node -> root and renders "fn:line fn:line ..." leaf first. */
static void stack_text(lc_block_t *b, const tree_t *t, uint32_t node, char *out, size_t cap)
{
    size_t used = 0;
    out[0] = 0;
    for (uint32_t n = node; n; n = t->parents[n]) {
        lc_store_location_t loc;
        LC_ASSERT_OK(lc_block_location(b, t->locations[n], &loc));
        for (size_t i = 0; i < loc.n_lines; i++) {
            lc_store_function_t fn;
            const char *name;
            size_t len;
            LC_ASSERT_OK(lc_block_function(b, loc.lines[i].function_id, &fn));
            LC_ASSERT_OK(lc_block_string(b, fn.name, &name, &len));
            used += (size_t)snprintf(out + used, cap - used, "%s%.*s:%lld", used ? " " : "",
                                     (int)len, name, (long long)loc.lines[i].line);
        }
    }
}

/* The hand profile written as two series ("samples", "cpu"), and a reader. */
typedef struct hand_fx_s {
    hand_t h;
    lc_store_t *s;
    lc_store_reader_t *r;
    lc_block_t *b;
    lc_labels_t l0, l1;
} hand_fx_t;

static hand_fx_t fx;

static void hand_fx_open(void)
{
    hand_build(&fx.h);
    fx.s = store_open(tmp_dir());
    labels_of(&fx.l0, "hand", "samples");
    labels_of(&fx.l1, "hand", "cpu");
    LC_ASSERT_OK(write_one(fx.s, "t1", &fx.l0, T0 + 5, &fx.h.l, 0, NULL));
    LC_ASSERT_OK(write_one(fx.s, "t1", &fx.l1, T0 + 5, &fx.h.l, 1, NULL));
    LC_ASSERT_OK(lc_store_read_begin(fx.s, T0, T0 + HOUR_NS - 1, &fx.r));
    LC_ASSERT_EQ(lc_store_reader_count(fx.r), 1);
    fx.b = lc_store_reader_block(fx.r, 0);
}

static void hand_fx_close(void)
{
    lc_store_read_end(fx.r);
    lc_labels_fini(&fx.l0);
    lc_labels_fini(&fx.l1);
    lc_arena_free(fx.h.l.arena);
    lc_store_close(fx.s);
    tmp_cleanup();
}

static void test_hand_stacks_render_back(void)
{
    hand_fx_open();
    found_t f = find_series(fx.b, "t1", "{__name__=\"samples\"}");
    LC_ASSERT_EQ(f.n, 1);
    profs_t ps = profiles_of(fx.b, f.ids[0], T0, T0 + HOUR_NS);
    LC_ASSERT_EQ(ps.n, 1);
    LC_ASSERT_EQ(ps.v[0].total, 1 + 2 + 3 + 4);
    LC_ASSERT_EQ(ps.v[0].n_samples, 3); /* bar;foo;main twice -> one; zero dropped */
    LC_ASSERT_EQ(ps.v[0].time_ns, T0 + 5);
    tree_t t = tree_read(fx.b);
    LC_ASSERT_EQ(t.n, 1 + 5); /* root, main, foo, bar, baz under foo, baz under main */
    static const char *want[3] = {"inlined:5 foo:20 main:10", "bar:30 inlined:5 foo:20 main:10",
                                  "baz:40 inlined:5 foo:20 main:10"};
    static const int64_t want_v[3] = {3, 5, 2};
    lc_sample_iter_t it;
    uint32_t node;
    int64_t v;
    int k = 0;
    char text[256];
    lc_sample_iter_init(&it, &ps.v[0]);
    for (; k < 3 && lc_sample_iter_next(&it, &node, &v, NULL) == 1; k++) {
        stack_text(fx.b, &t, node, text, sizeof(text));
        LC_ASSERT_STR_EQ(text, want[k]);
        LC_ASSERT_EQ(v, want_v[k]);
    }
    LC_ASSERT_EQ(k, 3);
    LC_ASSERT_EQ(lc_sample_iter_next(&it, &node, &v, NULL), 0);
    tree_free(&t);
    profs_free(&ps);
    hand_fx_close();
}

static void test_hand_symbols_read_back(void)
{
    hand_fx_open();
    tree_t t = tree_read(fx.b);
    lc_store_location_t loc;
    lc_store_mapping_t m;
    lc_store_function_t fn;
    const char *str;
    size_t len;
    LC_ASSERT_OK(lc_block_location(fx.b, t.locations[3], &loc)); /* bar */
    LC_ASSERT_EQ(loc.address, 0x1234);
    LC_ASSERT_OK(lc_block_mapping(fx.b, loc.mapping_id, &m));
    LC_ASSERT_EQ(m.memory_start, 0x1000);
    LC_ASSERT_EQ(m.memory_limit, 0x2000);
    LC_CHECK(m.has_functions && !m.has_filenames);
    LC_ASSERT_OK(lc_block_string(fx.b, m.filename, &str, &len));
    LC_ASSERT_EQ(len, 7);
    LC_ASSERT_MEM_EQ(str, "libc.so", 7);
    LC_ASSERT_OK(lc_block_string(fx.b, m.build_id, &str, &len));
    LC_ASSERT_MEM_EQ(str, "build-1", 7);
    LC_ASSERT_OK(lc_block_function(fx.b, loc.lines[0].function_id, &fn));
    LC_ASSERT_EQ(fn.start_line, 20);
    LC_ASSERT_OK(lc_block_string(fx.b, fn.filename, &str, &len));
    LC_ASSERT_MEM_EQ(str, "foo.c", 5);
    LC_ASSERT_OK(lc_block_string(fx.b, 0, &str, &len));
    LC_ASSERT_EQ(len, 0);
    LC_ASSERT_EQ(lc_block_location(fx.b, 99, &loc), LC_ENOTFOUND);
    LC_ASSERT_EQ(lc_block_function(fx.b, 0, &fn), LC_ENOTFOUND);
    LC_ASSERT_EQ(lc_block_string(fx.b, 1000, &str, &len), LC_ENOTFOUND);
    LC_ASSERT_EQ(lc_block_nodes(fx.b, NULL, NULL, t.n + 1), LC_EINPUT);
    tree_free(&t);
    hand_fx_close();
}

static void test_hand_second_type_and_info(void)
{
    hand_fx_open();
    found_t f = find_series(fx.b, "t1", "{__name__=\"cpu\"}");
    LC_ASSERT_EQ(f.n, 1);
    profs_t ps = profiles_of(fx.b, f.ids[0], T0, T0 + HOUR_NS);
    LC_ASSERT_EQ(ps.n, 1);
    LC_ASSERT_EQ(ps.v[0].total, 150);
    int64_t sum;
    sums_t want = pprof_sums(&fx.h.l, 1, NULL), got = stored_sums(fx.b, &ps.v[0], &sum);
    LC_ASSERT_EQ(sum, 150);
    sums_expect_equal(&want, &got);
    lc_block_info_t info;
    LC_ASSERT_OK(lc_block_info(fx.b, &info));
    LC_ASSERT_EQ(info.series, 2);
    LC_ASSERT_EQ(info.profiles, 2);
    LC_ASSERT_EQ(info.samples, 3 + 4);
    LC_ASSERT_EQ(info.locations, 4);
    LC_ASSERT_EQ(info.functions, 5);
    LC_ASSERT_EQ(info.strings, 1 + 9); /* "", 5 names, main.go, foo.c, libc.so, build-1 */
    LC_ASSERT_EQ(info.start_ns, T0);
    LC_ASSERT_EQ(info.end_ns, T0 + HOUR_NS);
    LC_ASSERT_EQ(info.min_time_ns, T0 + 5);
    LC_CHECK(info.bytes > 0);
    profs_free(&ps);
    hand_fx_close();
}

/* ---------------------------------------------------------------- real profiles */

static const char *type_name(const loaded_t *l, size_t vi)
{
    return lc_pprof_str(l->p, l->p->sample_type[vi]->type);
}

/* Span ids from the samples' "span_id" labels (hex), 0 where absent. */
static uint64_t *spans_of(const loaded_t *l, size_t *with)
{
    uint64_t *spans = calloc(l->p->n_sample + 1, sizeof(uint64_t));
    *with = 0;
    for (size_t i = 0; i < l->p->n_sample; i++) {
        const Google__V1__Sample *smp = l->p->sample[i];
        for (size_t k = 0; k < smp->n_label; k++) {
            if (strcmp(lc_pprof_str(l->p, smp->label[k]->key), "span_id") == 0) {
                spans[i] = strtoull(lc_pprof_str(l->p, smp->label[k]->str), NULL, 16);
                *with += spans[i] != 0;
            }
        }
    }
    return spans;
}

/* Checks parent < child for every node: the merge's reverse pass relies on it. */
static void expect_tree_ordered(lc_block_t *b)
{
    tree_t t = tree_read(b);
    size_t bad = 0;
    for (uint32_t i = 1; i < t.n; i++)
        bad += t.parents[i] >= i || t.locations[i] == 0;
    LC_ASSERT_EQ(bad, 0);
    LC_ASSERT_EQ(t.parents[0], 0);
    LC_ASSERT_EQ(t.locations[0], 0);
    tree_free(&t);
}

/* All sample types of l as series of one batch, the profile pinned or not. */
static void write_types(lc_store_t *s, const char *service, int64_t t, const loaded_t *l,
                        const uint64_t *spans, bool pin)
{
    lc_store_txn_t *txn;
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    if (pin)
        lc_store_write_pin(txn, l->p, l->ix);
    for (size_t vi = 0; vi < l->p->n_sample_type; vi++) {
        lc_labels_t ls;
        labels_of(&ls, service, type_name(l, vi));
        lc_store_write_t w = {.tenant = "real",
                              .labels = &ls,
                              .time_ns = t,
                              .profile = l->p,
                              .index = l->ix,
                              .value_index = vi,
                              .span_ids = spans};
        LC_ASSERT_OK(lc_store_write_profile(txn, &w));
        lc_labels_fini(&ls);
    }
    if (pin)
        lc_store_write_unpin(txn);
    LC_ASSERT_OK(lc_store_write_commit(txn));
}

/* Writes every sample type of a file as its own series, then checks each one
 * against MANIFEST.jsonl and the pprof's own stacks. */
static void check_real_file(const char *file, bool with_spans, bool pin)
{
    loaded_t l = load_pprof(file);
    lc_store_t *s = store_open(tmp_dir());
    size_t n_spans = 0;
    uint64_t *spans = with_spans ? spans_of(&l, &n_spans) : NULL;
    if (with_spans)
        LC_CHECK(n_spans > 0 && n_spans < l.p->n_sample);
    int64_t t = l.p->time_nanos ? l.p->time_nanos : T0;
    write_types(s, file, t, &l, spans, pin);
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, t, t, &r));
    LC_ASSERT_EQ(lc_store_reader_count(r), 1);
    lc_block_t *b = lc_store_reader_block(r, 0);
    expect_tree_ordered(b);
    for (size_t vi = 0; vi < l.p->n_sample_type; vi++) {
        char sel[128];
        snprintf(sel, sizeof(sel), "{__name__=\"%s\"}", type_name(&l, vi));
        found_t f = find_series(b, "real", sel);
        LC_ASSERT_EQ(f.n, 1);
        profs_t ps = profiles_of(b, f.ids[0], t, t);
        LC_ASSERT_EQ(ps.n, 1);
        int64_t want_total = manifest_total(file, type_name(&l, vi)), sum;
        LC_CHECK(want_total >= 0);
        LC_ASSERT_EQ(ps.v[0].total, want_total);
        sums_t want = pprof_sums(&l, vi, spans), got = stored_sums(b, &ps.v[0], &sum);
        LC_ASSERT_EQ(sum, want_total);
        sums_expect_equal(&want, &got);
        profs_free(&ps);
    }
    lc_store_read_end(r);
    free(spans);
    lc_arena_free(l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

static void test_real_heap_four_types(void)
{
    check_real_file("pyroscope-heap", false, false);
}
static void test_real_heap_pinned(void)
{
    check_real_file("pyroscope-heap", false, true);
}
static void test_real_large_cpu(void)
{
    check_real_file("gopprof-large.cpu", false, true);
}
static void test_real_java(void)
{
    check_real_file("pyroscope-profile_java", false, false);
}

static void test_real_gzip_truncated(void)
{
    check_real_file("pyroscope-cpu_go_truncated_1.pb.gz", false, false);
}

static void test_real_span_ids(void)
{
    check_real_file("pyroscope-single_group_with_optional_span_id.pb.gz", true, true);
}

/* Label groups: one pinned profile split into two series by sample subset,
 * with overriding values (as server-side deltas do). */
static void test_pinned_sample_subsets(void)
{
    loaded_t l = load_pprof("pyroscope-go.cpu.labels.pprof");
    lc_store_t *s = store_open(tmp_dir());
    size_t n = l.p->n_sample, n_even = (n + 1) / 2;
    uint32_t *idx = malloc(n * sizeof(uint32_t));
    int64_t *vals = malloc(n * sizeof(int64_t));
    int64_t want[2] = {0, 0};
    for (size_t i = 0; i < n; i++) { /* evens first, then odds */
        size_t si = i < n_even ? 2 * i : 2 * (i - n_even) + 1;
        idx[i] = (uint32_t)si;
        vals[i] = l.p->sample[si]->value[1] * 2;
        want[i >= n_even] += vals[i];
    }
    lc_store_txn_t *txn;
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    lc_store_write_pin(txn, l.p, l.ix);
    for (int g = 0; g < 2; g++) {
        lc_labels_t ls;
        labels_of(&ls, g ? "odd" : "even", "cpu");
        size_t off = g ? n_even : 0;
        lc_store_write_t w = {.tenant = "t",
                              .labels = &ls,
                              .time_ns = T0,
                              .profile = l.p,
                              .index = l.ix,
                              .value_index = 1,
                              .samples = idx + off,
                              .n_samples = g ? n - n_even : n_even,
                              .values = vals + off};
        LC_ASSERT_OK(lc_store_write_profile(txn, &w));
        lc_labels_fini(&ls);
    }
    lc_store_write_unpin(txn);
    LC_ASSERT_OK(lc_store_write_commit(txn));
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0, &r));
    lc_block_t *b = lc_store_reader_block(r, 0);
    const char *sel[2] = {"{service_name=\"even\"}", "{service_name=\"odd\"}"};
    int64_t both = 0;
    for (int g = 0; g < 2; g++) {
        found_t f = find_series(b, "t", sel[g]);
        LC_ASSERT_EQ(f.n, 1);
        profs_t ps = profiles_of(b, f.ids[0], T0, T0);
        int64_t sum;
        sums_t got = stored_sums(b, &ps.v[0], &sum);
        LC_ASSERT_EQ(ps.v[0].total, want[g]);
        LC_ASSERT_EQ(sum, want[g]);
        both += sum;
        free(got.v);
        profs_free(&ps);
    }
    LC_ASSERT_EQ(both, 2 * manifest_total("pyroscope-go.cpu.labels.pprof", "cpu"));
    lc_store_read_end(r);
    free(idx);
    free(vals);
    lc_arena_free(l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

/* ---------------------------------------------------------------- de-dup, restart */

static lc_block_info_t block_info_at(lc_store_t *s, int64_t t)
{
    lc_store_reader_t *r;
    lc_block_info_t info = {0};
    LC_ASSERT_OK(lc_store_read_begin(s, t, t, &r));
    LC_ASSERT_EQ(lc_store_reader_count(r), 1);
    if (lc_store_reader_count(r) == 1)
        LC_ASSERT_OK(lc_block_info(lc_store_reader_block(r, 0), &info));
    lc_store_read_end(r);
    return info;
}

static void test_dedup_same_profile_twice(void)
{
    loaded_t l = load_pprof("pyroscope-heap");
    lc_store_t *s = store_open(tmp_dir());
    lc_labels_t ls;
    labels_of(&ls, "dedup", "inuse_space");
    LC_ASSERT_OK(write_one(s, "t", &ls, T0 + 1, &l, 3, NULL));
    lc_block_info_t a = block_info_at(s, T0);
    LC_ASSERT_OK(write_one(s, "t", &ls, T0 + 1, &l, 3, NULL)); /* same time: a second record */
    lc_block_info_t b = block_info_at(s, T0);
    LC_ASSERT_EQ(b.nodes, a.nodes);
    LC_ASSERT_EQ(b.strings, a.strings);
    LC_ASSERT_EQ(b.locations, a.locations);
    LC_ASSERT_EQ(b.functions, a.functions);
    LC_ASSERT_EQ(b.series, 1);
    LC_ASSERT_EQ(b.profiles, 2);
    LC_ASSERT_EQ(b.samples, 2 * a.samples);
    LC_CHECK(a.locations <= l.p->n_location && a.functions <= l.p->n_function);

    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0 + 1, &r));
    profs_t ps = profiles_of(lc_store_reader_block(r, 0), 1, T0, T0 + 1);
    LC_ASSERT_EQ(ps.n, 2);
    LC_ASSERT_EQ(ps.v[0].total, manifest_total("pyroscope-heap", "inuse_space"));
    LC_ASSERT_EQ(ps.v[1].total, ps.v[0].total);
    LC_ASSERT_EQ(ps.v[1]._len, ps.v[0]._len);
    profs_free(&ps);
    lc_store_read_end(r);
    lc_labels_fini(&ls);
    lc_arena_free(l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

static void test_restart_keeps_data_and_ids(void)
{
    hand_t h;
    hand_build(&h);
    loaded_t big = load_pprof("pyroscope-cpu.pprof");
    const char *dir = tmp_dir();
    lc_store_t *s = store_open(dir);
    lc_labels_t ls;
    labels_of(&ls, "restart", "cpu");
    LC_ASSERT_OK(write_one(s, "t", &ls, T0 + 10, &h.l, 1, NULL));
    lc_block_info_t before = block_info_at(s, T0);
    lc_store_close(s);

    s = store_open(dir);
    lc_block_info_t after = block_info_at(s, T0);
    LC_ASSERT_MEM_EQ(&after, &before, sizeof(before));
    /* The same profile again adds nothing but a record; the maps were rebuilt. */
    LC_ASSERT_OK(write_one(s, "t", &ls, T0 + 20, &h.l, 1, NULL));
    lc_block_info_t again = block_info_at(s, T0);
    LC_ASSERT_EQ(again.nodes, before.nodes);
    LC_ASSERT_EQ(again.strings, before.strings);
    LC_ASSERT_EQ(again.locations, before.locations);
    LC_ASSERT_EQ(again.series, 1);
    LC_ASSERT_EQ(again.profiles, 2);
    /* A different profile grows the tables and still reads back exactly. */
    LC_ASSERT_OK(write_one(s, "t", &ls, T0 + 30, &big, 1, NULL));
    lc_store_close(s);
    s = store_open(dir);

    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0 + 100, &r));
    lc_block_t *b = lc_store_reader_block(r, 0);
    expect_tree_ordered(b);
    profs_t ps = profiles_of(b, 1, T0, T0 + 100);
    LC_ASSERT_EQ(ps.n, 3);
    int64_t sum;
    sums_t want = pprof_sums(&h.l, 1, NULL), got = stored_sums(b, &ps.v[0], &sum);
    sums_expect_equal(&want, &got);
    want = pprof_sums(&big, 1, NULL), got = stored_sums(b, &ps.v[2], &sum);
    LC_ASSERT_EQ(sum, manifest_total("pyroscope-cpu.pprof", "cpu"));
    sums_expect_equal(&want, &got);
    profs_free(&ps);
    lc_store_read_end(r);
    lc_labels_fini(&ls);
    lc_arena_free(big.arena);
    lc_arena_free(h.l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

static void test_abort_leaves_nothing(void)
{
    hand_t h;
    hand_build(&h);
    lc_store_t *s = store_open(tmp_dir());
    lc_labels_t ls;
    labels_of(&ls, "abort", "cpu");
    lc_store_txn_t *txn;
    lc_store_write_t w = {.tenant = "t",
                          .labels = &ls,
                          .time_ns = T0 + 1,
                          .profile = &h.p,
                          .index = h.l.ix,
                          .value_index = 1};
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    LC_ASSERT_OK(lc_store_write_profile(txn, &w));
    LC_ASSERT_OK(lc_store_write_applied(txn, T0 + 1, (const uint8_t *)"id-1", 4, NULL));
    lc_store_write_abort(txn);

    lc_block_info_t info = block_info_at(s, T0); /* the block exists, empty */
    LC_ASSERT_EQ(info.series, 0);
    LC_ASSERT_EQ(info.profiles, 0);
    LC_ASSERT_EQ(info.nodes, 1);
    LC_ASSERT_EQ(info.strings, 1);
    bool applied = true;
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    LC_ASSERT_OK(lc_store_write_is_applied(txn, T0 + 1, (const uint8_t *)"id-1", 4, &applied));
    LC_CHECK(!applied);
    /* The in-memory maps were rolled back too: ids restart at 1. */
    LC_ASSERT_OK(lc_store_write_profile(txn, &w));
    LC_ASSERT_OK(lc_store_write_commit(txn));
    info = block_info_at(s, T0);
    LC_ASSERT_EQ(info.series, 1);
    LC_ASSERT_EQ(info.nodes, 6);
    LC_ASSERT_EQ(info.locations, 4);
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0 + 1, &r));
    found_t f = find_series(lc_store_reader_block(r, 0), "t", "{}");
    LC_ASSERT_EQ(f.n, 1);
    LC_ASSERT_EQ(f.ids[0], 1);
    lc_store_read_end(r);
    lc_labels_fini(&ls);
    lc_arena_free(h.l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

/* ---------------------------------------------------------------- stack cache */

/* What service `svc` holds at time t equals the stacks and values of l. */
static void expect_stored_as(lc_store_t *s, const char *svc, int64_t t, const loaded_t *l,
                             size_t vi)
{
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, t, t, &r));
    lc_block_t *b = lc_store_reader_block(r, 0);
    char sel[128];
    snprintf(sel, sizeof(sel), "{service_name=\"%s\"}", svc);
    found_t f = find_series(b, "t", sel);
    LC_ASSERT_EQ(f.n, 1);
    profs_t ps = profiles_of(b, f.ids[0], t, t);
    LC_ASSERT_EQ(ps.n, 1);
    int64_t sum;
    sums_t want = pprof_sums(l, vi, NULL), got = stored_sums(b, &ps.v[0], &sum);
    sums_expect_equal(&want, &got);
    expect_tree_ordered(b);
    profs_free(&ps);
    lc_store_read_end(r);
}

static void write_as(lc_store_t *s, const char *svc, int64_t t, const loaded_t *l, size_t vi)
{
    lc_labels_t ls;
    labels_of(&ls, svc, "cpu");
    LC_ASSERT_OK(write_one(s, "t", &ls, t, l, vi, NULL));
    lc_labels_fini(&ls);
}

/* Stacks cut at the root (new paths) or at the leaf (prefixes of known ones). */
static void cut_stacks(loaded_t *l, bool root)
{
    for (size_t i = 0; i < l->p->n_sample; i++) {
        Google__V1__Sample *smp = l->p->sample[i];
        if (smp->n_location_id < 2)
            continue;
        smp->n_location_id--;
        if (!root)
            smp->location_id++;
    }
}

/* Whole stacks come from the block's stack cache once seen: profiles whose
 * stacks are new, the same, prefixes or other paths must all read back as
 * written, and an aborted batch must not leave cached stacks behind. */
static void test_stack_cache_profile_after_profile(void)
{
    loaded_t heap = load_pprof("pyroscope-heap"), java = load_pprof("pyroscope-profile_java");
    loaded_t no_root = load_pprof("pyroscope-heap"), no_leaf = load_pprof("pyroscope-heap");
    cut_stacks(&no_root, true);
    cut_stacks(&no_leaf, false);
    lc_store_t *s = store_open(tmp_dir());
    write_as(s, "heap1", T0 + 1, &heap, 3);
    write_as(s, "java", T0 + 2, &java, 0);
    write_as(s, "heap2", T0 + 3, &heap, 3); /* every stack cached */
    lc_block_info_t before = block_info_at(s, T0);
    write_as(s, "no-leaf", T0 + 4, &no_leaf, 3); /* nodes exist, stacks not cached */
    LC_ASSERT_EQ(block_info_at(s, T0).nodes, before.nodes);

    lc_labels_t ls; /* new nodes and cached stacks in a batch that is rolled back */
    labels_of(&ls, "aborted", "cpu");
    lc_store_txn_t *txn;
    lc_store_write_t w = {.tenant = "t",
                          .labels = &ls,
                          .time_ns = T0 + 5,
                          .profile = no_root.p,
                          .index = no_root.ix,
                          .value_index = 3};
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    LC_ASSERT_OK(lc_store_write_profile(txn, &w));
    lc_store_write_abort(txn);
    lc_labels_fini(&ls);
    write_as(s, "java2", T0 + 6, &java, 0);
    write_as(s, "no-root", T0 + 7, &no_root, 3);
    LC_CHECK(block_info_at(s, T0).nodes > before.nodes);

    expect_stored_as(s, "heap1", T0 + 1, &heap, 3);
    expect_stored_as(s, "java", T0 + 2, &java, 0);
    expect_stored_as(s, "heap2", T0 + 3, &heap, 3);
    expect_stored_as(s, "no-leaf", T0 + 4, &no_leaf, 3);
    expect_stored_as(s, "java2", T0 + 6, &java, 0);
    expect_stored_as(s, "no-root", T0 + 7, &no_root, 3);
    lc_arena_free(heap.arena);
    lc_arena_free(java.arena);
    lc_arena_free(no_root.arena);
    lc_arena_free(no_leaf.arena);
    lc_store_close(s);
    tmp_cleanup();
}

static void test_applied_ids(void)
{
    lc_store_t *s = store_open(tmp_dir());
    lc_store_txn_t *txn;
    bool applied = false;
    const uint8_t *id = (const uint8_t *)"1700000000000-0";
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    LC_ASSERT_OK(lc_store_write_is_applied(txn, T0, id, 15, &applied));
    LC_CHECK(!applied); /* no block there yet, and none is created by asking */
    LC_ASSERT_OK(lc_store_write_applied(txn, T0, id, 15, NULL));
    LC_ASSERT_OK(lc_store_write_is_applied(txn, T0 + 5, id, 15, &applied));
    LC_CHECK(applied); /* same block, same transaction */
    uint8_t big[65] = {0};
    LC_ASSERT_EQ(lc_store_write_applied(txn, T0, big, sizeof(big), NULL), LC_EINPUT);
    LC_ASSERT_EQ(lc_store_write_applied(txn, T0, big, 0, NULL), LC_EINPUT);
    LC_ASSERT_OK(lc_store_write_commit(txn));

    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    LC_ASSERT_OK(lc_store_write_is_applied(txn, T0 + 100, id, 15, &applied));
    LC_CHECK(applied);
    LC_ASSERT_OK(lc_store_write_is_applied(txn, T0, id, 14, &applied));
    LC_CHECK(!applied);
    LC_ASSERT_OK(lc_store_write_is_applied(txn, T0 + HOUR_NS, id, 15, &applied));
    LC_CHECK(!applied); /* recorded in the block of its profile time only */
    lc_store_write_abort(txn);
    /* Only one batch at a time. */
    lc_store_txn_t *t2;
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    LC_ASSERT_EQ(lc_store_write_begin(s, &t2), LC_EINPUT);
    lc_store_write_abort(txn);
    lc_store_close(s);
    tmp_cleanup();
}

/* ---------------------------------------------------------------- selectors, tenants */

static void write_labeled(lc_store_t *s, const char *tenant, const loaded_t *l, int64_t t,
                          const char *const *kv, size_t n)
{
    lc_labels_t ls;
    lc_labels_init(&ls);
    for (size_t i = 0; i < n; i += 2)
        lc_labels_add(&ls, kv[i], kv[i + 1]);
    lc_labels_sort(&ls);
    LC_ASSERT_OK(write_one(s, tenant, &ls, t, l, 1, NULL));
    lc_labels_fini(&ls);
}

static char long_value[600];

static void selectors_setup(lc_store_t *s, const loaded_t *l)
{
    memset(long_value, 'x', sizeof(long_value) - 1);
    long_value[sizeof(long_value) - 2] = 'y';
    const char *a1[] = {"service_name", "api", "env", "prod"};
    const char *a2[] = {"service_name", "api", "env", "dev"};
    const char *a3[] = {"service_name", "db", "env", "prod"};
    const char *a4[] = {"service_name", "batch"};
    const char *a5[] = {"service_name", "long", "blob", long_value};
    const char *b1[] = {"service_name", "api", "env", "prod"};
    write_labeled(s, "A", l, T0 + 1, a1, 4);
    write_labeled(s, "A", l, T0 + 2, a2, 4);
    write_labeled(s, "A", l, T0 + 3, a3, 4);
    write_labeled(s, "A", l, T0 + 4, a4, 2);
    write_labeled(s, "A", l, T0 + 5, a5, 4);
    write_labeled(s, "B", l, T0 + 6, b1, 4);
}

/* The services found, sorted and joined, e.g. "api,db". */
static const char *services(lc_block_t *b, const char *tenant, const char *sel)
{
    static char out[512];
    found_t f = find_series(b, tenant, sel);
    qsort(f.services, f.n, sizeof(f.services[0]), (int (*)(const void *, const void *))strcmp);
    out[0] = 0;
    for (size_t i = 0; i < f.n; i++)
        snprintf(out + strlen(out), sizeof(out) - strlen(out), "%s%s", i ? "," : "", f.services[i]);
    return out;
}

static int stop_cb(lc_block_t *b, uint32_t id, const char *tenant, const lc_labels_t *ls,
                   void *data)
{
    (void)b, (void)id, (void)tenant, (void)ls;
    ++*(int *)data;
    return 42;
}

/* ---------------------------------------------------------------- forgetting */

/* One message: the profile of each given sample type under its own series,
 * then its applied id with its delivery id. */
static void write_message(lc_store_txn_t *txn, const loaded_t *l, const char *service, int64_t t,
                          const size_t *types, size_t n_types, const char *ingest_id,
                          const char *delivery)
{
    for (size_t i = 0; i < n_types; i++) {
        lc_labels_t ls;
        char type[16];
        snprintf(type, sizeof(type), "type%zu", types[i]);
        labels_of(&ls, service, type);
        lc_store_write_t w = {.tenant = "t",
                              .labels = &ls,
                              .time_ns = t,
                              .profile = l->p,
                              .index = l->ix,
                              .value_index = types[i]};
        LC_ASSERT_OK(lc_store_write_profile(txn, &w));
        lc_labels_fini(&ls);
    }
    LC_ASSERT_OK(
        lc_store_write_applied(txn, t, (const uint8_t *)ingest_id, strlen(ingest_id), delivery));
}

static bool is_applied(lc_store_t *s, int64_t t, const char *ingest_id)
{
    lc_store_txn_t *txn;
    bool applied = false;
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    LC_ASSERT_OK(
        lc_store_write_is_applied(txn, t, (const uint8_t *)ingest_id, strlen(ingest_id), &applied));
    lc_store_write_abort(txn);
    return applied;
}

static size_t forget(lc_store_t *s, const char *const *deliveries, size_t n)
{
    lc_store_txn_t *txn;
    size_t forgotten = 99;
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    LC_ASSERT_OK(lc_store_write_forget(txn, deliveries, n, &forgotten));
    LC_ASSERT_OK(lc_store_write_commit(txn));
    return forgotten;
}

/* Profiles, the sum of their totals and of their sample counts, over every
 * series of the block of t, as a reader finds them. */
static void block_totals(lc_store_t *s, int64_t t, size_t *profiles, int64_t *total,
                         uint64_t *samples)
{
    lc_store_reader_t *r;
    *profiles = 0;
    *total = 0;
    *samples = 0;
    LC_ASSERT_OK(lc_store_read_begin(s, t, t, &r));
    lc_block_t *b = lc_store_reader_block(r, 0);
    lc_block_info_t info;
    LC_ASSERT_OK(lc_block_info(b, &info));
    for (uint32_t series = 1; series <= info.series; series++) {
        profs_t ps = profiles_of(b, series, INT64_MIN / 4, INT64_MAX / 4);
        *profiles += ps.n;
        for (size_t i = 0; i < ps.n; i++) {
            *total += ps.v[i].total;
            *samples += ps.v[i].n_samples;
        }
        profs_free(&ps);
    }
    lc_store_read_end(r);
}

static void test_forget_by_delivery(void)
{
    loaded_t l = load_pprof("pyroscope-heap");
    const char *dir = tmp_dir();
    lc_store_t *s = store_open(dir);
    const size_t two[] = {0, 3}, one[] = {1};
    /* Entry ids repeat across streams: only stream/id names one delivery. */
    const char *da = "ember:ingest:3/1700000000000-0", *db = "ember:ingest:5/1700000000000-0";
    const char *dc = "ember:ingest:1/1700000000001-0";
    lc_store_txn_t *txn;
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    write_message(txn, &l, "a", T0 + 1, two, 2, "ingest-a", da);
    write_message(txn, &l, "b", T0 + 2, one, 1, "ingest-b", db);
    write_message(txn, &l, "c", T0 + HOUR_NS + 3, one, 1, "ingest-c", dc);
    LC_ASSERT_OK(lc_store_write_commit(txn));
    lc_block_info_t before = block_info_at(s, T0);
    LC_ASSERT_EQ(before.profiles, 3);
    size_t n_b_only;
    int64_t total_before, total_b;
    uint64_t samples_read, samples_b;
    block_totals(s, T0, &n_b_only, &total_before, &samples_read);
    LC_ASSERT_EQ(n_b_only, 3);
    LC_ASSERT_EQ(samples_read, before.samples);

    /* a (two profiles, block T0) and c (next block) go; b stays; unknown skipped. */
    const char *gone[] = {da, "ember:ingest:9/1-0", dc};
    LC_ASSERT_EQ(forget(s, gone, 3), 2);
    lc_block_info_t after = block_info_at(s, T0);
    LC_ASSERT_EQ(after.profiles, 1);
    LC_ASSERT_EQ(after.series, before.series); /* series and symbols are kept */
    LC_ASSERT_EQ(after.nodes, before.nodes);
    block_totals(s, T0, &n_b_only, &total_b, &samples_b);
    LC_ASSERT_EQ(n_b_only, 1);
    LC_ASSERT_EQ(total_b, manifest_total("pyroscope-heap", "alloc_space"));
    LC_CHECK(total_b < total_before);
    lc_block_info_t next = block_info_at(s, T0 + HOUR_NS);
    LC_ASSERT_EQ(next.profiles, 0);
    LC_ASSERT_EQ(next.samples, 0);
    /* The samples count follows: what is left is b's alone. */
    LC_ASSERT_EQ(after.samples, samples_b);
    LC_CHECK(samples_b > 0 && samples_b < before.samples);

    /* A forgotten id is no longer applied (a claim back makes this writer
     * the owner again: it must apply it); the others still are. */
    LC_CHECK(!is_applied(s, T0 + 1, "ingest-a"));
    LC_CHECK(!is_applied(s, T0 + HOUR_NS + 3, "ingest-c"));
    LC_CHECK(is_applied(s, T0 + 2, "ingest-b"));

    /* Forgetting again changes nothing: counts never go below the records. */
    LC_ASSERT_EQ(forget(s, gone, 3), 0);
    after = block_info_at(s, T0);
    LC_ASSERT_EQ(after.profiles, 1);

    /* Durable, and the block still loads for writing after a restart: a
     * again (its redelivery to this writer) is stored once and forgettable. */
    lc_store_close(s);
    s = store_open(dir);
    LC_ASSERT_EQ(block_info_at(s, T0).profiles, 1);
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    write_message(txn, &l, "a", T0 + 1, two, 2, "ingest-a", da);
    LC_ASSERT_OK(lc_store_write_commit(txn));
    LC_CHECK(is_applied(s, T0 + 1, "ingest-a"));
    size_t n;
    int64_t total;
    block_totals(s, T0, &n, &total, &samples_read);
    LC_ASSERT_EQ(n, 3);
    LC_ASSERT_EQ(total, total_before);
    LC_ASSERT_EQ(block_info_at(s, T0).samples, before.samples);
    LC_ASSERT_EQ(forget(s, gone, 1), 1);
    LC_ASSERT_EQ(block_info_at(s, T0).profiles, 1);

    /* A message's profiles and its applied id share one block. */
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    lc_labels_t ls;
    labels_of(&ls, "d", "type1");
    lc_store_write_t w = {.tenant = "t",
                          .labels = &ls,
                          .time_ns = T0 + 5,
                          .profile = l.p,
                          .index = l.ix,
                          .value_index = 1};
    LC_ASSERT_OK(lc_store_write_profile(txn, &w));
    LC_ASSERT_EQ(lc_store_write_applied(txn, T0 + HOUR_NS, (const uint8_t *)"d", 1, "s/1-0"),
                 LC_EINPUT);
    lc_store_write_abort(txn);
    lc_labels_fini(&ls);
    lc_arena_free(l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

static void test_selectors_and_tenants(void)
{
    hand_t h;
    hand_build(&h);
    lc_store_t *s = store_open(tmp_dir());
    selectors_setup(s, &h.l);
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0 + 10, &r));
    lc_block_t *b = lc_store_reader_block(r, 0);
    LC_ASSERT_STR_EQ(services(b, "A", "{}"), "api,api,batch,db,long");
    LC_ASSERT_STR_EQ(services(b, "A", "{service_name=\"api\"}"), "api,api");
    LC_ASSERT_STR_EQ(services(b, "A", "{service_name=\"api\", env=\"prod\"}"), "api");
    LC_ASSERT_STR_EQ(services(b, "A", "{env=\"prod\"}"), "api,db");
    LC_ASSERT_STR_EQ(services(b, "A", "{env!=\"prod\"}"), "api,batch,long");
    LC_ASSERT_STR_EQ(services(b, "A", "{service_name=~\"a.*|d.\"}"), "api,api,db");
    LC_ASSERT_STR_EQ(services(b, "A", "{service_name!~\"a.*\", env=\"prod\"}"), "db");
    LC_ASSERT_STR_EQ(services(b, "A", "{env=\"\"}"), "batch,long");
    LC_ASSERT_STR_EQ(services(b, "A", "{env=\"staging\"}"), "");
    LC_ASSERT_STR_EQ(services(b, "A", "{nope=\"x\", env=\"prod\"}"), "");
    char sel[700];
    snprintf(sel, sizeof(sel), "{blob=\"%s\"}", long_value); /* a hashed posting key */
    LC_ASSERT_STR_EQ(services(b, "A", sel), "long");
    long_value[0] = 'z';
    snprintf(sel, sizeof(sel), "{blob=\"%s\"}", long_value);
    LC_ASSERT_STR_EQ(services(b, "A", sel), "");
    /* Tenants are isolated, and several can be asked at once. */
    LC_ASSERT_STR_EQ(services(b, "B", "{}"), "api");
    LC_ASSERT_STR_EQ(services(b, "B", "{env=\"dev\"}"), "");
    LC_ASSERT_STR_EQ(services(b, "C", "{}"), "");
    found_t f = {0};
    const char *both[] = {"A", "B"};
    LC_ASSERT_OK(lc_block_series(b, both, 2, NULL, found_cb, &f));
    LC_ASSERT_EQ(f.n, 6);
    /* A callback's non-zero result stops the walk and comes back. */
    int calls = 0;
    LC_ASSERT_EQ(lc_block_series(b, both, 2, NULL, stop_cb, &calls), 42);
    LC_ASSERT_EQ(calls, 1);
    lc_store_read_end(r);
    lc_arena_free(h.l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

/* ---------------------------------------------------------------- blocks and time */

/* Entries of <dir>/<sub> (0 when it does not exist). */
static int count_entries(const char *dir, const char *sub)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, sub);
    DIR *d = opendir(path);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    if (d)
        closedir(d);
    return n;
}

static bool block_dir_exists(const char *dir, int64_t start_ns)
{
    char path[256];
    struct stat st;
    snprintf(path, sizeof(path), "%s/blocks/%012lld", dir, (long long)(start_ns / 1000000000));
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void test_blocks_and_time_ranges(void)
{
    hand_t h;
    hand_build(&h);
    const char *dir = tmp_dir();
    lc_store_t *s = store_open_opts(dir, 0, 2); /* fewer open envs than blocks: LRU */
    lc_labels_t ls;
    labels_of(&ls, "time", "cpu");
    const int64_t times[] = {T0, T0 + TEN_MIN_NS, T0 + HOUR_NS + 1, T0 + 3 * HOUR_NS - 1, T0 - 1};
    for (size_t i = 0; i < 5; i++)
        LC_ASSERT_OK(write_one(s, "t", &ls, times[i], &h.l, 1, NULL));
    LC_ASSERT_EQ(count_entries(dir, "blocks"), 4);
    LC_CHECK(block_dir_exists(dir, T0 - HOUR_NS));
    LC_CHECK(block_dir_exists(dir, T0 + 2 * HOUR_NS));

    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0 + 2 * TEN_MIN_NS, &r));
    LC_ASSERT_EQ(lc_store_reader_count(r), 1);
    lc_block_t *b = lc_store_reader_block(r, 0);
    profs_t ps = profiles_of(b, 1, T0, T0 + 2 * TEN_MIN_NS);
    LC_ASSERT_EQ(ps.n, 2);
    LC_ASSERT_EQ(ps.v[0].time_ns, T0);
    LC_ASSERT_EQ(ps.v[1].time_ns, T0 + TEN_MIN_NS);
    profs_free(&ps);
    ps = profiles_of(b, 1, T0 + 1, T0 + TEN_MIN_NS - 1);
    LC_ASSERT_EQ(ps.n, 0);
    ps = profiles_of(b, 1, T0 + TEN_MIN_NS, T0 + TEN_MIN_NS);
    LC_ASSERT_EQ(ps.n, 1);
    profs_free(&ps);
    lc_block_info_t info;
    LC_ASSERT_OK(lc_block_info(b, &info));
    LC_ASSERT_EQ(info.min_time_ns, T0);
    LC_ASSERT_EQ(info.max_time_ns, T0 + TEN_MIN_NS);
    lc_store_read_end(r);

    /* All blocks, in time order, through a 2-env LRU. */
    LC_ASSERT_OK(lc_store_read_begin(s, T0 - HOUR_NS, T0 + 10 * HOUR_NS, &r));
    LC_ASSERT_EQ(lc_store_reader_count(r), 4);
    int64_t want_start[] = {T0 - HOUR_NS, T0, T0 + HOUR_NS, T0 + 2 * HOUR_NS};
    uint64_t n_profiles = 0;
    for (size_t i = 0; i < lc_store_reader_count(r); i++) {
        LC_ASSERT_OK(lc_block_info(lc_store_reader_block(r, i), &info));
        LC_ASSERT_EQ(info.start_ns, want_start[i]);
        n_profiles += info.profiles;
    }
    LC_ASSERT_EQ(n_profiles, 5);
    LC_CHECK(lc_store_reader_block(r, 4) == NULL);
    lc_store_read_end(r);
    /* The empty hour between has no block. */
    LC_ASSERT_OK(lc_store_read_begin(s, T0 + 2 * HOUR_NS - 10, T0 + 2 * HOUR_NS - 1, &r));
    LC_ASSERT_EQ(lc_store_reader_count(r), 1);
    lc_store_read_end(r);
    LC_ASSERT_EQ(lc_store_read_begin(s, T0 + 1, T0, &r), LC_EINPUT);
    lc_labels_fini(&ls);
    lc_arena_free(h.l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

/* Block environments of dir open in this process: one lock.mdb fd each. */
static size_t open_block_envs(const char *dir)
{
    char blocks[PATH_MAX], link[PATH_MAX], path[64];
    snprintf(blocks, sizeof(blocks), "%s/blocks/", dir);
    size_t n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        abort();
    for (struct dirent *e; (e = readdir(d));) {
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, link, sizeof(link) - 1);
        if (len <= 0)
            continue;
        link[len] = 0;
        size_t bl = strlen(blocks);
        if (!strncmp(link, blocks, bl) && strstr(link + bl, "/lock.mdb"))
            n++;
    }
    closedir(d);
    return n;
}

/* Reads every block, ends the reader; returns the environments left open. */
static size_t envs_after_reading_all(lc_store_t *s, const char *dir)
{
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0 + 200 * HOUR_NS, &r));
    LC_ASSERT_EQ(lc_store_reader_count(r), 120);
    lc_store_read_end(r);
    return open_block_envs(dir);
}

/* max_open_blocks 0: a quarter of the soft open-file limit at 3 fds per
 * environment, 64..1024: a week of blocks stays open after a week's query
 * under a usual limit, and a low limit keeps fewer. */
static void test_default_open_cap_follows_nofile(void)
{
    struct rlimit was;
    LC_ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &was), 0);
    if (was.rlim_max < 1200 || was.rlim_cur < 1200) {
        printf("  skipped: open-file limit below 1200\n");
        return;
    }
    hand_t h;
    hand_build(&h);
    const char *dir = tmp_dir();
    lc_labels_t ls;
    labels_of(&ls, "cap", "cpu");
    lc_store_t *s = store_open_opts(dir, 0, 0);
    for (int i = 0; i < 120; i++)
        LC_ASSERT_OK(write_one(s, "t", &ls, T0 + i * HOUR_NS, &h.l, 1, NULL));
    lc_store_close(s);

    struct rlimit low = {.rlim_cur = 1200, .rlim_max = was.rlim_max};
    LC_ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
    s = store_open_opts(dir, 0, 0);
    LC_ASSERT_EQ(envs_after_reading_all(s, dir), 100); /* 1200 / 4 / 3 */
    lc_store_close(s);
    LC_ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &was), 0);

    s = store_open_opts(dir, 0, 0);
    size_t cap = was.rlim_cur / 12 < 64 ? 64 : was.rlim_cur / 12;
    cap = cap > 1024 ? 1024 : cap;
    LC_ASSERT_EQ(envs_after_reading_all(s, dir), cap < 120 ? cap : 120);
    lc_store_close(s);
    LC_ASSERT_EQ(open_block_envs(dir), 0);
    lc_labels_fini(&ls);
    lc_arena_free(h.l.arena);
    tmp_cleanup();
}

/* Before 1970: partitions round down, keys keep time order across zero. */
static void test_negative_times(void)
{
    hand_t h;
    hand_build(&h);
    const char *dir = tmp_dir();
    lc_store_t *s = store_open(dir);
    lc_labels_t ls;
    labels_of(&ls, "neg", "cpu");
    const int64_t times[] = {-1, -HOUR_NS - 1, 0, -HOUR_NS};
    for (size_t i = 0; i < 4; i++)
        LC_ASSERT_OK(write_one(s, "t", &ls, times[i], &h.l, 1, NULL));
    lc_store_close(s);
    s = store_open(dir);
    LC_ASSERT_EQ(count_entries(dir, "blocks"), 3); /* [-2h,-1h) [-1h,0) [0,1h) */
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, -2 * HOUR_NS, -1, &r));
    LC_ASSERT_EQ(lc_store_reader_count(r), 2);
    profs_t ps = profiles_of(lc_store_reader_block(r, 0), 1, INT64_MIN / 2, INT64_MAX / 2);
    LC_ASSERT_EQ(ps.n, 1);
    LC_ASSERT_EQ(ps.v[0].time_ns, -HOUR_NS - 1);
    profs_free(&ps);
    ps = profiles_of(lc_store_reader_block(r, 1), 1, -HOUR_NS, -1);
    LC_ASSERT_EQ(ps.n, 2);
    LC_ASSERT_EQ(ps.v[0].time_ns, -HOUR_NS);
    LC_ASSERT_EQ(ps.v[1].time_ns, -1);
    profs_free(&ps);
    lc_store_read_end(r);
    lc_labels_fini(&ls);
    lc_arena_free(h.l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

static void test_retention_drops_old_blocks(void)
{
    hand_t h;
    hand_build(&h);
    const char *dir = tmp_dir();
    lc_store_t *s = store_open_opts(dir, 2 * HOUR_NS, 8);
    lc_labels_t ls;
    labels_of(&ls, "ret", "cpu");
    for (int i = 0; i < 5; i++)
        LC_ASSERT_OK(write_one(s, "t", &ls, T0 + i * HOUR_NS + 7, &h.l, 1, NULL));
    LC_ASSERT_EQ(count_entries(dir, "blocks"), 5);

    /* A reader holds the oldest block while retention drops it. */
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0 + 10, &r));
    size_t dropped = 0;
    /* now = T0 + 4h: cutoff T0 + 2h, so blocks ending at T0+1h and T0+2h go. */
    LC_ASSERT_OK(lc_store_retention(s, T0 + 4 * HOUR_NS, &dropped));
    LC_ASSERT_EQ(dropped, 2);
    LC_ASSERT_EQ(count_entries(dir, "blocks"), 3);
    LC_CHECK(!block_dir_exists(dir, T0));
    LC_CHECK(block_dir_exists(dir, T0 + 2 * HOUR_NS));
    profs_t ps = profiles_of(lc_store_reader_block(r, 0), 1, T0, T0 + HOUR_NS);
    LC_ASSERT_EQ(ps.n, 1); /* still readable until the reader ends */
    profs_free(&ps);
    LC_ASSERT_EQ(count_entries(dir, "trash"), 1); /* the unused one is already gone */
    lc_store_read_end(r);
    LC_ASSERT_EQ(count_entries(dir, "trash"), 0);

    LC_ASSERT_OK(lc_store_read_begin(s, T0 - HOUR_NS, T0 + 10 * HOUR_NS, &r));
    LC_ASSERT_EQ(lc_store_reader_count(r), 3);
    lc_store_read_end(r);
    LC_ASSERT_OK(lc_store_retention(s, T0 + 4 * HOUR_NS, &dropped));
    LC_ASSERT_EQ(dropped, 0);
    /* A new write into a dropped hour starts a fresh block. */
    LC_ASSERT_OK(write_one(s, "t", &ls, T0 + 7, &h.l, 1, NULL));
    lc_block_info_t info = block_info_at(s, T0);
    LC_ASSERT_EQ(info.profiles, 1);
    lc_store_close(s);
    /* Leftovers of a crash: a half-built block and a half-deleted one. */
    char path[256];
    snprintf(path, sizeof(path), "%s/blocks/.new-000000000042", dir);
    LC_ASSERT_OK(mkdir(path, 0755));
    snprintf(path, sizeof(path), "%s/trash/42.1", dir);
    LC_ASSERT_OK(mkdir(path, 0755));
    s = store_open_opts(dir, 2 * HOUR_NS, 8); /* reopening finds the 4 blocks */
    LC_ASSERT_EQ(count_entries(dir, "trash"), 0);
    LC_ASSERT_EQ(count_entries(dir, "blocks"), 4);
    LC_ASSERT_OK(lc_store_read_begin(s, T0 - HOUR_NS, T0 + 10 * HOUR_NS, &r));
    LC_ASSERT_EQ(lc_store_reader_count(r), 4);
    lc_store_read_end(r);
    lc_labels_fini(&ls);
    lc_arena_free(h.l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

/* ---------------------------------------------------------------- failures, threads */

static void test_map_full_is_an_error_and_recoverable(void)
{
    hand_t h;
    hand_build(&h);
    loaded_t big = load_pprof("gopprof-large.cpu");
    lc_store_opts_t o = {.dir = tmp_dir(), .map_size_bytes = (size_t)1 << 20};
    lc_store_t *s;
    LC_ASSERT_OK(lc_store_open(&o, &s));
    lc_labels_t ls;
    labels_of(&ls, "full", "cpu");
    LC_ASSERT_EQ(write_one(s, "t", &ls, T0, &big, 1, NULL), LC_ESTORE);
    /* Rolled back, maps included: a small profile still fits and reads back. */
    LC_ASSERT_OK(write_one(s, "t", &ls, T0, &h.l, 1, NULL));
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0, &r));
    lc_block_t *b = lc_store_reader_block(r, 0);
    profs_t ps = profiles_of(b, 1, T0, T0);
    LC_ASSERT_EQ(ps.n, 1);
    int64_t sum;
    sums_t want = pprof_sums(&h.l, 1, NULL), got = stored_sums(b, &ps.v[0], &sum);
    sums_expect_equal(&want, &got);
    profs_free(&ps);
    lc_store_read_end(r);
    lc_labels_fini(&ls);
    lc_arena_free(big.arena);
    lc_arena_free(h.l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

typedef struct reader_job_s {
    lc_store_t *s;
    atomic_int *stop;
    int errors, reads;
} reader_job_t;

static int sum_cb(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    (void)b;
    *(int64_t *)data += p->total;
    return 0;
}

static int series_sum_cb(lc_block_t *b, uint32_t id, const char *tenant, const lc_labels_t *ls,
                         void *data)
{
    (void)tenant, (void)ls;
    return lc_block_profiles(b, id, INT64_MIN / 2, INT64_MAX / 2, sum_cb, data);
}

/* Every snapshot must be whole: totals are multiples of one profile's. */
static void *reader_main(void *arg)
{
    reader_job_t *j = arg;
    const char *tenants[] = {"t"};
    while (!atomic_load(j->stop)) {
        lc_store_reader_t *r;
        if (lc_store_read_begin(j->s, T0 - HOUR_NS, T0 + 10 * HOUR_NS, &r)) {
            j->errors++;
            continue;
        }
        for (size_t i = 0; i < lc_store_reader_count(r); i++) {
            int64_t sum = 0;
            lc_block_t *b = lc_store_reader_block(r, i);
            lc_store_location_t loc;
            lc_block_info_t info;
            int rc = lc_block_series(b, tenants, 1, NULL, series_sum_cb, &sum);
            if (!rc)
                rc = lc_block_info(b, &info);
            if (!rc && info.locations) /* a block just created may still be empty */
                rc = lc_block_location(b, 1, &loc);
            if (rc || sum % 150 || sum != (int64_t)info.profiles * 150) {
                fprintf(stderr, "reader: rc=%d sum=%lld profiles=%llu\n", rc, (long long)sum,
                        (unsigned long long)info.profiles);
                j->errors++;
            }
        }
        lc_store_read_end(r);
        j->reads++;
    }
    return NULL;
}

/* issue 27: a block dropped once the bucket holds it (only at the write count
 * the caller checked), and blocks of a read-only copy added to a reader. */
static void test_drop_block_and_reader_add(void)
{
    hand_t h;
    hand_build(&h);
    const char *dir = tmp_dir();
    lc_store_t *s = store_open(dir);
    lc_labels_t ls;
    labels_of(&ls, "drop", "cpu");
    for (int i = 0; i < 3; i++)
        LC_ASSERT_OK(write_one(s, "t", &ls, T0 + i * HOUR_NS + 7, &h.l, 1, NULL));
    lc_store_block_state_t *st;
    size_t n;
    LC_ASSERT_OK(lc_store_block_states(s, &st, &n));
    LC_ASSERT_EQ(n, 3);
    /* The copy: block T0's file as a read-only store of its own. */
    char copy[256], file[320];
    snprintf(copy, sizeof(copy), "%s/copy", dir);
    snprintf(file, sizeof(file), "%s/blocks", copy);
    LC_ASSERT_OK(mkdir(copy, 0755));
    LC_ASSERT_OK(mkdir(file, 0755));
    snprintf(file, sizeof(file), "%s/blocks/%012lld", copy, (long long)(T0 / 1000000000));
    LC_ASSERT_OK(mkdir(file, 0755));
    snprintf(file, sizeof(file), "%s/blocks/%012lld/data.mdb", copy, (long long)(T0 / 1000000000));
    int fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0, &r));
    LC_ASSERT_OK(lc_block_copy(lc_store_reader_block(r, 0), fd));
    lc_store_read_end(r);
    close(fd);

    /* A write since the states were taken: that count is stale, nothing goes. */
    LC_ASSERT_OK(write_one(s, "t", &ls, T0 + 9, &h.l, 1, NULL));
    LC_ASSERT_EQ(lc_store_drop_block(s, T0, st[0].write_gen), -EBUSY);
    LC_CHECK(block_dir_exists(dir, T0));
    lc_free(st);
    LC_ASSERT_OK(lc_store_block_states(s, &st, &n));
    LC_ASSERT_OK(lc_store_drop_block(s, T0, st[0].write_gen));
    LC_ASSERT_EQ(lc_store_drop_block(s, T0, st[0].write_gen), LC_ENOTFOUND);
    LC_CHECK(!block_dir_exists(dir, T0));
    lc_free(st);

    lc_store_opts_t o = {.dir = copy, .block_duration_ns = HOUR_NS, .read_only = true};
    lc_store_t *ro = NULL;
    LC_ASSERT_OK(lc_store_open(&o, &ro));
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0 + 3 * HOUR_NS, &r));
    LC_ASSERT_EQ(lc_store_reader_count(r), 2);
    LC_ASSERT_OK(lc_store_reader_add(r, ro, T0, T0 + 3 * HOUR_NS));
    LC_ASSERT_EQ(lc_store_reader_count(r), 3);
    lc_block_info_t first;
    LC_ASSERT_OK(lc_block_info(lc_store_reader_block(r, 0), &first));
    LC_ASSERT_EQ(first.start_ns, T0); /* in start order among the others */
    LC_ASSERT_EQ(first.profiles, 1);  /* the copy: taken before the late write */
    lc_rollups_t *rs;
    LC_ASSERT_OK(lc_store_rollups_begin(r, T0, T0 + 3 * HOUR_NS, &rs));
    LC_ASSERT_EQ(lc_rollups_count(rs), 0);
    lc_store_rollups_end(rs);
    lc_store_read_end(r);
    LC_ASSERT_EQ(count_entries(copy, "blocks"), 1);
    lc_store_close(ro);
    lc_store_close(s);
    lc_labels_fini(&ls);
    lc_arena_free(h.l.arena);
    tmp_cleanup();
}

/* issue 27: what the floor's publish was asked, and whether it refuses. */
typedef struct floor_log_s {
    lc_store_t *s;
    int64_t ns[64];
    bool lower[64];
    int n;
    int refuse;               /* the next publishes fail with -EIO */
    atomic_llong published;   /* the mark as a querier would read it */
    atomic_int below_a_block; /* a publish that left a local block below the mark */
} floor_log_t;

static int floor_publish(void *ctx, int64_t ns, bool lower)
{
    floor_log_t *f = ctx;
    if (f->refuse > 0) {
        f->refuse--;
        return -EIO;
    }
    if (f->n < 64) {
        f->ns[f->n] = ns;
        f->lower[f->n++] = lower;
    }
    int64_t mark = lower && atomic_load(&f->published) < ns ? atomic_load(&f->published) : ns;
    lc_store_block_state_t *st;
    size_t n;
    if (!lc_store_block_states(f->s, &st, &n)) {
        for (size_t i = 0; i < n && !lower; i++)
            if (st[i].start_ns < mark)
                atomic_fetch_add(&f->below_a_block, 1);
        lc_free(st);
    }
    atomic_store(&f->published, mark);
    return 0;
}

static size_t count_from(lc_store_t *s, int64_t from_ns)
{
    lc_store_reader_t *r;
    lc_read_scope_t scope = {.need = LC_READ_BLOCKS, .from_ns = from_ns};
    LC_ASSERT_OK(lc_store_read_begin_all(s, T0 - HOUR_NS, T0 + 9 * HOUR_NS, &scope, &r));
    size_t n = lc_store_reader_count(r);
    for (size_t i = 0; i < n; i++) {
        lc_block_info_t info;
        LC_ASSERT_OK(lc_block_info(lc_store_reader_block(r, i), &info));
        LC_CHECK(info.start_ns >= from_ns || info.end_ns <= from_ns);
        LC_CHECK(info.start_ns >= lc_store_floor(s) || from_ns == INT64_MIN);
    }
    lc_store_read_end(r);
    return n;
}

/* issue 27: the floor is published lower before a write below it is stored
 * (a refused publish stores nothing), raised to the oldest local block after
 * a drop, and a reader from a partition leaves the earlier ones out. */
static void test_floor_and_read_from(void)
{
    hand_t h;
    hand_build(&h);
    const char *dir = tmp_dir();
    lc_store_t *s = store_open(dir);
    lc_labels_t ls;
    labels_of(&ls, "floor", "cpu");
    LC_ASSERT_EQ(lc_store_floor_update(s, T0), LC_EINPUT); /* no floor set */
    floor_log_t f = {.s = s, .published = INT64_MAX};
    lc_store_set_floor(s, floor_publish, &f);
    LC_ASSERT_EQ(lc_store_floor(s), INT64_MAX);
    for (int i = 2; i >= 0; i--)
        LC_ASSERT_OK(write_one(s, "t", &ls, T0 + i * HOUR_NS + 7, &h.l, 1, NULL));
    LC_ASSERT_EQ(f.n, 3); /* each new block was below the floor: T0+2h, +1h, T0 */
    LC_ASSERT_EQ(f.ns[2], T0);
    LC_CHECK(f.lower[0] && f.lower[2]);
    LC_ASSERT_OK(write_one(s, "t", &ls, T0 + 2 * HOUR_NS + 8, &h.l, 1, NULL));
    LC_ASSERT_EQ(f.n, 3); /* above the floor: nothing to publish */
    LC_ASSERT_OK(lc_store_floor_update(s, T0 + 10 * HOUR_NS + 5));
    LC_ASSERT_EQ(f.n, 3); /* the oldest block is the floor already */

    lc_store_block_state_t *st;
    size_t n;
    LC_ASSERT_OK(lc_store_block_states(s, &st, &n));
    LC_ASSERT_OK(lc_store_drop_block(s, T0, st[0].write_gen));
    lc_free(st);
    LC_ASSERT_OK(lc_store_floor_update(s, T0 + 10 * HOUR_NS + 5));
    LC_ASSERT_EQ(f.n, 4);
    LC_ASSERT_EQ(f.ns[3], T0 + HOUR_NS);
    LC_CHECK(!f.lower[3]);
    LC_ASSERT_EQ(lc_store_floor(s), T0 + HOUR_NS);

    /* A late write below it: a refused publish stores nothing. */
    f.refuse = 1;
    LC_ASSERT_EQ(write_one(s, "t", &ls, T0 + 9, &h.l, 1, NULL), -EIO);
    LC_CHECK(!block_dir_exists(dir, T0));
    LC_ASSERT_EQ(lc_store_floor(s), T0 + HOUR_NS);
    LC_ASSERT_OK(write_one(s, "t", &ls, T0 + 9, &h.l, 1, NULL));
    LC_ASSERT_EQ(f.n, 5);
    LC_ASSERT_EQ(f.ns[4], T0);
    LC_CHECK(f.lower[4]);
    LC_ASSERT_EQ(atomic_load(&f.published), T0);

    /* Readers: from a partition, from inside one (the next), past the end. */
    LC_ASSERT_EQ(count_from(s, INT64_MIN), 3);
    LC_ASSERT_EQ(count_from(s, T0 + HOUR_NS), 2);
    LC_ASSERT_EQ(count_from(s, T0 + 1), 2);
    LC_ASSERT_EQ(count_from(s, T0 + 20 * HOUR_NS), 0);
    LC_ASSERT_EQ(f.below_a_block, 0);
    lc_store_close(s);
    lc_labels_fini(&ls);
    lc_arena_free(h.l.arena);
    tmp_cleanup();
}

typedef struct floor_race_s {
    lc_store_t *s;
    const lc_labels_t *ls;
    const loaded_t *l;
    floor_log_t *f;
    atomic_int stop, drops;
    int errors;
} floor_race_t;

/* Writes at least 300 profiles, and goes on (yielding) until the other thread
 * has dropped a block while it writes: on a busy machine that thread may not
 * run at all during the first 300. */
static void *floor_writer(void *arg)
{
    floor_race_t *r = arg;
    for (int i = 0; i < 300 || (atomic_load(&r->drops) == 0 && i < 300000); i++) {
        if (i >= 300)
            sched_yield();
        int64_t t = T0 + (int64_t)((i * 7) % 6) * HOUR_NS + i;
        if (write_one(r->s, "t", r->ls, t, r->l, 1, NULL))
            r->errors++;
        int64_t start = t - t % HOUR_NS, mark = atomic_load(&r->f->published);
        lc_store_block_state_t *st;
        size_t n;
        if (mark <= start || lc_store_block_states(r->s, &st, &n))
            continue;
        for (size_t k = 0; k < n; k++)
            r->errors += st[k].start_ns == start; /* local, yet below the mark */
        lc_free(st);
    }
    atomic_store(&r->stop, 1);
    return NULL;
}

/* issue 27: blocks dropped and the floor raised while a writer creates blocks
 * below it: no publish ever leaves a local block below the mark. */
static void test_floor_races_writer(void)
{
    hand_t h;
    hand_build(&h);
    lc_store_t *s = store_open(tmp_dir());
    lc_labels_t ls;
    labels_of(&ls, "race", "cpu");
    floor_log_t f = {.s = s, .published = INT64_MAX};
    lc_store_set_floor(s, floor_publish, &f);
    floor_race_t r = {.s = s, .ls = &ls, .l = &h.l, .f = &f};
    pthread_t th;
    pthread_create(&th, NULL, floor_writer, &r);
    int updates = 0, drops = 0;
    while (!atomic_load(&r.stop)) {
        lc_store_block_state_t *st;
        size_t n;
        LC_ASSERT_OK(lc_store_block_states(s, &st, &n));
        for (size_t i = 0; i + 1 < n; i++)
            if (lc_store_drop_block(s, st[i].start_ns, st[i].write_gen) == 0)
                drops++; /* else -EBUSY: a write since, later */
        lc_free(st);
        atomic_store(&r.drops, drops);
        LC_ASSERT_OK(lc_store_floor_update(s, T0 + 10 * HOUR_NS));
        updates++;
    }
    pthread_join(th, NULL);
    LC_ASSERT_EQ(r.errors, 0);
    LC_ASSERT_EQ(atomic_load(&f.below_a_block), 0);
    LC_CHECK(updates > 0 && drops > 0);
    lc_store_close(s);
    lc_labels_fini(&ls);
    lc_arena_free(h.l.arena);
    tmp_cleanup();
}

static void test_concurrent_readers_writer_retention(void)
{
    hand_t h;
    hand_build(&h);
    lc_store_t *s = store_open_opts(tmp_dir(), 3 * HOUR_NS, 2);
    lc_labels_t ls;
    labels_of(&ls, "threads", "cpu");
    for (int i = 0; i < 4; i++)
        LC_ASSERT_OK(write_one(s, "t", &ls, T0 + i * HOUR_NS, &h.l, 1, NULL));
    atomic_int stop = 0;
    reader_job_t jobs[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        jobs[i] = (reader_job_t){.s = s, .stop = &stop};
        pthread_create(&th[i], NULL, reader_main, &jobs[i]);
    }
    for (int i = 0; i < 40; i++)
        LC_ASSERT_OK(write_one(s, "t", &ls, T0 + (i % 5) * HOUR_NS + i, &h.l, 1, NULL));
    size_t dropped;
    LC_ASSERT_OK(lc_store_retention(s, T0 + 5 * HOUR_NS, &dropped)); /* hours 0 and 1 */
    LC_ASSERT_EQ(dropped, 2);
    for (int i = 0; i < 20; i++)
        LC_ASSERT_OK(write_one(s, "t", &ls, T0 + 3 * HOUR_NS + i, &h.l, 1, NULL));
    atomic_store(&stop, 1);
    int reads = 0;
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        LC_ASSERT_EQ(jobs[i].errors, 0);
        reads += jobs[i].reads;
    }
    LC_CHECK(reads > 0);
    lc_block_info_t info = block_info_at(s, T0 + 3 * HOUR_NS);
    LC_ASSERT_EQ(info.profiles, 1 + 8 + 20);
    lc_labels_fini(&ls);
    lc_arena_free(h.l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

/* ---------------------------------------------------------------- sample decoding */

static int iter_all(const uint8_t *d, size_t len, uint32_t *last_node, int64_t *sum)
{
    lc_stored_profile_t p = {._data = d, ._len = len};
    lc_sample_iter_t it;
    uint32_t node;
    int64_t v;
    uint64_t span;
    int rc;
    *sum = 0;
    lc_sample_iter_init(&it, &p);
    while ((rc = lc_sample_iter_next(&it, &node, &v, &span)) == 1) {
        *last_node = node;
        *sum += v;
    }
    return rc;
}

static void test_sample_iter_rejects_corrupt(void)
{
    uint32_t node = 0;
    int64_t sum;
    /* flags 0; (node +3, value 5 zigzag=10); (node +0x80 as 2 bytes, value -1 zigzag=1) */
    const uint8_t ok[] = {0, 3, 10, 0x80, 0x01, 1};
    LC_ASSERT_EQ(iter_all(ok, sizeof(ok), &node, &sum), 0);
    LC_ASSERT_EQ(node, 3 + 128);
    LC_ASSERT_EQ(sum, 4);
    LC_ASSERT_EQ(iter_all(ok, 5, &node, &sum), LC_ECORRUPT); /* value cut off */
    const uint8_t bad_flags[] = {0x40, 1, 2};
    LC_ASSERT_EQ(iter_all(bad_flags, sizeof(bad_flags), &node, &sum), LC_ECORRUPT);
    const uint8_t overflow[] = {0, 0xff, 0xff, 0xff, 0xff, 0x0f, 2, 1, 2};
    LC_ASSERT_EQ(iter_all(overflow, sizeof(overflow), &node, &sum), LC_ECORRUPT);
    const uint8_t spans[] = {1, 1, 2, 0x2a, 0, 4, 0}; /* two samples on node 1 */
    LC_ASSERT_EQ(iter_all(spans, sizeof(spans), &node, &sum), 0);
    LC_ASSERT_EQ(sum, 3);
    LC_ASSERT_EQ(iter_all(spans, 0, &node, &sum), LC_ECORRUPT); /* no flags at all */
}

/* ---------------------------------------------------------------- profile ids */

/* One file written four times into one series: without an id, with id A
 * (and span ids), with id B, with id A again. Read back after the store was
 * closed and opened again: each profile keeps its own id (or none), and its
 * samples decode as before (the id sits between flags and samples). */
static void test_profile_id_round_trip(void)
{
    static const char *file = "pyroscope-single_group_with_optional_span_id.pb.gz";
    const uint8_t id_a[LC_STORE_PROFILE_ID_BYTES] = {0x6f, 0x2e, 0x49, 0xdd, 0xf2, 0xb1,
                                                     0x4b, 0xf8, 0x82, 0x1b, 0xa1, 0xcc,
                                                     0x9f, 0x07, 0x0a, 0xff};
    uint8_t id_b[LC_STORE_PROFILE_ID_BYTES];
    for (size_t i = 0; i < sizeof(id_b); i++)
        id_b[i] = (uint8_t)(0x80 | i); /* every byte a varint continuation byte */
    const uint8_t *ids[] = {NULL, id_a, id_b, id_a};
    loaded_t l = load_pprof(file);
    size_t n_spans;
    uint64_t *spans = spans_of(&l, &n_spans);
    LC_CHECK(n_spans > 0);
    const char *dir = tmp_dir();
    lc_store_t *s = store_open(dir);
    lc_labels_t ls;
    labels_of(&ls, "ids", "cpu");
    lc_store_txn_t *txn;
    LC_ASSERT_OK(lc_store_write_begin(s, &txn));
    for (size_t i = 0; i < 4; i++) {
        lc_store_write_t w = {.tenant = "real",
                              .labels = &ls,
                              .time_ns = T0 + (int64_t)i,
                              .profile = l.p,
                              .index = l.ix,
                              .value_index = 1,
                              .span_ids = i == 1 ? spans : NULL,
                              .profile_id = ids[i]};
        LC_ASSERT_OK(lc_store_write_profile(txn, &w));
    }
    LC_ASSERT_OK(lc_store_write_commit(txn));
    lc_store_close(s);

    s = store_open(dir);
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0 + 3, &r));
    lc_block_t *b = lc_store_reader_block(r, 0);
    found_t f = find_series(b, "real", "{service_name=\"ids\"}");
    LC_ASSERT_EQ(f.n, 1);
    profs_t ps = profiles_of(b, f.ids[0], T0, T0 + 3);
    LC_ASSERT_EQ(ps.n, 4);
    int64_t want_total = manifest_total(file, "cpu");
    LC_CHECK(want_total > 0);
    for (size_t i = 0; i < ps.n; i++) {
        LC_ASSERT_EQ(ps.v[i].time_ns, T0 + (int64_t)i);
        LC_ASSERT_EQ(ps.v[i].has_profile_id, ids[i] != NULL);
        if (ids[i])
            LC_CHECK(memcmp(ps.v[i].profile_id, ids[i], LC_STORE_PROFILE_ID_BYTES) == 0);
        LC_ASSERT_EQ(ps.v[i].total, want_total);
        int64_t sum;
        sums_t want = pprof_sums(&l, 1, i == 1 ? spans : NULL),
               got = stored_sums(b, &ps.v[i], &sum);
        LC_ASSERT_EQ(sum, want_total);
        sums_expect_equal(&want, &got);
    }
    profs_free(&ps);
    lc_store_read_end(r);
    lc_labels_fini(&ls);
    free(spans);
    lc_arena_free(l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

/* Hand-encoded values: flag 2 puts 16 id bytes before the samples (with or
 * without span ids); an id cut short is corrupt; a value without the flag
 * (every block written before it existed) reads as it always did. */
static void test_sample_iter_profile_id(void)
{
    uint32_t node = 0;
    int64_t sum;
    uint8_t v[64];
    size_t n = 0;
    v[n++] = 2; /* flags: profile id */
    for (size_t i = 0; i < 16; i++)
        v[n++] = 0xff; /* would be a bad varint if read as samples */
    v[n++] = 3;
    v[n++] = 10; /* node 3, value 5 */
    LC_ASSERT_EQ(iter_all(v, n, &node, &sum), 0);
    LC_ASSERT_EQ(node, 3);
    LC_ASSERT_EQ(sum, 5);
    LC_ASSERT_EQ(iter_all(v, 10, &node, &sum), LC_ECORRUPT); /* id cut short */
    v[0] = 3;                                                /* profile id and span ids */
    v[n++] = 0x2a;                                           /* the sample's span id */
    LC_ASSERT_EQ(iter_all(v, n, &node, &sum), 0);
    LC_ASSERT_EQ(sum, 5);
    const uint8_t old[] = {1, 3, 10, 0x2a}; /* spans only: no id to skip */
    node = 0;
    LC_ASSERT_EQ(iter_all(old, sizeof(old), &node, &sum), 0);
    LC_ASSERT_EQ(node, 3);
    LC_ASSERT_EQ(sum, 5);
    const uint8_t unknown[] = {4, 3, 10}; /* a flag no writer sets */
    LC_ASSERT_EQ(iter_all(unknown, sizeof(unknown), &node, &sum), LC_ECORRUPT);
}

/* ---------------------------------------------------------------- timing (printed) */

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Wall and CPU seconds: the machine may be shared, CPU time is steadier. */
typedef struct stopwatch_s {
    double wall, cpu;
} stopwatch_t;

static stopwatch_t sw_start(void)
{
    return (stopwatch_t){clock_s(CLOCK_MONOTONIC), clock_s(CLOCK_PROCESS_CPUTIME_ID)};
}

static stopwatch_t sw_lap(stopwatch_t from)
{
    stopwatch_t now = sw_start();
    return (stopwatch_t){now.wall - from.wall, now.cpu - from.cpu};
}

typedef struct merge_s {
    int64_t *by_node;
    uint32_t n_nodes;
    uint64_t samples;
    int rc;
} merge_t;

/* The hot path as a querier would run it: sum values into a dense array. */
static int merge_cb(lc_block_t *b, const lc_stored_profile_t *p, void *data)
{
    (void)b;
    merge_t *m = data;
    lc_sample_iter_t it;
    uint32_t node;
    int64_t v;
    int rc;
    lc_sample_iter_init(&it, p);
    while ((rc = lc_sample_iter_next(&it, &node, &v, NULL)) == 1) {
        if (node >= m->n_nodes)
            return LC_ECORRUPT;
        m->by_node[node] += v;
        m->samples++;
    }
    return rc;
}

static void test_timing_large_cpu_x100(void)
{
    loaded_t l = load_pprof("gopprof-large.cpu");
    lc_store_t *s = store_open(tmp_dir());
    lc_labels_t ls;
    labels_of(&ls, "bench", "cpu");
    enum { N = 100 };
    stopwatch_t t0 = sw_start(), first = {0};
    for (int i = 0; i < N; i++) {
        LC_ASSERT_OK(write_one(s, "t", &ls, T0 + i * 1000000000LL, &l, 1, NULL));
        if (i == 0)
            first = sw_lap(t0);
    }
    stopwatch_t w = sw_lap(t0);

    t0 = sw_start();
    lc_store_reader_t *r;
    LC_ASSERT_OK(lc_store_read_begin(s, T0, T0 + HOUR_NS - 1, &r));
    lc_block_t *b = lc_store_reader_block(r, 0);
    merge_t m = {.n_nodes = lc_block_node_count(b)};
    m.by_node = calloc(m.n_nodes, sizeof(int64_t));
    uint32_t *parents = malloc(m.n_nodes * sizeof(uint32_t));
    stopwatch_t t1 = sw_start();
    LC_ASSERT_OK(lc_block_nodes(b, parents, NULL, m.n_nodes));
    stopwatch_t nodes = sw_lap(t1);
    LC_ASSERT_OK(lc_block_profiles(b, 1, T0, T0 + HOUR_NS, merge_cb, &m));
    /* One reverse pass turns self values into totals (children > parents). */
    for (uint32_t i = m.n_nodes - 1; i > 0; i--)
        m.by_node[parents[i]] += m.by_node[i];
    stopwatch_t rd = sw_lap(t0);
    LC_ASSERT_EQ(m.by_node[0], N * manifest_total("gopprof-large.cpu", "cpu"));
    lc_block_info_t info;
    LC_ASSERT_OK(lc_block_info(b, &info));
    printf("store timing: gopprof-large.cpu (%zu samples, 499787 frames) x%d, one commit each: "
           "write %.3f s wall / %.3f s cpu = %.1f ms cpu per profile (first %.1f ms); "
           "read+merge %.3f s wall / %.3f s cpu for %llu samples = %.0f M samples/s cpu; "
           "lc_block_nodes(%u) %.2f ms; block %.1f MiB\n",
           l.p->n_sample, N, w.wall, w.cpu, w.cpu * 1e3 / N, first.cpu * 1e3, rd.wall, rd.cpu,
           (unsigned long long)m.samples, (double)m.samples / rd.cpu / 1e6, m.n_nodes,
           nodes.wall * 1e3, (double)info.bytes / (1 << 20));
    free(parents);
    free(m.by_node);
    lc_store_read_end(r);
    lc_labels_fini(&ls);
    lc_arena_free(l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

/* Four series per heap pprof: pinning resolves its stacks once, not four times. */
static void test_timing_heap_pinned_vs_not(void)
{
    loaded_t l = load_pprof("pyroscope-heap");
    enum { N = 20 };
    double cpu[2];
    for (int pin = 0; pin < 2; pin++) {
        lc_store_t *s = store_open(tmp_dir());
        write_types(s, "warm", T0, &l, NULL, pin); /* symbols and tree exist: steady state */
        stopwatch_t t0 = sw_start();
        for (int i = 1; i <= N; i++)
            write_types(s, "heap", T0 + i * 1000000000LL, &l, NULL, pin);
        cpu[pin] = sw_lap(t0).cpu;
        lc_store_close(s);
        tmp_cleanup();
    }
    printf("store timing: pyroscope-heap (%zu samples, 4 types) x%d: %.2f ms cpu per pprof "
           "unpinned, %.2f ms pinned (%.0f k samples/s per core pinned)\n",
           l.p->n_sample, N, cpu[0] * 1e3 / N, cpu[1] * 1e3 / N,
           (double)l.p->n_sample * N / cpu[1] / 1e3);
    LC_CHECK(cpu[1] > 0);
    lc_arena_free(l.arena);
}

/* B1-like ingest: a small Go CPU pprof from 1,000 series (both sample types,
 * pinned), 100 pprofs per batch, durable commits. */
static void test_timing_small_cpu_batches(void)
{
    loaded_t l = load_pprof("pyroscope-go.cpu.labels.pprof");
    lc_store_t *s = store_open(tmp_dir());
    enum { N = 2000, BATCH = 100 };
    stopwatch_t t0 = sw_start();
    for (int i = 0; i < N; i += BATCH) {
        lc_store_txn_t *txn;
        LC_ASSERT_OK(lc_store_write_begin(s, &txn));
        for (int k = i; k < i + BATCH; k++) {
            char pod[32];
            snprintf(pod, sizeof(pod), "pod-%d", k % 1000);
            lc_store_write_pin(txn, l.p, l.ix);
            for (size_t vi = 0; vi < 2; vi++) {
                lc_labels_t ls;
                labels_of(&ls, "svc", type_name(&l, vi));
                lc_labels_add(&ls, "pod", pod);
                lc_labels_sort(&ls);
                lc_store_write_t w = {.tenant = "t",
                                      .labels = &ls,
                                      .time_ns = T0 + k * 1000000LL,
                                      .profile = l.p,
                                      .index = l.ix,
                                      .value_index = vi};
                LC_ASSERT_OK(lc_store_write_profile(txn, &w));
                lc_labels_fini(&ls);
            }
            lc_store_write_unpin(txn);
        }
        LC_ASSERT_OK(lc_store_write_commit(txn));
    }
    stopwatch_t w = sw_lap(t0);
    lc_block_info_t info = block_info_at(s, T0);
    LC_ASSERT_EQ(info.profiles, 2 * N);
    LC_ASSERT_EQ(info.series, 2 * 1000);
    printf("store timing: pyroscope-go.cpu.labels.pprof (%zu samples, 2 types) x%d from 1000 "
           "pods, %d per commit: %.0f pprofs/s wall, %.0f pprofs/s per cpu second "
           "(%.0f k samples/s per core)\n",
           l.p->n_sample, N, BATCH, N / w.wall, N / w.cpu, N * (double)l.p->n_sample / w.cpu / 1e3);
    lc_arena_free(l.arena);
    lc_store_close(s);
    tmp_cleanup();
}

LC_TEST_MAIN(test_hand_stacks_render_back, test_default_open_cap_follows_nofile,
             test_hand_symbols_read_back, test_hand_second_type_and_info, test_real_heap_four_types,
             test_real_heap_pinned, test_pinned_sample_subsets, test_real_large_cpu,
             test_real_gzip_truncated, test_real_java, test_real_span_ids,
             test_dedup_same_profile_twice, test_restart_keeps_data_and_ids,
             test_abort_leaves_nothing, test_stack_cache_profile_after_profile, test_applied_ids,
             test_forget_by_delivery, test_selectors_and_tenants, test_blocks_and_time_ranges,
             test_negative_times, test_retention_drops_old_blocks,
             test_map_full_is_an_error_and_recoverable, test_concurrent_readers_writer_retention,
             test_drop_block_and_reader_add, test_floor_and_read_from, test_floor_races_writer,
             test_sample_iter_rejects_corrupt, test_profile_id_round_trip,
             test_sample_iter_profile_id, test_timing_large_cpu_x100,
             test_timing_heap_pinned_vs_not, test_timing_small_cpu_batches)
