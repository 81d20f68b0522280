/*
 * pprof_decode.c — google.v1.Profile from protobuf bytes, for exactly that schema
 * (pyroscope-api.md §4.1), behind lc_pprof_decode.
 *
 * protobuf-c's generic unpack was a fifth of ingest's CPU: it looks every field
 * up in the descriptor, allocates each message, array and string separately and
 * scans every message twice. This decoder also makes two passes, but over the
 * profile as a whole: the first counts every repeated element — top-level ones
 * and those nested in samples (location ids, values, labels) and locations
 * (lines) — and reads the singular fields; the second fills arrays sized exactly
 * from those counts, one arena allocation per kind of element.
 *
 * The result is what protobuf-c's unpack yields (perf-anchors §5.3): every
 * message initialised by its INIT macro (so protobuf_c_message_pack and
 * lc_pprof_encode work on it), empty repeated fields NULL, the last value of a
 * repeated singular field wins, packed and unpacked scalars are both read, and a
 * repeated period_type replaces the earlier one as protobuf-c's merge does for
 * proto3 scalars (unknown fields included, which is why a field 0 only counts in
 * the last one). Strings are NUL-terminated arena copies; a NUL inside one
 * becomes U+FFFD so that validation still sees what follows it.
 *
 * Intended differences (pprof_int.h; the differential fuzz target allows just
 * these): unknown fields are skipped, not kept; a bool not encoded as a varint
 * is refused; more than lim->max_samples samples are refused before anything is
 * allocated; less arena is needed (at most ~40 bytes per input byte, for empty
 * samples or locations), so the arena's cap is reached later.
 */
#include <string.h>

#include "pprof_int.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define PD_HAVE_WINDOWS 1
#include <immintrin.h>
#include <pthread.h>
#endif

/* ---------------------------------------------------------------- wire format */

enum { WT_VARINT = 0, WT_I64 = 1, WT_LEN = 2, WT_I32 = 5 };

/* protobuf-c reads a tag or a length in at most 5 bytes and a varint in at
 * most 10, dropping the bits past 64; so does this decoder. */
#define PD_KEY_MAX_BYTES 5
#define PD_LEN_MAX_BYTES 5
#define PD_VARINT_MAX_BYTES 10

typedef struct pd_field_s {
    uint32_t number;
    uint32_t wire;
    uint64_t value;      /* WT_VARINT only */
    const uint8_t *data; /* WT_LEN: the payload; otherwise the value's own bytes */
    size_t len;          /* bytes at data */
} pd_field_t;

/* A message being read: [p, end). Varints may be read ahead up to limit. */
typedef struct pd_in_s {
    const uint8_t *p, *end, *limit;
} pd_in_t;

#define PD_INLINE static inline __attribute__((always_inline))

/* One byte of a varint, unrolled below: done when it has no continuation bit. */
#define PD_VARINT_BYTE(i)                                                                          \
    do {                                                                                           \
        uint64_t b_ = p[i];                                                                        \
        v |= (b_ & 0x7f) << (7 * (i));                                                             \
        if (b_ < 0x80) {                                                                           \
            *out = v;                                                                              \
            return (i) + 1;                                                                        \
        }                                                                                          \
    } while (0)

/* A varint of at most max (5 or 10, a constant once inlined) bytes, all of
 * which may be read: its length, 0 when it does not end within them. */
PD_INLINE size_t pd_varint_unrolled(const uint8_t *p, size_t max, uint64_t *out)
{
    uint64_t v = 0;
    PD_VARINT_BYTE(0);
    PD_VARINT_BYTE(1);
    PD_VARINT_BYTE(2);
    PD_VARINT_BYTE(3);
    PD_VARINT_BYTE(4);
    if (max == PD_VARINT_MAX_BYTES) {
        PD_VARINT_BYTE(5);
        PD_VARINT_BYTE(6);
        PD_VARINT_BYTE(7);
        PD_VARINT_BYTE(8);
        PD_VARINT_BYTE(9);
    }
    return 0;
}

/* Reads a varint of at most max bytes from [p, end); returns its length, 0
 * when it does not end within them. Bits past 64 are dropped. Unrolled when
 * max bytes may be read — up to `limit`, the end of the input, even past the
 * end of the message — which is almost always: a byte-at-a-time loop was a
 * third of the decoder's instructions. */
PD_INLINE size_t pd_varint(const uint8_t *p, const uint8_t *end, const uint8_t *limit, size_t max,
                           uint64_t *out)
{
    if ((size_t)(limit - p) >= max) {
        size_t n = pd_varint_unrolled(p, max, out);
        return n <= (size_t)(end - p) ? n : 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; p + i < end; i++) {
        v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (p[i] < 0x80) {
            *out = v;
            return i + 1;
        }
    }
    return 0;
}

