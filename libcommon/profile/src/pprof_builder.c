/*
 * pprof_builder.c — assembles a valid pprof from parts, de-duplicating
 * strings, functions, mappings, locations and samples as they arrive.
 *
 * Each kind of element lives in a growable array (its id is index + 1, string
 * 0 is "") with an open-addressing hash map from content to index beside it.
 * Variable-length parts (location lines, sample stacks, labels, values) are
 * kept in flat side arrays addressed by offset, so adding an element costs one
 * hash probe and a few appends, and merged query output with tens of
 * thousands of locations stays cheap. Encoding writes the protobuf bytes
 * straight from these arrays (see "encoding" below).
 */
#include <stdlib.h>
#include <string.h>

#include "lc/gz.h"
#include "lc/pprof.h"
#include "pprof_int.h"

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

/* A builder's arrays and maps come from its allocator (malloc's, or the
 * JFR converter's kept blocks: lc_pprof__builder_new_alloc). */
static void *builder_calloc(const builder_t *b, size_t n, size_t size);
static void builder_free(const builder_t *b, void *p);

static void bmap_fini(const builder_t *b, bmap_t *m)
{
    builder_free(b, m->slots);
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
static void bmap_reserve_one(const builder_t *b, bmap_t *m)
{
    if ((m->n + 1) * 4 <= m->cap * 3)
        return;
    size_t cap = m->cap ? m->cap * 2 : 64;
    uint64_t *slots = builder_calloc(b, cap, sizeof(*slots));
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i])
            bmap_place(slots, cap, m->slots[i]);
    builder_free(b, m->slots);
    m->slots = slots;
    m->cap = cap;
}

/* Returns the index of an entry equal to key, or inserts `next_index` under
 * the key's hash and returns it (the caller then appends that entry). */
