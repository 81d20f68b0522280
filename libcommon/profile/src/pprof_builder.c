/*
 * pprof_builder.c — assembles a valid pprof from parts, de-duplicating
 * strings, functions, mappings, locations and samples as they arrive.
 *
 * Each kind of element lives in a growable array (its id is index + 1, string
 * 0 is "") with an open-addressing hash map from content to index beside it.
 * Variable-length parts (location lines, sample stacks, labels, values) are
 * kept in flat side arrays addressed by offset, so adding an element costs one
 * hash probe and a few appends, and merged query output with tens of
 * thousands of locations stays cheap. Encoding points protobuf-c structs at
 * these arrays rather than copying them.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/gz.h"
#include "lc/pprof.h"

/* Entries are addressed by uint32 in the hash maps; stay well below that. */
#define BUILDER_MAX_ENTRIES (UINT32_MAX / 2)

/* ---------------------------------------------------------------- hash map */

/* Linear probing over slots packing (hash32 << 32) | (index + 1); 0 is empty.
 * Keeping the hash in the slot makes growing free of rehashing and rejects
 * most non-matching slots without touching the entries. */
typedef struct bmap_s {
    uint64_t *slots;
    size_t cap; /* power of two */
    size_t n;
} bmap_t;

typedef struct lc_pprof_builder_s builder_t;
typedef bool (*bmap_eq_fn)(const builder_t *b, uint32_t index, const void *key);

static void bmap_fini(bmap_t *m)
{
    lc_free(m->slots);
    memset(m, 0, sizeof(*m));
}

static void bmap_place(uint64_t *slots, size_t cap, uint64_t slot)
{
    size_t mask = cap - 1;
    size_t i = (uint32_t)(slot >> 32) & mask;
    while (slots[i])
        i = (i + 1) & mask;
    slots[i] = slot;
}

/* Keeps the load factor under 3/4 so probe runs stay short. */
static void bmap_reserve_one(bmap_t *m)
{
    if ((m->n + 1) * 4 <= m->cap * 3)
        return;
    size_t cap = m->cap ? m->cap * 2 : 64;
    uint64_t *slots = lc_xcalloc(cap, sizeof(*slots));
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i])
            bmap_place(slots, cap, m->slots[i]);
    lc_free(m->slots);
    m->slots = slots;
    m->cap = cap;
}

/* Returns the index of an entry equal to key, or inserts `next_index` under
 * the key's hash and returns it (the caller then appends that entry). */
static uint32_t bmap_intern(bmap_t *m, uint64_t hash, bmap_eq_fn eq, const builder_t *b,
                            const void *key, uint32_t next_index)
{
    bmap_reserve_one(m);
    uint32_t h = (uint32_t)(hash >> 32) ^ (uint32_t)hash;
    size_t mask = m->cap - 1;
    size_t i = h & mask;
    for (; m->slots[i]; i = (i + 1) & mask) {
        uint64_t s = m->slots[i];
        if ((uint32_t)(s >> 32) == h && eq(b, (uint32_t)s - 1, key))
            return (uint32_t)s - 1;
    }
    m->slots[i] = (uint64_t)h << 32 | ((uint64_t)next_index + 1);
    m->n++;
    return next_index;
}

/* Word-at-a-time hashing for the integer keys (functions, locations, samples). */
static uint64_t hash_word(uint64_t h, uint64_t w)
{
    h ^= w + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdULL;
}

static uint64_t hash_words(uint64_t h, const uint64_t *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = hash_word(h, w[i]);
    return h;
}