/* The value of the field that starts at p once its key is read. */
PD_INLINE int pd_field_value(const uint8_t *p, const pd_in_t *in, pd_field_t *f)
{
    const uint8_t *end = in->end;
    size_t n;
    uint64_t len;
    switch (f->wire) {
    case WT_VARINT:
        if (p < end && *p < 0x80) {
            f->value = *p;
            n = 1;
        } else {
            n = pd_varint(p, end, in->limit, PD_VARINT_MAX_BYTES, &f->value);
        }
        f->data = p;
        f->len = n;
        return n ? 0 : LC_PPROF__MALFORMED;
    case WT_LEN:
        if (p < end && *p < 0x80) { /* most messages and strings are short */
            len = *p;
            n = 1;
        } else {
            n = pd_varint(p, end, in->limit, PD_LEN_MAX_BYTES, &len);
        }
        if (n == 0 || len > (uint64_t)(end - p) - n)
            return LC_PPROF__MALFORMED;
        f->data = p + n;
        f->len = (size_t)len;
        return 0;
    case WT_I64:
    case WT_I32:
        f->len = f->wire == WT_I64 ? 8 : 4;
        f->data = p;
        return (size_t)(end - p) >= f->len ? 0 : LC_PPROF__MALFORMED;
    default:
        return LC_PPROF__MALFORMED; /* groups (3, 4) and the unused wire types 6, 7 */
    }
}

/* Reads the field at in->p (< in->end) and moves past it. A one-byte key of
 * field 0 is refused outright, as protobuf-c does; a longer one is reported to
 * the caller like any other number. */
PD_INLINE int pd_next(pd_in_t *in, pd_field_t *f)
{
    const uint8_t *p = in->p;
    uint64_t key;
    if (*p < 0x80) {
        key = *p++;
        if (key < 8)
            return LC_PPROF__MALFORMED;
    } else {
        size_t n = pd_varint(p, in->end, in->limit, PD_KEY_MAX_BYTES, &key);
        if (n == 0)
            return LC_PPROF__MALFORMED;
        p += n;
    }
    f->number = (uint32_t)(key >> 3);
    f->wire = (uint32_t)(key & 7);
    f->value = 0;
    int rc = pd_field_value(p, in, f);
    if (rc == 0)
        in->p = f->data + f->len;
    return rc;
}

/* The embedded message a field holds. */
PD_INLINE pd_in_t pd_sub(const pd_in_t *in, const pd_field_t *f)
{
    return (pd_in_t){f->data, f->data + f->len, in->limit};
}

static inline int pd_int64(const pd_field_t *f, int64_t *out)
{
    if (f->wire != WT_VARINT)
        return LC_PPROF__MALFORMED;
    *out = (int64_t)f->value;
    return 0;
}

static inline int pd_uint64(const pd_field_t *f, uint64_t *out)
{
    if (f->wire != WT_VARINT)
        return LC_PPROF__MALFORMED;
    *out = f->value;
    return 0;
}

/* A bool is true when any value bit of its varint is set, even past bit 63. */
static int pd_bool(const pd_field_t *f, protobuf_c_boolean *out)
{
    if (f->wire != WT_VARINT)
        return LC_PPROF__BOOL_WIRE_TYPE;
    *out = 0;
    for (size_t i = 0; i < f->len; i++)
        *out |= (f->data[i] & 0x7f) != 0;
    return 0;
}

/* Continuation bytes among the 8 bytes of w: one bit at the bottom of each
 * such byte, summed into the top byte by the multiply. */
PD_INLINE size_t pd_count_continued(uint64_t w)
{
    return (size_t)((((w >> 7) & 0x0101010101010101ULL) * 0x0101010101010101ULL) >> 56);
}

/* Varints in a packed run: one per byte without the continuation bit, counted
 * eight bytes at a time (the runs of location ids are most of a profile); the
 * last few bytes too when 8 may be read up to limit. A run that does not end on
 * such a byte is refused when it is read, in pass two. */
PD_INLINE size_t pd_count_packed(const uint8_t *p, size_t len, const uint8_t *limit)
{
    size_t cont = 0, i = 0;
    uint64_t w;
    for (; i + 8 <= len; i += 8) {
        memcpy(&w, p + i, 8);
        cont += pd_count_continued(w);
    }
    if (i < len && (size_t)(limit - (p + i)) >= 8) {
        memcpy(&w, p + i, 8);
        cont += pd_count_continued(w & (~0ULL >> (8 * (8 - (len - i))))); /* little-endian */
        return len - cont;
    }
    for (; i < len; i++)
        cont += p[i] >> 7;
    return len - cont;
}

/* ---------------------------------------------------------------- decoder state */

typedef struct pd_counts_s {
    size_t sample_type, sample, mapping, location, function, string, comment;
    size_t location_id, value, label, line; /* summed over every sample / location */
    size_t string_bytes;                    /* with one NUL each */
} pd_counts_t;

/* An array being filled in pass two: `cap` slots counted in pass one. */
typedef struct pd_u64s_s {
    uint64_t *v;
    size_t n, cap;
} pd_u64s_t;

/* What pass two sees of the samples' location ids, for validation not to read
 * every frame again (lc_pprof_seen_t): the largest, and whether one is 0. The
 * eight-byte windows keep theirs in 16-bit lanes, folded in at the end. */