static uint32_t bmap_intern(bmap_t *m, uint64_t hash, bmap_eq_fn eq, const builder_t *b,
                            const void *key, uint32_t next_index)
{
    bmap_reserve_one(b, m);
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
#define BARRAY_PUSH(b, arr, value)                                                                 \
    do {                                                                                           \
        if ((arr).n + 1 > (arr).cap)                                                               \
            (arr).v = (b)->alloc->grow((arr).v, &(arr).cap, (arr).n + 1, sizeof(*(arr).v));        \
        (arr).v[(arr).n++] = (value);                                                              \
    } while (0)

/* Appends count values from src (same element type) with one growth check. */
#define BARRAY_APPEND(b, arr, src, count)                                                          \
    do {                                                                                           \
        size_t count_ = (count);                                                                   \
        if ((arr).n + count_ > (arr).cap)                                                          \
            (arr).v = (b)->alloc->grow((arr).v, &(arr).cap, (arr).n + count_, sizeof(*(arr).v));   \
        if (count_ > 0)                                                                            \
            memcpy((arr).v + (arr).n, (src), count_ * sizeof(*(arr).v));                           \
        (arr).n += count_;                                                                         \
    } while (0)

struct lc_pprof_builder_s {
    const lc_pprof__alloc_t *alloc;
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

static void *builder_calloc(const builder_t *b, size_t n, size_t size)
{
    return b->alloc->calloc(n, size);
}

static void builder_free(const builder_t *b, void *p)
{
    b->alloc->free(p);
}

static const lc_pprof__alloc_t builder_malloc = {lc_xcalloc, lc_xgrow, lc_free};

lc_pprof_builder_t *lc_pprof__builder_new_alloc(const lc_pprof__alloc_t *a)
{
    builder_t *b = lc_xcalloc(1, sizeof(*b));
    b->alloc = a;
    b->bytes = lc_arena_new(SIZE_MAX);
    (void)lc_pprof_builder_string(b, "", 0);
    return b;
}

lc_pprof_builder_t *lc_pprof_builder_new(void)
{
    return lc_pprof__builder_new_alloc(&builder_malloc);
}

void lc_pprof_builder_free(lc_pprof_builder_t *b)
{
    if (!b)
        return;
    lc_arena_free(b->bytes);
    builder_free(b, b->strs.v);
    builder_free(b, b->funcs.v);
    builder_free(b, b->maps.v);
    builder_free(b, b->locs.v);
    builder_free(b, b->lines.v);
    builder_free(b, b->samples.v);
    builder_free(b, b->stack_ids.v);
    builder_free(b, b->label_idx.v);
    builder_free(b, b->values.v);
    builder_free(b, b->types.v);
    builder_free(b, b->scratch.v);
    bmap_fini(b, &b->str_map);
    bmap_fini(b, &b->func_map);
    bmap_fini(b, &b->map_map);
    bmap_fini(b, &b->loc_map);
    bmap_fini(b, &b->sample_map);
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
    if (len == 0 && b->strs.n)
        return 0; /* interned first by lc_pprof_builder_new; most names' file and system name */
    if (builder_full(b, b->strs.n))
        return 0;
    str_key_t key = {s, len};
    uint32_t next = (uint32_t)b->strs.n;
    uint32_t i = bmap_intern(&b->str_map, hash_bytes(s, len), str_eq, b, &key, next);
    if (i == next) {
        bstr_t e = {lc_arena_strndup(b->bytes, s, len), len};
        BARRAY_PUSH(b, b->strs, e);
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
        BARRAY_PUSH(b, b->funcs, f);
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
        BARRAY_PUSH(b, b->maps, m);
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
        BARRAY_PUSH(b, b->lines, lines[j]);
    BARRAY_PUSH(b, b->locs, loc);
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
    BARRAY_PUSH(b, b->types, builder_cstr(b, type));
    BARRAY_PUSH(b, b->types, builder_cstr(b, unit));
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
           memcmp(&b->label_idx.v[2 * s->label_off], k->labels, k->n_labels * 2 * 8) == 0;
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
        BARRAY_PUSH(b, b->scratch, builder_cstr(b, label_kv[2 * i]));
        BARRAY_PUSH(b, b->scratch, builder_cstr(b, label_kv[2 * i + 1]));
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
    BARRAY_APPEND(b, b->stack_ids, k->locs, k->n_locs);
    BARRAY_APPEND(b, b->label_idx, k->labels, 2 * k->n_labels);
    BARRAY_APPEND(b, b->values, values, b->types.n / 2);
    BARRAY_PUSH(b, b->samples, s);
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

/*
 * The profile is written straight from the builder's tables, in the form
 * protobuf-c packs the same message (profile.proto is proto3: fields in
 * number order, zero scalars left out, repeated scalars packed, repeated
 * messages and strings always written) — without first building protobuf-c's
 * pointer-per-element structs and walking its descriptors twice, which took
 * most of the encoding time of a large profile. Each element's size is
 * computed by the same function in the sizing and the writing pass, so the
 * length prefixes cannot disagree with what follows them. Every field number
 * here is below 16: a tag is one byte.
 */

enum { WT_VARINT = 0, WT_LEN = 2 };

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    for (; v >= 0x80; v >>= 7)
        n++;
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    for (; v >= 0x80; v >>= 7)
        *p++ = (uint8_t)(v | 0x80);
    *p++ = (uint8_t)v;
    return p;
}

static uint8_t *put_tag(uint8_t *p, unsigned field, unsigned wire_type)
{
    *p++ = (uint8_t)(field << 3 | wire_type);
    return p;
}

/* A scalar field: nothing when zero, as proto3 wants. */
static size_t u64_size(uint64_t v)
{
    return v ? 1 + varint_len(v) : 0;
}

static uint8_t *put_varint_field(uint8_t *p, unsigned field, uint64_t v)
{
    return v ? put_varint(put_tag(p, field, WT_VARINT), v) : p;
}

/* A length-delimited field of len bytes, tag and prefix included. */
static size_t len_size(size_t len)
{
    return 1 + varint_len(len) + len;
}

static uint8_t *put_len(uint8_t *p, unsigned field, size_t len)
{
    return put_varint(put_tag(p, field, WT_LEN), len);
}

static size_t packed_payload(const uint64_t *v, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += varint_len(v[i]);
    return len;
}

/* A packed repeated varint field (int64 values as their two's complement). */
static size_t packed_size(const uint64_t *v, size_t n)
{
    return n ? len_size(packed_payload(v, n)) : 0;
}

static uint8_t *put_packed(uint8_t *p, unsigned field, const uint64_t *v, size_t n)
{
    if (!n)
        return p;
    p = put_len(p, field, packed_payload(v, n));
    for (size_t i = 0; i < n; i++)
        p = put_varint(p, v[i]);
    return p;
}

/* ValueType {type = 1, unit = 2} */
static size_t value_type_size(int64_t type, int64_t unit)
{
    return u64_size((uint64_t)type) + u64_size((uint64_t)unit);
}

static uint8_t *put_value_type(uint8_t *p, unsigned field, int64_t type, int64_t unit)
{
    p = put_len(p, field, value_type_size(type, unit));
    return put_varint_field(put_varint_field(p, 1, (uint64_t)type), 2, (uint64_t)unit);
}

/* Label {key = 1, str = 2}: the builder keeps string labels only. */
static size_t label_size(const int64_t *kv)
{
    return u64_size((uint64_t)kv[0]) + u64_size((uint64_t)kv[1]);
}

/* A sample's location ids; NULL when it has none (the array may not exist). */
static const uint64_t *sample_locs(const builder_t *b, const bsample_t *s)
{
    return s->n_locs ? &b->stack_ids.v[s->loc_off] : NULL;
}

/* Sample {location_id = 1 packed, value = 2 packed, label = 3} */
static size_t sample_size(const builder_t *b, size_t i)
{
    const bsample_t *s = &b->samples.v[i];
    size_t width = b->types.n / 2;
    size_t n = packed_size(sample_locs(b, s), s->n_locs) +
               packed_size((const uint64_t *)&b->values.v[i * width], width);
    for (size_t k = 0; k < s->n_labels; k++)
        n += len_size(label_size(&b->label_idx.v[2 * (s->label_off + k)]));
    return n;
}

/* len: sample_size(b, i), kept from the sizing pass (a sample's size is
 * the one that costs: a pass over its stack). */
static uint8_t *put_sample(const builder_t *b, size_t i, size_t len, uint8_t *p)
{
    const bsample_t *s = &b->samples.v[i];
    size_t width = b->types.n / 2;
    p = put_len(p, 2, len);
    p = put_packed(p, 1, sample_locs(b, s), s->n_locs);
    p = put_packed(p, 2, (const uint64_t *)&b->values.v[i * width], width);
    for (size_t k = 0; k < s->n_labels; k++) {
        const int64_t *kv = &b->label_idx.v[2 * (s->label_off + k)];
        p = put_len(p, 3, label_size(kv));
        p = put_varint_field(put_varint_field(p, 1, (uint64_t)kv[0]), 2, (uint64_t)kv[1]);
    }
    return p;
}

/* Mapping {id = 1, memory_start = 2, memory_limit = 3, file_offset = 4,
 * filename = 5, build_id = 6, has_functions = 7} */
static size_t mapping_size(const builder_t *b, size_t i)
{
    const bmapping_t *m = &b->maps.v[i];
    return u64_size(i + 1) + u64_size(m->memory_start) + u64_size(m->memory_limit) +
           u64_size(m->file_offset) + u64_size((uint64_t)m->filename) +
           u64_size((uint64_t)m->build_id) + u64_size(m->has_functions != 0);
}

static uint8_t *put_mapping(const builder_t *b, size_t i, uint8_t *p)
{
    const bmapping_t *m = &b->maps.v[i];
    p = put_len(p, 3, mapping_size(b, i));
    p = put_varint_field(p, 1, i + 1);
    p = put_varint_field(p, 2, m->memory_start);
    p = put_varint_field(p, 3, m->memory_limit);
    p = put_varint_field(p, 4, m->file_offset);
    p = put_varint_field(p, 5, (uint64_t)m->filename);
    p = put_varint_field(p, 6, (uint64_t)m->build_id);
    return put_varint_field(p, 7, m->has_functions != 0);
}

/* Line {function_id = 1, line = 2} */
static size_t line_size(const lc_pprof_line_t *l)
{
    return u64_size(l->function_id) + u64_size((uint64_t)l->line);
}

/* Location {id = 1, mapping_id = 2, address = 3, line = 4} */
static size_t location_size(const builder_t *b, size_t i)
{
    const bloc_t *l = &b->locs.v[i];
    size_t n = u64_size(i + 1) + u64_size(l->mapping_id) + u64_size(l->address);
    for (size_t k = 0; k < l->n_lines; k++)
        n += len_size(line_size(&b->lines.v[l->line_off + k]));
    return n;
}

static uint8_t *put_location_msg(const builder_t *b, size_t i, uint8_t *p)
{
    const bloc_t *l = &b->locs.v[i];
    p = put_len(p, 4, location_size(b, i));
    p = put_varint_field(p, 1, i + 1);
    p = put_varint_field(p, 2, l->mapping_id);
    p = put_varint_field(p, 3, l->address);
    for (size_t k = 0; k < l->n_lines; k++) {
        const lc_pprof_line_t *line = &b->lines.v[l->line_off + k];
        p = put_len(p, 4, line_size(line));
        p = put_varint_field(put_varint_field(p, 1, line->function_id), 2, (uint64_t)line->line);
    }
    return p;
}

/* Function {id = 1, name = 2, system_name = 3, filename = 4, start_line = 5} */
static size_t function_size(const builder_t *b, size_t i)
{
    const bfunc_t *f = &b->funcs.v[i];
    return u64_size(i + 1) + u64_size((uint64_t)f->name) + u64_size((uint64_t)f->system_name) +
           u64_size((uint64_t)f->filename) + u64_size((uint64_t)f->start_line);
}

static uint8_t *put_function(const builder_t *b, size_t i, uint8_t *p)
{
    const bfunc_t *f = &b->funcs.v[i];
    p = put_len(p, 5, function_size(b, i));
    p = put_varint_field(p, 1, i + 1);
    p = put_varint_field(p, 2, (uint64_t)f->name);
    p = put_varint_field(p, 3, (uint64_t)f->system_name);
    p = put_varint_field(p, 4, (uint64_t)f->filename);
    return put_varint_field(p, 5, (uint64_t)f->start_line);
}

/* Profile: sample_type = 1, sample = 2, mapping = 3, location = 4,
 * function = 5, string_table = 6, time_nanos = 9, duration_nanos = 10,
 * period_type = 11, period = 12. */
static size_t profile_size(const builder_t *b, size_t *sample_len)
{
    size_t n = 0;
    for (size_t i = 0; i < b->types.n / 2; i++)
        n += len_size(value_type_size(b->types.v[2 * i], b->types.v[2 * i + 1]));
    for (size_t i = 0; i < b->samples.n; i++)
        n += len_size(sample_len[i] = sample_size(b, i));
    for (size_t i = 0; i < b->maps.n; i++)
        n += len_size(mapping_size(b, i));
    for (size_t i = 0; i < b->locs.n; i++)
        n += len_size(location_size(b, i));
    for (size_t i = 0; i < b->funcs.n; i++)
        n += len_size(function_size(b, i));
    for (size_t i = 0; i < b->strs.n; i++)
        n += len_size(b->strs.v[i].len);
    n += u64_size((uint64_t)b->time_nanos) + u64_size((uint64_t)b->duration_nanos);
    if (b->has_period)
        n += len_size(value_type_size(b->period_type, b->period_unit)) +
             u64_size((uint64_t)b->period);
    return n;
}

static uint8_t *put_profile(const builder_t *b, const size_t *sample_len, uint8_t *p)
{
    for (size_t i = 0; i < b->types.n / 2; i++)
        p = put_value_type(p, 1, b->types.v[2 * i], b->types.v[2 * i + 1]);
    for (size_t i = 0; i < b->samples.n; i++)
        p = put_sample(b, i, sample_len[i], p);
    for (size_t i = 0; i < b->maps.n; i++)
        p = put_mapping(b, i, p);
    for (size_t i = 0; i < b->locs.n; i++)
        p = put_location_msg(b, i, p);
    for (size_t i = 0; i < b->funcs.n; i++)
        p = put_function(b, i, p);
    for (size_t i = 0; i < b->strs.n; i++) {
        p = put_len(p, 6, b->strs.v[i].len);
        if (b->strs.v[i].len)
            memcpy(p, b->strs.v[i].s, b->strs.v[i].len);
        p += b->strs.v[i].len;
    }
    p = put_varint_field(p, 9, (uint64_t)b->time_nanos);
    p = put_varint_field(p, 10, (uint64_t)b->duration_nanos);
    if (b->has_period) {
        p = put_value_type(p, 11, b->period_type, b->period_unit);
        p = put_varint_field(p, 12, (uint64_t)b->period);
    }
    return p;
}

int lc_pprof_builder_encode(lc_pprof_builder_t *b, bool gzip, lc_buf_t *out)
{
    if (b->err)
        return b->err;
    if (b->types.n == 0)
        return LC_EINPUT; /* a pprof without sample types is invalid */
    size_t sample_cap = 0;
    size_t *sample_len =
        b->alloc->grow(NULL, &sample_cap, b->samples.n ? b->samples.n : 1, sizeof(*sample_len));
    size_t n = profile_size(b, sample_len);
    lc_buf_t raw;
    lc_buf_t *dst = out;
    if (gzip) {
        lc_buf_init(&raw, LC_BUF_UNLIMITED);
        dst = &raw;
    }
    int rc = lc_buf_reserve(dst, n);
    if (rc == 0) {
        uint8_t *end = put_profile(b, sample_len, dst->data + dst->len);
        dst->len += (size_t)(end - (dst->data + dst->len));
        if (gzip)
            rc = lc_gzip(raw.data, raw.len, LC_PPROF__GZIP_LEVEL, out);
    }
    if (gzip)
        lc_buf_fini(&raw);
    builder_free(b, sample_len);
    return rc;
}