static uint64_t hash_finish(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

/* Strings too are hashed a word at a time: symbol names are long, and the
 * maps live only in memory, so byte order and stability do not matter. */
static uint64_t hash_bytes(const char *s, size_t len)
{
    uint64_t h = hash_word(4, len);
    for (; len >= 8; s += 8, len -= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = hash_word(h, w);
    }
    uint64_t tail = 0;
    memcpy(&tail, s, len);
    return hash_finish(hash_word(h, tail));
}

/* ---------------------------------------------------------------- builder state */

typedef struct bstr_s {
    char *s; /* NUL-terminated, in the builder's arena */
    size_t len;
} bstr_t;

typedef struct bfunc_s {
    int64_t name, system_name, filename, start_line;
} bfunc_t;

typedef struct bmapping_s {
    uint64_t memory_start, memory_limit, file_offset;
    int64_t filename, build_id;
    uint64_t has_functions; /* a word, so the whole struct hashes as words */
} bmapping_t;

typedef struct bloc_s {
    uint64_t mapping_id, address;
    size_t line_off, n_lines; /* into b->lines */
} bloc_t;

typedef struct bsample_s {
    size_t loc_off, n_locs;     /* into b->stack_ids */
    size_t label_off, n_labels; /* pairs into b->label_idx */
} bsample_t;

/* A growable array: data, count, capacity. */
#define BARRAY(type)                                                                               \
    struct {                                                                                       \
        type *v;                                                                                   \
        size_t n, cap;                                                                             \
    }
#define BARRAY_PUSH(arr, value)                                                                    \
    do {                                                                                           \
        (arr).v = lc_xgrow((arr).v, &(arr).cap, (arr).n + 1, sizeof(*(arr).v));                    \
        (arr).v[(arr).n++] = (value);                                                              \
    } while (0)

struct lc_pprof_builder_s {
    int err;           /* sticky: reported by encode */
    bool sum_wrapped;  /* a repeated sample's sum wrapped (lc_pprof_builder_sum_wrapped) */
    lc_arena_t *bytes; /* string bytes */
    BARRAY(bstr_t) strs;
    BARRAY(bfunc_t) funcs;
    BARRAY(bmapping_t) maps;
    BARRAY(bloc_t) locs;
    BARRAY(lc_pprof_line_t) lines;
    BARRAY(bsample_t) samples;
    BARRAY(uint64_t) stack_ids;
    BARRAY(int64_t) label_idx; /* (key, value) string index pairs */
    BARRAY(int64_t) values;    /* n_types per sample */
    BARRAY(int64_t) types;     /* (type, unit) string index pairs */
    BARRAY(int64_t) scratch;   /* label pairs of the sample being added */
    bmap_t str_map, func_map, map_map, loc_map, sample_map;
    int64_t period_type, period_unit, period;
    bool has_period;
    int64_t time_nanos, duration_nanos;
};

/* Any table about to pass the cap poisons the builder instead of growing. */
static bool builder_full(builder_t *b, size_t n)
{
    if (n < BUILDER_MAX_ENTRIES)
        return false;
    b->err = LC_ETOOBIG;
    return true;
}

lc_pprof_builder_t *lc_pprof_builder_new(void)
{
    builder_t *b = lc_xcalloc(1, sizeof(*b));
    b->bytes = lc_arena_new(SIZE_MAX);
    (void)lc_pprof_builder_string(b, "", 0);
    return b;
}

void lc_pprof_builder_free(lc_pprof_builder_t *b)
{
    if (!b)
        return;
    lc_arena_free(b->bytes);
    lc_free(b->strs.v);
    lc_free(b->funcs.v);
    lc_free(b->maps.v);
    lc_free(b->locs.v);
    lc_free(b->lines.v);
    lc_free(b->samples.v);
    lc_free(b->stack_ids.v);
    lc_free(b->label_idx.v);
    lc_free(b->values.v);
    lc_free(b->types.v);
    lc_free(b->scratch.v);
    bmap_fini(&b->str_map);
    bmap_fini(&b->func_map);
    bmap_fini(&b->map_map);
    bmap_fini(&b->loc_map);
    bmap_fini(&b->sample_map);
    lc_free(b);
}

/* ---------------------------------------------------------------- strings */

typedef struct str_key_s {
    const char *s;
    size_t len;
} str_key_t;

static bool str_eq(const builder_t *b, uint32_t i, const void *key)
{
    const str_key_t *k = key;
    return b->strs.v[i].len == k->len && memcmp(b->strs.v[i].s, k->s, k->len) == 0;
}

int64_t lc_pprof_builder_string(lc_pprof_builder_t *b, const char *s, size_t len)
{
    if (!s) {
        s = "";
        len = 0;
    }
    /* The string table holds C strings: anything after a NUL would be lost
     * on the wire, so cut there now and keep de-duplication exact. */
    const char *nul = memchr(s, '\0', len);
    if (nul)
        len = (size_t)(nul - s);
    if (builder_full(b, b->strs.n))
        return 0;
    str_key_t key = {s, len};
    uint32_t next = (uint32_t)b->strs.n;
    uint32_t i = bmap_intern(&b->str_map, hash_bytes(s, len), str_eq, b, &key, next);
    if (i == next) {
        bstr_t e = {lc_arena_strndup(b->bytes, s, len), len};
        BARRAY_PUSH(b->strs, e);
    }
    return (int64_t)i;
}

static int64_t builder_cstr(builder_t *b, const char *s)
{
    return lc_pprof_builder_string(b, s, s ? strlen(s) : 0);
}

/* ---------------------------------------------------------------- functions, mappings */

static bool func_eq(const builder_t *b, uint32_t i, const void *key)
{
    return memcmp(&b->funcs.v[i], key, sizeof(bfunc_t)) == 0;
}

uint64_t lc_pprof_builder_function(lc_pprof_builder_t *b, const char *name, const char *system_name,
                                   const char *filename, int64_t start_line)
{
    bfunc_t f = {builder_cstr(b, name), builder_cstr(b, system_name), builder_cstr(b, filename),
                 start_line};
    if (builder_full(b, b->funcs.n))
        return 0;
    uint64_t h = hash_finish(hash_words(0, (const uint64_t *)&f, sizeof(f) / 8));
    uint32_t next = (uint32_t)b->funcs.n;
    uint32_t i = bmap_intern(&b->func_map, h, func_eq, b, &f, next);
    if (i == next)
        BARRAY_PUSH(b->funcs, f);
    return (uint64_t)i + 1;
}

static bool mapping_eq(const builder_t *b, uint32_t i, const void *key)
{
    return memcmp(&b->maps.v[i], key, sizeof(bmapping_t)) == 0;
}

uint64_t lc_pprof_builder_mapping(lc_pprof_builder_t *b, uint64_t memory_start,
                                  uint64_t memory_limit, uint64_t file_offset, const char *filename,
                                  const char *build_id, bool has_functions)
{
    bmapping_t m = {memory_start,
                    memory_limit,
                    file_offset,
                    builder_cstr(b, filename),
                    builder_cstr(b, build_id),
                    has_functions};
    if (builder_full(b, b->maps.n))
        return 0;
    uint64_t h = hash_finish(hash_words(1, (const uint64_t *)&m, sizeof(m) / 8));
    uint32_t next = (uint32_t)b->maps.n;
    uint32_t i = bmap_intern(&b->map_map, h, mapping_eq, b, &m, next);
    if (i == next)
        BARRAY_PUSH(b->maps, m);
    return (uint64_t)i + 1;
}

/* ---------------------------------------------------------------- locations */

typedef struct loc_key_s {
    uint64_t mapping_id, address;
    const lc_pprof_line_t *lines;
    size_t n_lines;
} loc_key_t;

static bool loc_eq(const builder_t *b, uint32_t i, const void *key)
{
    const loc_key_t *k = key;
    const bloc_t *l = &b->locs.v[i];
    if (l->mapping_id != k->mapping_id || l->address != k->address || l->n_lines != k->n_lines)
        return false;
    for (size_t j = 0; j < k->n_lines; j++) {
        const lc_pprof_line_t *x = &b->lines.v[l->line_off + j], *y = &k->lines[j];
        if (x->function_id != y->function_id || x->line != y->line)
            return false;
    }
    return true;
}

static uint64_t loc_hash(const loc_key_t *k)
{
    uint64_t h = hash_word(hash_word(2, k->mapping_id), k->address);
    for (size_t j = 0; j < k->n_lines; j++)
        h = hash_word(hash_word(h, k->lines[j].function_id), (uint64_t)k->lines[j].line);
    return hash_finish(h ^ k->n_lines);
}

uint64_t lc_pprof_builder_location(lc_pprof_builder_t *b, uint64_t mapping_id, uint64_t address,
                                   const lc_pprof_line_t *lines, size_t n_lines)
{
    if (builder_full(b, b->locs.n))
        return 0;
    loc_key_t key = {mapping_id, address, lines, n_lines};
    uint32_t next = (uint32_t)b->locs.n;
    uint32_t i = bmap_intern(&b->loc_map, loc_hash(&key), loc_eq, b, &key, next);
    if (i != next)
        return (uint64_t)i + 1;
    bloc_t loc = {mapping_id, address, b->lines.n, n_lines};
    for (size_t j = 0; j < n_lines; j++)
        BARRAY_PUSH(b->lines, lines[j]);
    BARRAY_PUSH(b->locs, loc);
    return (uint64_t)i + 1;
}

/* ---------------------------------------------------------------- profile-level fields */

size_t lc_pprof_builder_sample_type(lc_pprof_builder_t *b, const char *type, const char *unit)
{
    /* Values are stored n_types wide; changing the width under existing
     * samples would misalign them all. */
    if (b->samples.n > 0) {
        b->err = LC_EINPUT;
        return b->types.n / 2;
    }
    BARRAY_PUSH(b->types, builder_cstr(b, type));
    BARRAY_PUSH(b->types, builder_cstr(b, unit));
    return b->types.n / 2 - 1;
}

void lc_pprof_builder_period(lc_pprof_builder_t *b, const char *type, const char *unit,
                             int64_t period)
{
    b->period_type = builder_cstr(b, type);
    b->period_unit = builder_cstr(b, unit);
    b->period = period;
    b->has_period = true;
}

void lc_pprof_builder_times(lc_pprof_builder_t *b, int64_t time_nanos, int64_t duration_nanos)
{
    b->time_nanos = time_nanos;
    b->duration_nanos = duration_nanos;
}

/* ---------------------------------------------------------------- samples */

typedef struct sample_key_s {
    const uint64_t *locs;
    size_t n_locs;
    const int64_t *labels; /* pairs */
    size_t n_labels;
} sample_key_t;

static bool sample_eq(const builder_t *b, uint32_t i, const void *key)
{
    const sample_key_t *k = key;
    const bsample_t *s = &b->samples.v[i];
    if (s->n_locs != k->n_locs || s->n_labels != k->n_labels)
        return false;
    if (k->n_locs && memcmp(&b->stack_ids.v[s->loc_off], k->locs, k->n_locs * 8) != 0)
        return false;
    return !k->n_labels ||
           memcmp(&b->label_idx.v[s->label_off], k->labels, k->n_labels * 2 * 8) == 0;
}

static uint64_t sample_hash(const sample_key_t *k)
{
    uint64_t h = hash_words(3, k->locs, k->n_locs);
    h = hash_words(hash_word(h, k->n_locs), (const uint64_t *)k->labels, k->n_labels * 2);
    return hash_finish(h ^ k->n_labels);
}

static int label_pair_cmp(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

/* Interns the labels into b->scratch, sorted so that the same set given in
 * another order de-duplicates to the same sample. */
static void sample_labels_to_scratch(builder_t *b, const char *const *label_kv, size_t n_labels)
{
    b->scratch.n = 0;
    for (size_t i = 0; i < n_labels; i++) {
        BARRAY_PUSH(b->scratch, builder_cstr(b, label_kv[2 * i]));
        BARRAY_PUSH(b->scratch, builder_cstr(b, label_kv[2 * i + 1]));
    }
    if (n_labels > 1)
        qsort(b->scratch.v, n_labels, 2 * sizeof(int64_t), label_pair_cmp);
}

/* Wrapping addition, as Go's pprof merge does: no undefined overflow. */
static int64_t add_wrapping(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static void sample_append(builder_t *b, const sample_key_t *k, const int64_t *values)
{
    bsample_t s = {b->stack_ids.n, k->n_locs, b->label_idx.n / 2, k->n_labels};
    for (size_t i = 0; i < k->n_locs; i++)
        BARRAY_PUSH(b->stack_ids, k->locs[i]);
    for (size_t i = 0; i < 2 * k->n_labels; i++)
        BARRAY_PUSH(b->label_idx, k->labels[i]);
    for (size_t i = 0; i < b->types.n / 2; i++)
        BARRAY_PUSH(b->values, values[i]);
    BARRAY_PUSH(b->samples, s);
}

void lc_pprof_builder_sample(lc_pprof_builder_t *b, const uint64_t *location_ids,
                             size_t n_locations, const int64_t *values, const char *const *label_kv,
                             size_t n_labels)
{
    if (builder_full(b, b->samples.n))
        return;
    sample_labels_to_scratch(b, label_kv, label_kv ? n_labels : 0);
    sample_key_t key = {location_ids, n_locations, b->scratch.v, b->scratch.n / 2};
    uint32_t next = (uint32_t)b->samples.n;
    uint32_t i = bmap_intern(&b->sample_map, sample_hash(&key), sample_eq, b, &key, next);
    if (i == next) {
        sample_append(b, &key, values);
        return;
    }
    size_t width = b->types.n / 2;
    int64_t *sum = &b->values.v[(size_t)i * width];
    for (size_t t = 0; t < width; t++) {
        int64_t ignored;
        b->sum_wrapped |= __builtin_add_overflow(sum[t], values[t], &ignored);
        sum[t] = add_wrapping(sum[t], values[t]);
    }
}

bool lc_pprof_builder_sum_wrapped(const lc_pprof_builder_t *b)
{
    return b->sum_wrapped;
}

/* ---------------------------------------------------------------- encoding */

/* protobuf-c wants arrays of pointers to messages; this allocates the
 * messages in one block and the pointer array beside it. */
static void **msg_array(lc_arena_t *a, size_t n, size_t size, void *(*init)(void *))
{
    void **ptrs = lc_arena_calloc(a, n ? n : 1, sizeof(void *));
    char *block = lc_arena_calloc(a, n ? n : 1, size);
    if (!ptrs || !block)
        return NULL;
    for (size_t i = 0; i < n; i++)
        ptrs[i] = init(block + i * size);
    return ptrs;
}

static void *init_value_type(void *m)
{
    google__v1__value_type__init(m);
    return m;
}

static void *init_sample(void *m)
{
    google__v1__sample__init(m);
    return m;
}

static void *init_label(void *m)
{
    google__v1__label__init(m);
    return m;
}

static void *init_mapping(void *m)
{
    google__v1__mapping__init(m);
    return m;
}

static void *init_location(void *m)
{
    google__v1__location__init(m);
    return m;
}

static void *init_line(void *m)
{
    google__v1__line__init(m);
    return m;
}

static void *init_function(void *m)
{
    google__v1__function__init(m);
    return m;
}

static int emit_value_types(builder_t *b, lc_pprof_t *p, lc_arena_t *a)
{
    p->n_sample_type = b->types.n / 2;
    p->sample_type = (Google__V1__ValueType **)msg_array(
        a, p->n_sample_type, sizeof(Google__V1__ValueType), init_value_type);
    if (!p->sample_type)
        return LC_ETOOBIG;
    for (size_t i = 0; i < p->n_sample_type; i++) {
        p->sample_type[i]->type = b->types.v[2 * i];
        p->sample_type[i]->unit = b->types.v[2 * i + 1];
    }
    if (b->has_period) {
        void *vt = lc_arena_alloc(a, sizeof(Google__V1__ValueType));
        if (!vt)
            return LC_ETOOBIG;
        p->period_type = init_value_type(vt);
        p->period_type->type = b->period_type;
        p->period_type->unit = b->period_unit;
        p->period = b->period;
    }
    return 0;
}

static int emit_sample_labels(builder_t *b, Google__V1__Sample *s, const bsample_t *bs,
                              lc_arena_t *a)
{
    if (!bs->n_labels)
        return 0;
    s->label =
        (Google__V1__Label **)msg_array(a, bs->n_labels, sizeof(Google__V1__Label), init_label);
    if (!s->label)
        return LC_ETOOBIG;
    s->n_label = bs->n_labels;
    for (size_t k = 0; k < bs->n_labels; k++) {
        s->label[k]->key = b->label_idx.v[2 * (bs->label_off + k)];
        s->label[k]->str = b->label_idx.v[2 * (bs->label_off + k) + 1];
    }
    return 0;
}

static int emit_samples(builder_t *b, lc_pprof_t *p, lc_arena_t *a)
{
    size_t width = b->types.n / 2;
    p->n_sample = b->samples.n;
    p->sample =
        (Google__V1__Sample **)msg_array(a, p->n_sample, sizeof(Google__V1__Sample), init_sample);
    if (!p->sample)
        return LC_ETOOBIG;
    for (size_t i = 0; i < p->n_sample; i++) {
        const bsample_t *bs = &b->samples.v[i];
        Google__V1__Sample *s = p->sample[i];
        s->n_location_id = bs->n_locs;
        s->location_id = bs->n_locs ? &b->stack_ids.v[bs->loc_off] : NULL;
        s->n_value = width;
        s->value = width ? &b->values.v[i * width] : NULL;
        if (emit_sample_labels(b, s, bs, a))
            return LC_ETOOBIG;
    }
    return 0;
}

static int emit_mappings(builder_t *b, lc_pprof_t *p, lc_arena_t *a)
{
    p->n_mapping = b->maps.n;
    p->mapping = (Google__V1__Mapping **)msg_array(a, p->n_mapping, sizeof(Google__V1__Mapping),
                                                   init_mapping);
    if (!p->mapping)
        return LC_ETOOBIG;
    for (size_t i = 0; i < p->n_mapping; i++) {
        const bmapping_t *bm = &b->maps.v[i];
        Google__V1__Mapping *m = p->mapping[i];
        m->id = i + 1;
        m->memory_start = bm->memory_start;
        m->memory_limit = bm->memory_limit;
        m->file_offset = bm->file_offset;
        m->filename = bm->filename;
        m->build_id = bm->build_id;
        m->has_functions = bm->has_functions != 0;
    }
    return 0;
}

static int emit_lines(builder_t *b, Google__V1__Location *l, const bloc_t *bl, lc_arena_t *a)
{
    if (!bl->n_lines)
        return 0;
    l->line = (Google__V1__Line **)msg_array(a, bl->n_lines, sizeof(Google__V1__Line), init_line);
    if (!l->line)
        return LC_ETOOBIG;
    l->n_line = bl->n_lines;
    for (size_t k = 0; k < bl->n_lines; k++) {
        l->line[k]->function_id = b->lines.v[bl->line_off + k].function_id;
        l->line[k]->line = b->lines.v[bl->line_off + k].line;
    }
    return 0;
}

static int emit_locations(builder_t *b, lc_pprof_t *p, lc_arena_t *a)
{
    p->n_location = b->locs.n;
    p->location = (Google__V1__Location **)msg_array(a, p->n_location, sizeof(Google__V1__Location),
                                                     init_location);
    if (!p->location)
        return LC_ETOOBIG;
    for (size_t i = 0; i < p->n_location; i++) {
        const bloc_t *bl = &b->locs.v[i];
        p->location[i]->id = i + 1;
        p->location[i]->mapping_id = bl->mapping_id;
        p->location[i]->address = bl->address;
        if (emit_lines(b, p->location[i], bl, a))
            return LC_ETOOBIG;
    }
    return 0;
}

static int emit_functions(builder_t *b, lc_pprof_t *p, lc_arena_t *a)
{
    p->n_function = b->funcs.n;
    p->function = (Google__V1__Function **)msg_array(a, p->n_function, sizeof(Google__V1__Function),
                                                     init_function);
    if (!p->function)
        return LC_ETOOBIG;
    for (size_t i = 0; i < p->n_function; i++) {
        const bfunc_t *bf = &b->funcs.v[i];
        Google__V1__Function *f = p->function[i];
        f->id = i + 1;
        f->name = bf->name;
        f->system_name = bf->system_name;
        f->filename = bf->filename;
        f->start_line = bf->start_line;
    }
    return 0;
}

static int emit_strings(builder_t *b, lc_pprof_t *p, lc_arena_t *a)
{
    p->n_string_table = b->strs.n;
    p->string_table = lc_arena_calloc(a, b->strs.n, sizeof(char *));
    if (!p->string_table)
        return LC_ETOOBIG;
    for (size_t i = 0; i < b->strs.n; i++)
        p->string_table[i] = b->strs.v[i].s;
    return 0;
}

int lc_pprof_builder_encode(lc_pprof_builder_t *b, bool gzip, lc_buf_t *out)
{
    if (b->err)
        return b->err;
    if (b->types.n == 0)
        return LC_EINPUT; /* a pprof without sample types is invalid */
    lc_arena_t *a = lc_arena_new(SIZE_MAX);
    lc_pprof_t p;
    google__v1__profile__init(&p);
    p.time_nanos = b->time_nanos;
    p.duration_nanos = b->duration_nanos;
    int rc = emit_value_types(b, &p, a);
    if (!rc)
        rc = emit_samples(b, &p, a);
    if (!rc)
        rc = emit_mappings(b, &p, a);
    if (!rc)
        rc = emit_locations(b, &p, a);
    if (!rc)
        rc = emit_functions(b, &p, a);
    if (!rc)
        rc = emit_strings(b, &p, a);
    if (!rc)
        rc = lc_pprof_encode(&p, gzip, out);
    lc_arena_free(a);
    return rc;
}