typedef struct pd_seen_s {
    uint64_t max;
    bool zero;
#ifdef PD_HAVE_WINDOWS
    __m128i lanes_max, lanes_zero;
#endif
} pd_seen_t;

typedef struct pd_s {
    lc_arena_t *arena;
    pd_seen_t seen;
    pd_counts_t count;
    bool field_zero;        /* a field 0 was seen (the period_type's is tracked apart) */
    bool period_field_zero; /* ... in the last period_type, the only one kept */
    pd_u64s_t location_ids, values, comments;
    Google__V1__Label *labels;
    Google__V1__Label **label_ptrs;
    size_t n_labels;
    Google__V1__Line *lines;
    Google__V1__Line **line_ptrs;
    size_t n_lines;
    char *strings; /* string_bytes */
    size_t strings_used;
} pd_t;

/* An arena array of n elements, NULL (as protobuf-c leaves it) when n is 0. */
static int pd_alloc(pd_t *d, size_t n, size_t size, void *out)
{
    void *p = NULL;
    if (n > 0 && n <= SIZE_MAX / size)
        p = lc_arena_alloc(d->arena, n * size);
    memcpy(out, &p, sizeof(p));
    return n > 0 && !p ? LC_PPROF__NO_MEMORY : 0;
}

/* n message structs plus the array of pointers to them that the profile holds. */
static int pd_alloc_messages(pd_t *d, size_t n, size_t size, void *structs, void *ptrs)
{
    return pd_alloc(d, n, size, structs) || pd_alloc(d, n, sizeof(void *), ptrs)
               ? LC_PPROF__NO_MEMORY
               : 0;
}

/* ---------------------------------------------------------------- pass one: count */

PD_INLINE int pd_count_scalars(const pd_in_t *in, const pd_field_t *f, size_t *n)
{
    if (f->wire == WT_VARINT)
        *n += 1;
    else if (f->wire == WT_LEN)
        *n += pd_count_packed(f->data, f->len, in->limit);
    else
        return LC_PPROF__MALFORMED;
    return 0;
}

PD_INLINE int pd_count_message(const pd_field_t *f, size_t *n)
{
    *n += 1;
    return f->wire == WT_LEN ? 0 : LC_PPROF__MALFORMED;
}

/* Field 0 and the singular fields are left to pass two. */
PD_INLINE int pd_count_sample(pd_t *d, pd_in_t in)
{
    while (in.p < in.end) {
        pd_field_t f;
        int rc = pd_next(&in, &f);
        if (rc)
            return rc;
        switch (f.number) {
        case 1:
            rc = pd_count_scalars(&in, &f, &d->count.location_id);
            break;
        case 2:
            rc = pd_count_scalars(&in, &f, &d->count.value);
            break;
        case 3:
            rc = pd_count_message(&f, &d->count.label);
            break;
        default:
            break;
        }
        if (rc)
            return rc;
    }
    return 0;
}

PD_INLINE int pd_count_location(pd_t *d, pd_in_t in)
{
    while (in.p < in.end) {
        pd_field_t f;
        int rc = pd_next(&in, &f);
        if (rc == 0 && f.number == 4)
            rc = pd_count_message(&f, &d->count.line);
        if (rc)
            return rc;
    }
    return 0;
}

static int pd_value_type(pd_in_t in, Google__V1__ValueType *vt, bool *field_zero)
{
    *vt = (Google__V1__ValueType)GOOGLE__V1__VALUE_TYPE__INIT;
    while (in.p < in.end) {
        pd_field_t f;
        int rc = pd_next(&in, &f);
        if (rc)
            return rc;
        switch (f.number) {
        case 1:
            rc = pd_int64(&f, &vt->type);
            break;
        case 2:
            rc = pd_int64(&f, &vt->unit);
            break;
        default:
            *field_zero |= f.number == 0;
            break;
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* protobuf-c merges a repeated period_type into the earlier one, which for
 * proto3 scalars means the last one wins whole, unknown fields included. */
static int pd_period_type(pd_t *d, lc_pprof_t *p, const pd_in_t *in, const pd_field_t *f)
{
    if (f->wire != WT_LEN)
        return LC_PPROF__MALFORMED;
    if (!p->period_type)
        p->period_type = lc_arena_alloc(d->arena, sizeof(*p->period_type));
    if (!p->period_type)
        return LC_PPROF__NO_MEMORY;
    d->period_field_zero = false;
    return pd_value_type(pd_sub(in, f), p->period_type, &d->period_field_zero);
}

/* The Profile fields that pass two fills are counted (nested ones included);
 * the singular ones are read here, in order, so the last occurrence wins. */
PD_INLINE int pd_scan_field(pd_t *d, lc_pprof_t *p, const pd_in_t *in, const pd_field_t *f)
{
    pd_counts_t *c = &d->count;
    int rc;
    switch (f->number) {
    case 1:
        return pd_count_message(f, &c->sample_type);
    case 2:
        rc = pd_count_message(f, &c->sample);
        return rc ? rc : pd_count_sample(d, pd_sub(in, f));
    case 3:
        return pd_count_message(f, &c->mapping);
    case 4:
        rc = pd_count_message(f, &c->location);
        return rc ? rc : pd_count_location(d, pd_sub(in, f));
    case 5:
        return pd_count_message(f, &c->function);
    case 6:
        c->string_bytes += f->len + 1;
        return pd_count_message(f, &c->string);
    case 7:
        return pd_int64(f, &p->drop_frames);
    case 8:
        return pd_int64(f, &p->keep_frames);
    case 9:
        return pd_int64(f, &p->time_nanos);
    case 10:
        return pd_int64(f, &p->duration_nanos);
    case 11:
        return pd_period_type(d, p, in, f);
    case 12:
        return pd_int64(f, &p->period);
    case 13:
        return pd_count_scalars(in, f, &c->comment);
    case 14:
        return pd_int64(f, &p->default_sample_type);
    default:
        d->field_zero |= f->number == 0;
        return 0;
    }
}

static int pd_scan(pd_t *d, lc_pprof_t *p, pd_in_t in)
{
    while (in.p < in.end) {
        pd_field_t f;
        int rc = pd_next(&in, &f);
        if (rc == 0)
            rc = pd_scan_field(d, p, &in, &f);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---------------------------------------------------------------- packed ids, by SSSE3 */

/* A packed run of location ids is most of a profile's bytes (a heavy heap
 * profile: 209k ids of one or two bytes in 847 KB), and decoding them one
 * varint at a time was ~30% of the decoder's instructions, which no scalar
 * reshaping cut (bench/README.md, issue 32). So eight input bytes are decoded
 * at once: their continuation bits index a table that says how many varints of
 * one or two bytes end in them from their start, how many bytes those take and
 * a byte shuffle that moves varint j to 16-bit lane j; the lanes are then joined
 * from 7-bit groups and widened to 64 bits. A longer varint (a window whose
 * first varint does not end within two bytes) is left to the scalar reader.
 * Two windows per 16-byte load were tried: more instructions per id, since
 * most windows of real stacks hold more than four one-byte ids (the hot frames
 * are the first ids a profiler hands out). */
#ifdef PD_HAVE_WINDOWS

typedef struct pd_window_s {
    uint8_t shuffle[16]; /* lane j: the offsets of its low and high byte (0x80: zero) */
    uint8_t count;       /* varints decoded */
    uint8_t used;        /* bytes they take */
} pd_window_t;

static pd_window_t pd_windows[256];

/* Sixteen bytes from pd_lanes_used + 8 - n: all ones in the 16-bit lanes of
 * a window's n varints, zeros past them. */
static const uint16_t pd_lanes_used[16] = {
    0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0, 0, 0, 0, 0, 0, 0, 0};
static bool pd_windows_usable;
static pthread_once_t pd_windows_once = PTHREAD_ONCE_INIT;

static void pd_window_init(pd_window_t *w, unsigned mask)
{
    unsigned i = 0, n = 0;
    memset(w->shuffle, 0x80, sizeof(w->shuffle));
    while (i < 8) {
        if ((mask >> i & 1) == 0) {
            w->shuffle[2 * n] = (uint8_t)i;
            i += 1;
        } else if (i + 1 < 8 && (mask >> (i + 1) & 1) == 0) {
            w->shuffle[2 * n] = (uint8_t)i;
            w->shuffle[2 * n + 1] = (uint8_t)(i + 1);
            i += 2;
        } else {
            break;
        }
        n++;
    }
    w->count = (uint8_t)n;
    w->used = (uint8_t)i;
}

static void pd_windows_init(void)
{
    for (unsigned m = 0; m < 256; m++)
        pd_window_init(&pd_windows[m], m);
    pd_windows_usable = __builtin_cpu_supports("ssse3");
}

/* Decodes windows of the run [*pp, end) into out while a window's 8 bytes may
 * be read (up to limit) and 8 slots remain before out_end; returns the new
 * out, *pp moved past what was decoded. Bytes past end count as continued, so
 * no varint is taken to end there: a run that does not end on a whole varint
 * is left to the scalar reader, which refuses it. */
__attribute__((target("ssse3"))) static uint64_t *
pd_windows_fill(const uint8_t **pp, const uint8_t *end, const uint8_t *limit, uint64_t *out,
                const uint64_t *out_end, pd_seen_t *seen)
{
    const __m128i low7 = _mm_set1_epi16(0x007f), high7 = _mm_set1_epi16(0x7f00);
    const __m128i zero = _mm_setzero_si128();
    __m128i lanes_max = seen->lanes_max, lanes_zero = seen->lanes_zero;
    const uint8_t *p = *pp;
    while (p < end && limit - p >= 8 && out_end - out >= 8) {
        __m128i in = _mm_loadl_epi64((const __m128i *)(const void *)p);
        unsigned mask = (unsigned)_mm_movemask_epi8(in);
        if (end - p < 8)
            mask |= 0xffu << (end - p);
        const pd_window_t *w = &pd_windows[mask & 0xff];
        if (w->count == 0)
            break;
        __m128i x =
            _mm_shuffle_epi8(in, _mm_loadu_si128((const __m128i *)(const void *)w->shuffle));
        __m128i v =
            _mm_or_si128(_mm_and_si128(x, low7), _mm_srli_epi16(_mm_and_si128(x, high7), 1));
        /* Ids are below 2^14 here, so signed lanes compare right; lanes past
         * the window's varints are 0 and count for no id. */
        lanes_max = _mm_max_epi16(lanes_max, v);
        lanes_zero = _mm_or_si128(
            lanes_zero,
            _mm_and_si128(
                _mm_cmpeq_epi16(v, zero),
                _mm_loadu_si128((const __m128i *)(const void *)(pd_lanes_used + 8 - w->count))));
        __m128i lanes0_3 = _mm_unpacklo_epi16(v, zero), lanes4_7 = _mm_unpackhi_epi16(v, zero);
        _mm_storeu_si128((__m128i *)(void *)out, _mm_unpacklo_epi32(lanes0_3, zero));
        _mm_storeu_si128((__m128i *)(void *)(out + 2), _mm_unpackhi_epi32(lanes0_3, zero));
        _mm_storeu_si128((__m128i *)(void *)(out + 4), _mm_unpacklo_epi32(lanes4_7, zero));
        _mm_storeu_si128((__m128i *)(void *)(out + 6), _mm_unpackhi_epi32(lanes4_7, zero));
        p += w->used;
        out += w->count;
    }
    seen->lanes_max = lanes_max;
    seen->lanes_zero = lanes_zero;
    *pp = p;
    return out;
}

/* Folds the windows' lanes into seen's max and zero. */
static void pd_seen_fold(pd_seen_t *seen)
{
    __m128i m = seen->lanes_max;
    m = _mm_max_epi16(m, _mm_srli_si128(m, 8));
    m = _mm_max_epi16(m, _mm_srli_si128(m, 4));
    m = _mm_max_epi16(m, _mm_srli_si128(m, 2));
    uint64_t lanes_max = (uint64_t)(_mm_cvtsi128_si32(m) & 0xffff);
    if (lanes_max > seen->max)
        seen->max = lanes_max;
    seen->zero |= _mm_movemask_epi8(seen->lanes_zero) != 0;
}
#else
static void pd_seen_fold(pd_seen_t *seen)
{
    (void)seen;
}
#endif

/* ---------------------------------------------------------------- pass two: fill */

/* Notes one location id in seen (the scalar reader's; the windows keep lanes). */
PD_INLINE void pd_seen_id(pd_seen_t *seen, uint64_t v)
{
    seen->max = v > seen->max ? v : seen->max;
    seen->zero |= v == 0;
}

/* Appends a varint field, or a packed run of them, to a counted array; with
 * `seen` (location ids: a constant once inlined) each id is noted there, and
 * the run, mostly ids of one or two bytes, is decoded eight bytes at a time
 * where the CPU can. */
PD_INLINE int pd_fill_scalars(const pd_in_t *in, const pd_field_t *f, pd_u64s_t *a, pd_seen_t *seen)
{
    if (f->wire == WT_VARINT) {
        if (a->n == a->cap)
            return LC_PPROF__MALFORMED;
        if (seen)
            pd_seen_id(seen, f->value);
        a->v[a->n++] = f->value;
        return 0;
    }
    if (f->wire != WT_LEN)
        return LC_PPROF__MALFORMED;
    if (!a->v) /* nothing counted: an empty run, or one without a whole varint */
        return f->len ? LC_PPROF__MALFORMED : 0;
    const uint8_t *p = f->data, *end = p + f->len;
    uint64_t *out = a->v + a->n, *out_end = a->v + a->cap;
    while (p < end) {
#ifdef PD_HAVE_WINDOWS
        if (seen && pd_windows_usable) {
            out = pd_windows_fill(&p, end, in->limit, out, out_end, seen);
            if (p == end)
                break;
        }
#endif
        uint64_t v = *p;
        size_t used = 1;
        if (v >= 0x80 && p + 1 < end && p[1] < 0x80) { /* ids up to 16383 */
            v = (v & 0x7f) | (uint64_t)p[1] << 7;
            used = 2;
        } else if (v >= 0x80) {
            used = pd_varint(p, end, in->limit, PD_VARINT_MAX_BYTES, &v);
            if (used == 0)
                return LC_PPROF__MALFORMED;
        }
        if (out == out_end)
            return LC_PPROF__MALFORMED;
        if (seen)
            pd_seen_id(seen, v);
        *out++ = v;
        p += used;
    }
    a->n = (size_t)(out - a->v);
    return 0;
}

PD_INLINE int pd_label(pd_t *d, pd_in_t in, Google__V1__Label *l)
{
    *l = (Google__V1__Label)GOOGLE__V1__LABEL__INIT;
    while (in.p < in.end) {
        pd_field_t f;
        int rc = pd_next(&in, &f);
        if (rc)
            return rc;
        switch (f.number) {
        case 1:
            rc = pd_int64(&f, &l->key);
            break;
        case 2:
            rc = pd_int64(&f, &l->str);
            break;
        case 3:
            rc = pd_int64(&f, &l->num);
            break;
        case 4:
            rc = pd_int64(&f, &l->num_unit);
            break;
        default:
            d->field_zero |= f.number == 0;
            break;
        }
        if (rc)
            return rc;
    }
    return 0;
}

PD_INLINE int pd_sample_label(pd_t *d, const pd_in_t *in, const pd_field_t *f)
{
    if (f->wire != WT_LEN || d->n_labels == d->count.label)
        return LC_PPROF__MALFORMED;
    Google__V1__Label *l = &d->labels[d->n_labels];
    d->label_ptrs[d->n_labels++] = l;
    return pd_label(d, pd_sub(in, f), l);
}

/* The sample's arrays are consecutive slices of the profile-wide ones. */
PD_INLINE int pd_sample(pd_t *d, pd_in_t in, Google__V1__Sample *s)
{
    size_t loc0 = d->location_ids.n, val0 = d->values.n, lab0 = d->n_labels;
    *s = (Google__V1__Sample)GOOGLE__V1__SAMPLE__INIT;
    while (in.p < in.end) {
        pd_field_t f;
        int rc = pd_next(&in, &f);
        if (rc)
            return rc;
        switch (f.number) {
        case 1:
            rc = pd_fill_scalars(&in, &f, &d->location_ids, &d->seen);
            break;
        case 2:
            rc = pd_fill_scalars(&in, &f, &d->values, NULL);
            break;
        case 3:
            rc = pd_sample_label(d, &in, &f);
            break;
        default:
            d->field_zero |= f.number == 0;
            break;
        }
        if (rc)
            return rc;
    }
    s->n_location_id = d->location_ids.n - loc0;
    s->location_id = s->n_location_id ? d->location_ids.v + loc0 : NULL;
    s->n_value = d->values.n - val0;
    s->value = s->n_value ? (int64_t *)(d->values.v + val0) : NULL;
    s->n_label = d->n_labels - lab0;
    s->label = s->n_label ? d->label_ptrs + lab0 : NULL;
    return 0;
}

PD_INLINE int pd_mapping(pd_t *d, pd_in_t in, Google__V1__Mapping *m)
{
    *m = (Google__V1__Mapping)GOOGLE__V1__MAPPING__INIT;
    while (in.p < in.end) {
        pd_field_t f;
        int rc = pd_next(&in, &f);
        if (rc)
            return rc;
        switch (f.number) {
        case 1:
            rc = pd_uint64(&f, &m->id);
            break;
        case 2:
            rc = pd_uint64(&f, &m->memory_start);
            break;
        case 3:
            rc = pd_uint64(&f, &m->memory_limit);
            break;
        case 4:
            rc = pd_uint64(&f, &m->file_offset);
            break;
        case 5:
            rc = pd_int64(&f, &m->filename);
            break;
        case 6:
            rc = pd_int64(&f, &m->build_id);
            break;
        case 7:
            rc = pd_bool(&f, &m->has_functions);
            break;
        case 8:
            rc = pd_bool(&f, &m->has_filenames);
            break;
        case 9:
            rc = pd_bool(&f, &m->has_line_numbers);
            break;
        case 10:
            rc = pd_bool(&f, &m->has_inline_frames);
            break;
        default:
            d->field_zero |= f.number == 0;
            break;
        }
        if (rc)
            return rc;
    }
    return 0;
}

PD_INLINE int pd_line(pd_t *d, pd_in_t in, Google__V1__Line *l)
{
    *l = (Google__V1__Line)GOOGLE__V1__LINE__INIT;
    while (in.p < in.end) {
        pd_field_t f;
        int rc = pd_next(&in, &f);
        if (rc)
            return rc;
        switch (f.number) {
        case 1:
            rc = pd_uint64(&f, &l->function_id);
            break;
        case 2:
            rc = pd_int64(&f, &l->line);
            break;
        default:
            d->field_zero |= f.number == 0;
            break;
        }
        if (rc)
            return rc;
    }
    return 0;
}

PD_INLINE int pd_location_line(pd_t *d, const pd_in_t *in, const pd_field_t *f)
{
    if (f->wire != WT_LEN || d->n_lines == d->count.line)
        return LC_PPROF__MALFORMED;
    Google__V1__Line *l = &d->lines[d->n_lines];
    d->line_ptrs[d->n_lines++] = l;
    return pd_line(d, pd_sub(in, f), l);
}

PD_INLINE int pd_location(pd_t *d, pd_in_t in, Google__V1__Location *l)
{
    size_t line0 = d->n_lines;
    *l = (Google__V1__Location)GOOGLE__V1__LOCATION__INIT;
    while (in.p < in.end) {
        pd_field_t f;
        int rc = pd_next(&in, &f);
        if (rc)
            return rc;
        switch (f.number) {
        case 1:
            rc = pd_uint64(&f, &l->id);
            break;
        case 2:
            rc = pd_uint64(&f, &l->mapping_id);
            break;
        case 3:
            rc = pd_uint64(&f, &l->address);
            break;
        case 4:
            rc = pd_location_line(d, &in, &f);
            break;
        case 5:
            rc = pd_bool(&f, &l->is_folded);
            break;
        default:
            d->field_zero |= f.number == 0;
            break;
        }
        if (rc)
            return rc;
    }
    l->n_line = d->n_lines - line0;
    l->line = l->n_line ? d->line_ptrs + line0 : NULL;
    return 0;
}

PD_INLINE int pd_function(pd_t *d, pd_in_t in, Google__V1__Function *fn)
{
    *fn = (Google__V1__Function)GOOGLE__V1__FUNCTION__INIT;
    while (in.p < in.end) {
        pd_field_t f;
        int rc = pd_next(&in, &f);
        if (rc)
            return rc;
        switch (f.number) {
        case 1:
            rc = pd_uint64(&f, &fn->id);
            break;
        case 2:
            rc = pd_int64(&f, &fn->name);
            break;
        case 3:
            rc = pd_int64(&f, &fn->system_name);
            break;
        case 4:
            rc = pd_int64(&f, &fn->filename);
            break;
        case 5:
            rc = pd_int64(&f, &fn->start_line);
            break;
        default:
            d->field_zero |= f.number == 0;
            break;
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* Most strings go to the profile-wide string block; one holding a NUL is
 * re-copied with U+FFFD instead, which makes it longer. */
PD_INLINE int pd_string(pd_t *d, const pd_field_t *f, char **out)
{
    if (memchr(f->data, 0, f->len)) {
        *out = lc_pprof__copy_replacing_nuls(f->data, f->len, d->arena);
        return *out ? 0 : LC_PPROF__NO_MEMORY;
    }
    if (f->len >= d->count.string_bytes - d->strings_used)
        return LC_PPROF__MALFORMED;
    char *s = d->strings + d->strings_used;
    memcpy(s, f->data, f->len);
    s[f->len] = '\0';
    d->strings_used += f->len + 1;
    *out = s;
    return 0;
}

char *lc_pprof__copy_replacing_nuls(const uint8_t *s, size_t n, lc_arena_t *arena)
{
    static const char replacement[] = "\xef\xbf\xbd";
    size_t nuls = 0;
    for (size_t i = 0; i < n; i++)
        nuls += s[i] == 0;
    char *d = lc_arena_alloc(arena, n + 2 * nuls + 1);
    if (!d)
        return NULL;
    char *w = d;
    for (size_t i = 0; i < n; i++) {
        if (s[i]) {
            *w++ = (char)s[i];
        } else {
            memcpy(w, replacement, 3);
            w += 3;
        }
    }
    *w = '\0';
    return d;
}

/* The element structs of the top-level repeated fields, filled in order. */
typedef struct pd_tables_s {
    Google__V1__ValueType *sample_types;
    Google__V1__Sample *samples;
    Google__V1__Mapping *mappings;
    Google__V1__Location *locations;
    Google__V1__Function *functions;
} pd_tables_t;

static int pd_alloc_arrays(pd_t *d, lc_pprof_t *p, pd_tables_t *t)
{
    const pd_counts_t *c = &d->count;
    int rc =
        pd_alloc_messages(d, c->sample_type, sizeof(*t->sample_types), &t->sample_types,
                          &p->sample_type) ||
        pd_alloc_messages(d, c->sample, sizeof(*t->samples), &t->samples, &p->sample) ||
        pd_alloc_messages(d, c->mapping, sizeof(*t->mappings), &t->mappings, &p->mapping) ||
        pd_alloc_messages(d, c->location, sizeof(*t->locations), &t->locations, &p->location) ||
        pd_alloc_messages(d, c->function, sizeof(*t->functions), &t->functions, &p->function) ||
        pd_alloc_messages(d, c->label, sizeof(*d->labels), &d->labels, &d->label_ptrs) ||
        pd_alloc_messages(d, c->line, sizeof(*d->lines), &d->lines, &d->line_ptrs) ||
        pd_alloc(d, c->string, sizeof(char *), &p->string_table) ||
        pd_alloc(d, c->string_bytes, 1, &d->strings) ||
        pd_alloc(d, c->location_id, sizeof(uint64_t), &d->location_ids.v) ||
        pd_alloc(d, c->value, sizeof(uint64_t), &d->values.v) ||
        pd_alloc(d, c->comment, sizeof(uint64_t), &d->comments.v);
    d->location_ids.cap = c->location_id;
    d->values.cap = c->value;
    d->comments.cap = c->comment;
    return rc ? LC_PPROF__NO_MEMORY : 0;
}

/* Takes the next of `cap` slots counted in pass one. Pass two reads the same
 * bytes, so it cannot find more; if it did, that is refused, not written. */
PD_INLINE bool pd_claim(size_t *n, size_t cap, size_t *slot)
{
    *slot = *n;
    if (*n == cap)
        return false;
    *n += 1;
    return true;
}

PD_INLINE int pd_sample_type(pd_t *d, pd_in_t in, Google__V1__ValueType *vt)
{
    return pd_value_type(in, vt, &d->field_zero);
}

PD_INLINE int pd_fill_field(pd_t *d, lc_pprof_t *p, pd_tables_t *t, const pd_in_t *in,
                            const pd_field_t *f)
{
    const pd_counts_t *c = &d->count;
    pd_in_t sub = pd_sub(in, f);
    size_t i;
    switch (f->number) {
    case 1:
        if (!pd_claim(&p->n_sample_type, c->sample_type, &i))
            return LC_PPROF__MALFORMED;
        p->sample_type[i] = &t->sample_types[i];
        return pd_sample_type(d, sub, p->sample_type[i]);
    case 2:
        if (!pd_claim(&p->n_sample, c->sample, &i))
            return LC_PPROF__MALFORMED;
        p->sample[i] = &t->samples[i];
        return pd_sample(d, sub, p->sample[i]);
    case 3:
        if (!pd_claim(&p->n_mapping, c->mapping, &i))
            return LC_PPROF__MALFORMED;
        p->mapping[i] = &t->mappings[i];
        return pd_mapping(d, sub, p->mapping[i]);
    case 4:
        if (!pd_claim(&p->n_location, c->location, &i))
            return LC_PPROF__MALFORMED;
        p->location[i] = &t->locations[i];
        return pd_location(d, sub, p->location[i]);
    case 5:
        if (!pd_claim(&p->n_function, c->function, &i))
            return LC_PPROF__MALFORMED;
        p->function[i] = &t->functions[i];
        return pd_function(d, sub, p->function[i]);
    case 6:
        if (!pd_claim(&p->n_string_table, c->string, &i))
            return LC_PPROF__MALFORMED;
        return pd_string(d, f, &p->string_table[i]);
    case 13:
        return pd_fill_scalars(in, f, &d->comments, NULL);
    default:
        return 0; /* read in pass one */
    }
}

static int pd_fill(pd_t *d, lc_pprof_t *p, pd_in_t in)
{
    pd_tables_t t;
    int rc = pd_alloc_arrays(d, p, &t);
    while (rc == 0 && in.p < in.end) {
        pd_field_t f;
        rc = pd_next(&in, &f);
        if (rc == 0)
            rc = pd_fill_field(d, p, &t, &in, &f);
    }
    p->n_comment = d->comments.n;
    p->comment = p->n_comment ? (int64_t *)d->comments.v : NULL;
    return rc;
}

/* ---------------------------------------------------------------- entry point */

static int pd_decode(pd_t *d, const uint8_t *pb, size_t len, const lc_pprof_limits_t *lim,
                     lc_pprof_t **out)
{
    lc_pprof_t *p = lc_arena_alloc(d->arena, sizeof(*p));
    if (!p)
        return LC_PPROF__NO_MEMORY;
    *p = (lc_pprof_t)GOOGLE__V1__PROFILE__INIT;
    const uint8_t *end = len ? pb + len : pb;
    pd_in_t in = {pb, end, end};
    int rc = pd_scan(d, p, in);
    /* Validation reports a profile without sample types first; keep that order. */
    if (rc == 0 && lim->max_samples && d->count.sample > lim->max_samples &&
        d->count.sample_type > 0)
        rc = LC_PPROF__TOO_MANY_SAMPLES;
    if (rc == 0)
        rc = pd_fill(d, p, in);
    if (rc == 0 && (d->field_zero || d->period_field_zero))
        rc = LC_PPROF__FIELD_ZERO;
    *out = p;
    return rc;
}

int lc_pprof__decode_pb(const uint8_t *pb, size_t len, const lc_pprof_limits_t *lim,
                        lc_arena_t *arena, lc_pprof_t **out, lc_pprof__decode_err_t *why,
                        lc_status_t *st)
{
    return lc_pprof__decode_pb_seen(pb, len, lim, arena, out, NULL, why, st);
}

int lc_pprof__decode_pb_seen(const uint8_t *pb, size_t len, const lc_pprof_limits_t *lim,
                             lc_arena_t *arena, lc_pprof_t **out, lc_pprof_seen_t *seen,
                             lc_pprof__decode_err_t *why, lc_status_t *st)
{
#ifdef PD_HAVE_WINDOWS
    pthread_once(&pd_windows_once, pd_windows_init);
#endif
    pd_t d;
    memset(&d, 0, sizeof(d));
    d.arena = arena;
    lc_pprof_t *p;
    int rc = pd_decode(&d, pb, len, lim, &p);
    *why = (lc_pprof__decode_err_t)rc;
    switch (rc) {
    case LC_PPROF__DECODED:
        *out = p;
        if (seen) {
            pd_seen_fold(&d.seen);
            *seen = (lc_pprof_seen_t){
                .location_id_max = d.seen.max, .location_id_zero = d.seen.zero, .profile = p};
        }
        return 0;
    case LC_PPROF__TOO_MANY_SAMPLES:
        /* The words of lc_pprof_validate, which would refuse it next. */
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT,
                             "invalid pprof: profile has %zu samples (limit %zu)", d.count.sample,
                             lim->max_samples);
    case LC_PPROF__FIELD_ZERO:
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, LC_PPROF__MSG_FIELD_ZERO);
    default:
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, LC_PPROF__MSG_MALFORMED);
    }
}
