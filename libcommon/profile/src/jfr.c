/*
 * jfr.c — reads a Java Flight Recorder file (format 2.x, as written by the
 * JDK and by async-profiler, which the Pyroscope Java agent embeds).
 *
 * A file is a sequence of chunks. Each chunk: a 68-byte big-endian header
 * (magic "FLR\0", version, size, constant-pool and metadata offsets, start
 * time, duration, ticks, features), then events. Every event starts with its
 * size and type id; type 0 is the metadata event (a string table and a tree of
 * elements describing every class and its fields), type 1 a checkpoint event
 * (constant pools: per type, entries of id + value). Checkpoints are chained:
 * each holds the relative offset of the previous one, the header points at
 * the last. With the "compressed integers" feature (always set by the JDK and
 * async-profiler) every short/int/long is an unsigned LEB128 of up to 9 bytes,
 * the 9th carrying 8 bits; without it they are big-endian of fixed width.
 * Strings start with an encoding byte: 0 null, 1 empty, 2 a reference into
 * the java.lang.String pool, 3 UTF-8, 4 UTF-16 code units (each an integer),
 * 5 Latin-1.
 *
 * Values are read generically from the metadata (so new or reordered fields
 * are skipped), and only the pools and events Pyroscope converts are kept.
 * All reads are bounds-checked; every size taken from the file is capped
 * (jfr.h). Errors name what was wrong and where.
 * Threading: a jfr_t belongs to the calling thread for one jfr_read; the
 * blocks its tables come from stay with the thread ("kept blocks").
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "jfr_int.h"

#define CHUNK_HEADER 68
#define CHUNK_MAGIC 0x464c5200u
#define T_METADATA 0
#define T_CHECKPOINT 1
#define MAX_CHECKPOINTS 65536
#define DIRECT_CLASSES 1024
/* A stack trace pool is located rather than copied (locate_frames_usual)
 * when this many bytes of its checkpoint remain (lc/jfr.h documents the
 * default). Set when a located stack was decoded again per sample and
 * copying measured faster below it (dump1: 2.15 ms copied, 2.32 ms
 * located); since the converter resolves located frames undecoded
 * (jfr_frame_key), locating every pool takes fewer instructions on every
 * recording measured (dump1 17.5 M -> 10.0 M a conversion) but no less
 * time (dump1 2.3-2.6 -> 2.7-3.5 ms: a located frame is a load from the
 * recording, where the copied array is in cache), so the gate stays:
 * bench/README.md, jfr, fourth round. */
#define LAZY_STACKS_MIN_BYTES ((size_t)2 << 20)

/* ---------------------------------------------------------------- kept blocks
 * The converter's tables and its builders' arrays come from here, not
 * straight from malloc. A freed block of KEEP_MIN bytes or more stays with
 * the thread (KEEP_BLOCKS of them a thread, LC_JFR_KEPT_BYTES over all the
 * process's threads: a server converts on each of its workers, and 128 MiB
 * kept by each of them for good would be most of its memory) and serves the
 * thread's next request it fits, in this conversion or the next: glibc
 * gives large blocks back to the kernel when they are freed (mmap'd ones
 * at once, the heap's top past its trim threshold), so each conversion
 * page-faulted its tables in again (goland.jfr: 14.7 k faults a
 * conversion; bench/README.md, jfr, sixth round). A block is found by first
 * fit among those at most 4 times the request, and handed out uncleared
 * (zeroed by jfr_keep_calloc for the bytes asked). The blocks go when the
 * thread exits or calls lc_jfr_release. Under AddressSanitizer nothing is
 * kept, so a use after free is still caught. */
#define KEEP_MIN ((size_t)4 << 10)
#define KEEP_BLOCKS 4096

#if defined(__SANITIZE_ADDRESS__)
#define KEEP_ENABLED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KEEP_ENABLED 0
#endif
#endif
#ifndef KEEP_ENABLED
#define KEEP_ENABLED 1
#endif

/* Every block starts with its size and, while kept, the next kept block of
 * its bin; 16 bytes before what the caller gets (malloc's alignment kept). */
typedef struct keep_head_s {
    size_t size;
    struct keep_head_s *next;
} keep_head_t;

/* Kept blocks by bin: the blocks of 2^i to 2^(i+1) - 1 bytes in bin i. */
typedef struct keep_s {
    keep_head_t *bins[64];
    size_t n, bytes;
    bool registered; /* the thread-exit destructor knows this thread's keep */
} keep_t;

static _Thread_local keep_t kept;
static atomic_size_t keep_total; /* bytes kept by all threads, <= LC_JFR_KEPT_BYTES */
static pthread_key_t keep_key;
static bool keep_key_made;
static pthread_once_t keep_once = PTHREAD_ONCE_INIT;

static unsigned keep_bin(size_t size)
{
    return 63u - (unsigned)__builtin_clzll((unsigned long long)size);
}

/* Counts size into the process's keep if it fits under LC_JFR_KEPT_BYTES. */
static bool keep_reserve(size_t size)
{
    size_t cur = atomic_load_explicit(&keep_total, memory_order_relaxed);
    do {
        if (size > LC_JFR_KEPT_BYTES - cur)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(&keep_total, &cur, cur + size,
                                                    memory_order_relaxed, memory_order_relaxed));
    return true;
}

static void keep_unreserve(size_t size)
{
    atomic_fetch_sub_explicit(&keep_total, size, memory_order_relaxed);
}

static void keep_drop(keep_t *k)
{
    for (size_t i = 0; i < sizeof(k->bins) / sizeof(k->bins[0]); i++) {
        while (k->bins[i]) {
            keep_head_t *h = k->bins[i];
            k->bins[i] = h->next;
            lc_free(h);
        }
    }
    keep_unreserve(k->bytes);
    k->n = 0;
    k->bytes = 0;
}

static void keep_at_exit(void *k)
{
    keep_drop(k);
}

static void keep_key_make(void)
{
    keep_key_made = pthread_key_create(&keep_key, keep_at_exit) == 0;
}

void lc_jfr_release(void)
{
    keep_drop(&kept);
}

size_t lc_jfr_kept_bytes(void)
{
    return kept.bytes;
}

/* A new block (lc_xmalloc's out-of-memory abort, also for a size that
 * overflows). */
static void *keep_new(size_t n, bool zero)
{
    size_t total = n > SIZE_MAX - sizeof(keep_head_t) ? SIZE_MAX : sizeof(keep_head_t) + n;
    keep_head_t *h = zero ? lc_xcalloc(1, total) : lc_xmalloc(total);
    h->size = n;
    return h + 1;
}

/* A kept block for n bytes (the first of n's bin that fits, else of the
 * next two bins: at most 4 times n), or NULL. */
static void *keep_take(size_t n)
{
    if (!KEEP_ENABLED || n < KEEP_MIN)
        return NULL;
    for (unsigned b = keep_bin(n); b < keep_bin(n) + 3 && b < 64; b++) {
        for (keep_head_t **at = &kept.bins[b]; *at; at = &(*at)->next) {
            keep_head_t *h = *at;
            if (h->size < n || h->size / 4 > n)
                continue;
            *at = h->next;
            kept.n--;
            kept.bytes -= h->size;
            keep_unreserve(h->size);
            return h + 1;
        }
    }
    return NULL;
}

void *jfr_keep_alloc(size_t n)
{
    void *p = keep_take(n);
    return p ? p : keep_new(n, false);
}

void *jfr_keep_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return keep_new(SIZE_MAX, false); /* aborts, as lc_xcalloc would */
    void *p = keep_take(n * size);
    if (!p)
        return keep_new(n * size, true);
    memset(p, 0, n * size);
    return p;
}

/* The capacity lc_xgrow picks: the old one (8 at first) doubled until need
 * fits; SIZE_MAX past the top. */
static size_t keep_grown(size_t cap, size_t need)
{
    size_t c = cap ? cap : 8;
    if (c >= need)
        return c;
    c <<= __builtin_clzll((unsigned long long)c) - __builtin_clzll((unsigned long long)need);
    if (c >= need)
        return c;
    return c <= SIZE_MAX / 2 ? c * 2 : SIZE_MAX;
}

void *jfr_keep_grow(void *p, size_t *cap, size_t need, size_t size)
{
    if (need <= *cap)
        return p;
    size_t c = keep_grown(*cap, need);
    if (c > SIZE_MAX / size)
        return keep_new(SIZE_MAX, false);
    void *q = jfr_keep_alloc(c * size);
    if (p) {
        memcpy(q, p, *cap * size);
        jfr_keep_free(p);
    }
    *cap = c;
    return q;
}

void jfr_keep_free(void *p)
{
    if (!p)
        return;
    keep_head_t *h = (keep_head_t *)p - 1;
    if (KEEP_ENABLED && h->size >= KEEP_MIN && kept.n < KEEP_BLOCKS && keep_reserve(h->size)) {
        if (!kept.registered) {
            pthread_once(&keep_once, keep_key_make);
            kept.registered = keep_key_made && pthread_setspecific(keep_key, &kept) == 0;
        }
        if (!kept.registered)
            keep_unreserve(h->size);
        if (kept.registered) {
            unsigned b = keep_bin(h->size);
            h->next = kept.bins[b];
            kept.bins[b] = h;
            kept.n++;
            kept.bytes += h->size;
            return;
        }
    }
    lc_free(h);
}

/* ---------------------------------------------------------------- id maps */

/* Open addressing, u64 key -> u32 value; UINT32_MAX marks a free slot. Key
 * and value share a slot, so a probe touches one cache line. */
typedef struct jslot_s {
    uint64_t key;
    uint32_t val;
} jslot_t;

typedef struct jhash_s {
    jslot_t *slots;
    size_t cap, n;
} jhash_t;

static size_t jhash_slot(const jhash_t *m, uint64_t k)
{
    size_t i = (size_t)((k * 0x9E3779B97F4A7C15ull) >> 20) & (m->cap - 1);
    while (m->slots[i].val != UINT32_MAX && m->slots[i].key != k)
        i = (i + 1) & (m->cap - 1);
    return i;
}

/* Room for one more entry at a load of at most one half. */
static void jhash_grow(jhash_t *m)
{
    if ((m->n + 1) * 2 <= m->cap)
        return;
    jhash_t old = *m;
    m->cap = old.cap ? old.cap * 2 : 64;
    m->slots = jfr_keep_alloc(m->cap * sizeof(*m->slots));
    memset(m->slots, 0xff, m->cap * sizeof(*m->slots));
    for (size_t i = 0; i < old.cap; i++) {
        if (old.slots[i].val != UINT32_MAX)
            m->slots[jhash_slot(m, old.slots[i].key)] = old.slots[i];
    }
    jfr_keep_free(old.slots);
}

/* Sets k's value; true when k is new. */
static bool jhash_put(jhash_t *m, uint64_t k, uint32_t v)
{
    jhash_grow(m);
    jslot_t *at = &m->slots[jhash_slot(m, k)];
    bool fresh = at->val == UINT32_MAX;
    m->n += fresh;
    *at = (jslot_t){k, v};
    return fresh;
}

static uint32_t jhash_get(const jhash_t *m, uint64_t k)
{
    return m->cap ? m->slots[jhash_slot(m, k)].val : UINT32_MAX;
}

/* Pool ids -> indexes. The JDK numbers a chunk's symbols, classes, methods
 * and stack traces upwards from a base, densely enough (goland-multichunk:
 * every method id below the largest, one symbol id in 7) that ids kept in
 * pages of JPAGE values, indexed by the id's low bits, take 4 bytes an id
 * where a hash slot takes 32 at its load: a pool read in id order fills its
 * pages front to back, and the name lookups that follow mostly hit the
 * cache, where the hash scattered neighbouring ids (a miss each: 14 % of
 * goland-multichunk's time). A page is made only while the pages hold at
 * most JPAGE_SLACK slots an id held, past a free allowance, so sparse ids
 * cost no more memory than the hash did: the ids of a page refused go to
 * the hash, and the page directory remembers which. */
#define JPAGE_BITS 10
#define JPAGE ((uint64_t)1 << JPAGE_BITS)
#define JPAGE_SLACK 8
#define JPAGE_FREE 64            /* pages made before the slack is asked for */
#define JPAGE_HASHED 0xfffffffeu /* a directory value: the page's ids are in hashed */
/* Pages of ids below JLOW x JPAGE are also found without the directory:
 * the JDK's method, class and stack trace ids and a first chunk's symbols
 * (async-profiler's thread states are asked for every event). */
#define JLOW 64

typedef struct jmap_s {
    uint32_t *low[JLOW]; /* the pages kept of the first page numbers, else NULL */
    jhash_t dir;         /* page number -> index in pages, or JPAGE_HASHED */
    uint32_t **pages;
    size_t n_pages, cap_pages;
    jhash_t hashed;
    size_t n; /* ids held, in pages and hashed */
} jmap_t;

/* The directory value of a page number seen for the first time. */
static uint32_t jmap_new_page(jmap_t *m, uint64_t no)
{
    uint32_t d = JPAGE_HASHED;
    if ((m->n_pages + 1) * JPAGE <= JPAGE_SLACK * m->n + JPAGE_FREE * JPAGE) {
        m->pages = jfr_keep_grow(m->pages, &m->cap_pages, m->n_pages + 1, sizeof(*m->pages));
        uint32_t *page = jfr_keep_alloc(JPAGE * sizeof(*page));
        memset(page, 0xff, JPAGE * sizeof(*page));
        m->pages[m->n_pages] = page;
        d = (uint32_t)m->n_pages++;
        if (no < JLOW)
            m->low[no] = page;
    }
    jhash_put(&m->dir, no, d);
    return d;
}

static void jmap_put(jmap_t *m, uint64_t k, uint32_t v)
{
    uint64_t no = k >> JPAGE_BITS;
    if (no < JLOW && m->low[no]) {
        uint32_t *at = &m->low[no][k & (JPAGE - 1)];
        m->n += *at == UINT32_MAX;
        *at = v;
        return;
    }
    uint32_t d = jhash_get(&m->dir, no);
    if (d == UINT32_MAX)
        d = jmap_new_page(m, no);
    if (d == JPAGE_HASHED) {
        m->n += jhash_put(&m->hashed, k, v);
        return;
    }
    uint32_t *at = &m->pages[d][k & (JPAGE - 1)];
    m->n += *at == UINT32_MAX;
    *at = v;
}

static inline uint32_t jmap_get(const jmap_t *m, uint64_t k)
{
    uint64_t no = k >> JPAGE_BITS;
    if (no < JLOW && m->low[no])
        return m->low[no][k & (JPAGE - 1)];
    uint32_t d = jhash_get(&m->dir, no);
    if (d == UINT32_MAX)
        return UINT32_MAX;
    return d == JPAGE_HASHED ? jhash_get(&m->hashed, k) : m->pages[d][k & (JPAGE - 1)];
}

static void jmap_free(jmap_t *m)
{
    for (size_t i = 0; i < m->n_pages; i++)
        jfr_keep_free(m->pages[i]);
    jfr_keep_free(m->pages);
    jfr_keep_free(m->dir.slots);
    jfr_keep_free(m->hashed.slots);
}

/* ---------------------------------------------------------------- metadata model */

typedef enum {
    K_STRUCT = 0,
    K_BOOL,
    K_BYTE,
    K_CHAR,
    K_SHORT,
    K_INT,
    K_LONG,
    K_FLOAT,
    K_DOUBLE,
    K_STRING
} jkind_t;

/* Where a field's value goes while a struct is read (0: skipped). */
enum {
    S_NONE = 0,
    /* an event's, first: read_event's values are S_EV_SETTING + 1 wide */
    S_EV_STACK,
    S_EV_STATE,
    S_EV_CONTEXT,
    S_EV_SPAN_ID,
    S_EV_SPAN_NAME,
    S_EV_VALUE,
    S_EV_NAME,
    S_EV_SETTING,
    S_SYMBOL_STRING, /* jdk.types.Symbol.string */
    S_CLASS_NAME,    /* java.lang.Class.name -> Symbol */
    S_METHOD_TYPE,   /* jdk.types.Method.type -> Class */
    S_METHOD_NAME,   /* jdk.types.Method.name -> Symbol */
    S_STATE_NAME,    /* jdk.types.ThreadState.name */
    S_FRAMES,        /* jdk.types.StackTrace.frames (inline StackFrame[]) */
    S_FRAME_METHOD,  /* jdk.types.StackFrame.method -> Method */
    S_FRAME_LINE,    /* jdk.types.StackFrame.lineNumber */
    S_COUNT_
};

typedef struct jclass_s jclass_t;

/* How a field is laid out in the chunk, decided once its type is known:
 * most fields are one LEB128 (a pool reference or a compressed integer) or
 * one byte, and a class made only of those is read without the generic walk
 * (read_flat): that is every event, Method, Class and StackFrame. */
typedef enum { W_OTHER = 0, W_U8, W_VARINT } jwire_t;

typedef struct jfield_s {
    const char *name;
    uint64_t type;
    const jclass_t *t; /* the type, resolved once the metadata is read */
    bool cp, array;
    uint8_t slot;
    uint8_t wire; /* jwire_t */
} jfield_t;

/* What a class is to the converter. */
typedef enum {
    C_OTHER = 0,
    C_SYMBOL,
    C_CLASS,
    C_METHOD,
    C_STATE,
    C_STACKTRACE,
    C_STACKFRAME,
    C_STRING
} jrole_t;

struct jclass_s {
    uint64_t id;
    const char *name;
    jfield_t *fields;
    size_t n_fields;
    jkind_t kind;
    jrole_t role;
    jfr_event_kind_t event;
    bool flat; /* every field W_U8 or W_VARINT */
    /* StackFrame only: every field W_VARINT (as the JDK and async-profiler
     * write it), and which fields hold the method and the line (-1: none) */
    bool all_varint;
    int method_at, line_at;
    bool lazy; /* a Symbol of one string field: read_lazy_symbol */
};

typedef struct jstr_s {
    const char *s; /* NUL-terminated, arena */
    uint32_t len;
} jstr_t;

/* A value is set when its gen is the reader's current one: starting the
 * next entry or event is one increment, not a clear of every slot. */
typedef struct jval_s {
    uint64_t u;
    jstr_t s;
    uint32_t gen;
} jval_t;

/* ---------------------------------------------------------------- pools */

/* A Method pool entry. Its name, once asked for, is kept (full) until the
 * entry is rewritten by a later checkpoint or chunk; a caller may have
 * derived things from it (function and location ids) that it keeps across
 * chunks while jfr_renames says no name changed, so a rewritten entry whose
 * name was given keeps that name (prev) and is checked when the chunk's
 * pools are read (check_renames): the JDK writes every method again in each
 * chunk, with new symbol ids but the same names. */
typedef struct jmethod_s {
    uint64_t cls, name;
    const char *full; /* cached "Class.method", NULL until asked */
    const char *prev; /* the name given before the entry was rewritten */
    /* The located bytes of the class and method name symbols full was made
     * of (end 0: not located): equal bytes decode to equal names. */
    uint32_t cls_pos, cls_end, name_pos, name_end;
    uint32_t full_len;
    bool early;   /* full is prev, set by check_renames: not asked since */
    bool pending; /* in jfr_t.pending */
} jmethod_t;

/* A Symbol pool entry. Most symbols (descriptors, packages, classes of no
 * sampled method) are never named in a profile, so a UTF-8 or Latin-1
 * string is only located when the pool is read and decoded (and its
 * generated part merged) the first time a frame asks: s is NULL until then. */
typedef struct jsym_s {
    const char *s;
    uint32_t len;
    uint32_t pos, end; /* the encoded string in the recording, while s is NULL */
    /* where same_located last found these bytes again (0: nowhere yet):
     * the methods of one class share its symbol, checked once */
    uint32_t same_at;
} jsym_t;

/* A stack trace: n frames at off in the frame array, or, when lazy_fields
 * is set, n frames of that many varint fields each at byte off of the
 * recording (located: jfr_stack_raw, or decoded by jfr_stack_at). */
typedef struct jstack_s {
    uint32_t off, n;
    uint8_t lazy_fields;
} jstack_t;

struct jfr_s {
    const uint8_t *buf;
    size_t len;
    lc_arena_t *arena;      /* strings that outlive a chunk */
    lc_arena_t *meta_arena; /* one chunk's metadata */
    lc_status_t *st;
    /* the current chunk */
    size_t chunk_start, chunk_end, cp_off, meta_off;
    bool compressed;
    jclass_t *classes;
    size_t n_classes, cap_classes;
    jmap_t class_ix;
    /* classes of ids below DIRECT_CLASSES (every event type the JDK and
     * async-profiler write), by id: the lookup done for every event */
    const jclass_t **direct;
    uint64_t t_frame; /* class id of jdk.types.StackFrame */
    /* pools: id -> index into the arrays below */
    jmap_t sym_ix, str_ix, cls_ix, meth_ix, state_ix, stack_ix;
    jsym_t *syms;
    jstr_t *strs;
    uint8_t *states; /* jfr_state_t of each ThreadState entry */
    size_t n_syms, cap_syms, n_strs, cap_strs, n_states, cap_states;
    /* the last state asked for: events of one recording name a handful */
    uint64_t last_state_id;
    jfr_state_t last_state; /* JFR_STATE_UNKNOWN: nothing cached */
    uint64_t *clss;         /* class -> name symbol */
    size_t n_clss, cap_clss;
    jmethod_t *meths;
    size_t n_meths, cap_meths;
    /* methods rewritten after their name was given, or named by
     * check_renames and not asked since (jmethod_t) */
    uint32_t *pending;
    size_t n_pending, cap_pending;
    uint64_t renames;    /* chunks whose pools changed a given name (jfr_renames) */
    bool all_compressed; /* every chunk so far: a located string decodes alike */
    jstack_t *stacks;
    size_t n_stacks, cap_stacks;
    jfr_frame_t *frames;
    size_t n_frames, cap_frames;
    /* Frames of the usual layout are located, not copied, while a stack
     * trace pool is read (most of a deep-stacked recording's bytes): the
     * entry being read may take its one frame array lazily (lazy_ok), and
     * pending_* then hold it until keep_entry. lazy_frames counts them
     * against LC_JFR_MAX_FRAMES as if stored. */
    size_t lazy_min; /* stack trace pools this large are located, not copied */
    bool lazy_pool;  /* the stack trace pool being read is that large */
    bool lazy_ok;
    uint8_t pending_fields; /* 0: nothing pending */
    uint32_t pending_pos, pending_n;
    size_t lazy_frames;
    jfr_frame_t *decoded; /* jfr_stack_at's frames of a lazy stack */
    size_t cap_decoded;
    size_t pool_entries;
    size_t events;
    /* scratch while reading */
    jval_t vals[S_COUNT_];
    uint32_t gen; /* of the entry or event being read; 0 is never current */
};

/* ---------------------------------------------------------------- scratch values */

/* Every slot unset, for the next pool entry or event. */
static void vals_next(jfr_t *j)
{
    if (++j->gen == 0) { /* wrapped: old gens could read as current */
        memset(j->vals, 0, sizeof(j->vals));
        j->gen = 1;
    }
}

static bool val_set(const jfr_t *j, int slot)
{
    return j->vals[slot].gen == j->gen;
}

static uint64_t val_u(const jfr_t *j, int slot, uint64_t unset)
{
    return val_set(j, slot) ? j->vals[slot].u : unset;
}

/* ---------------------------------------------------------------- errors */

/* A malformed file: 422 "invalid jfr: ...". Always returns -1. */
static int bad(jfr_t *j, const char *fmt, ...) LC_PRINTF(2, 3);
static int bad(jfr_t *j, const char *fmt, ...)
{
    if (j->st->code != LC_CODE_OK)
        return -1;
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    lc_status_set_http(j->st, 422, LC_CODE_INVALID_ARGUMENT, "invalid jfr: %s", msg);
    return -1;
}

/* A cap passed: 413 "profile too large: ...". Always returns -1. */
static int too_big(jfr_t *j, const char *what, size_t limit)
{
    if (j->st->code != LC_CODE_OK)
        return -1;
    lc_status_set_http(j->st, 413, LC_CODE_INVALID_ARGUMENT,
                       "profile too large: jfr %s (limit %zu)", what, limit);
    return -1;
}

/* ---------------------------------------------------------------- cursor */

typedef struct jr_s {
    const uint8_t *p, *end, *base;
    jfr_t *j;
    bool err;
} jr_t;

static jr_t jr_at(jfr_t *j, size_t pos, size_t end)
{
    return (jr_t){.p = j->buf + pos, .end = j->buf + end, .base = j->buf, .j = j};
}

static bool jr_fail(jr_t *r)
{
    if (!r->err)
        bad(r->j, "truncated or malformed value at offset %zu", (size_t)(r->p - r->base));
    r->err = true;
    r->p = r->end;
    return false;
}

static uint8_t jr_u8(jr_t *r)
{
    if (r->p >= r->end) {
        jr_fail(r);
        return 0;
    }
    return *r->p++;
}

static uint64_t jr_be(jr_t *r, size_t n)
{
    if (r->p > r->end || (size_t)(r->end - r->p) < n) {
        jr_fail(r);
        return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v << 8 | r->p[i];
    r->p += n;
    return v;
}

/* JFR's LEB128: at most 9 bytes, the 9th contributing all its 8 bits. */
static uint64_t jr_varint_checked(jr_t *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 56; shift += 7) {
        if (r->p >= r->end) {
            jr_fail(r);
            return 0;
        }
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80)
            return v;
    }
    return v | (uint64_t)jr_u8(r) << 56;
}

/* With 9 bytes left no byte needs its own bounds check (method and stack
 * ids of the JDK are long varints, one per frame). */
static uint64_t jr_varint_long(jr_t *r)
{
    if (r->p > r->end || r->end - r->p < 9)
        return jr_varint_checked(r);
    const uint8_t *p = r->p;
    uint64_t v = 0;
    for (unsigned i = 0; i < 8; i++) {
        v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (p[i] < 0x80) {
            r->p = p + i + 1;
            return v;
        }
    }
    r->p = p + 9;
    return v | (uint64_t)p[8] << 56;
}

/* Most values (pool references in small pools, line numbers, flags) take
 * one byte, and most others two (ids of pools of up to 16 k entries): those
 * cases without the call and the loop. */
static inline uint64_t jr_varint(jr_t *r)
{
    if (r->p < r->end && *r->p < 0x80)
        return *r->p++;
    if (r->end - r->p >= 2 && r->p[1] < 0x80) { /* p[0] is 0x80 or more */
        uint64_t v = (uint64_t)(r->p[0] & 0x7f) | (uint64_t)r->p[1] << 7;
        r->p += 2;
        return v;
    }
    return jr_varint_long(r);
}

static uint64_t jr_long(jr_t *r)
{
    return r->j->compressed ? jr_varint(r) : jr_be(r, 8);
}

static uint32_t jr_int(jr_t *r)
{
    return r->j->compressed ? (uint32_t)jr_varint(r) : (uint32_t)jr_be(r, 4);
}

/* A count of items that each take at least one byte: capped by what is left. */
static size_t jr_count(jr_t *r)
{
    uint32_t n = jr_int(r);
    if (r->p > r->end || n > (size_t)(r->end - r->p)) {
        jr_fail(r);
        return 0;
    }
    return n;
}

static void utf8_put(char **o, uint32_t c)
{
    uint8_t *p = (uint8_t *)*o;
    if (c >= 0xd800 && c <= 0xdfff)
        c = 0xfffd; /* a lone surrogate half (pairs are rare in class names) */
    if (c < 0x80) {
        *p++ = (uint8_t)c;
    } else if (c < 0x800) {
        *p++ = (uint8_t)(0xc0 | c >> 6);
        *p++ = (uint8_t)(0x80 | (c & 0x3f));
    } else {
        *p++ = (uint8_t)(0xe0 | c >> 12);
        *p++ = (uint8_t)(0x80 | (c >> 6 & 0x3f));
        *p++ = (uint8_t)(0x80 | (c & 0x3f));
    }
    *o = (char *)p;
}

static jstr_t jr_string_bytes(jr_t *r, bool latin1)
{
    size_t n = jr_count(r);
    char *s = lc_arena_alloc(r->j->arena, latin1 ? n * 2 + 1 : n + 1);
    if (!s) {
        too_big(r->j, "strings", LC_JFR_MEMORY);
        jr_fail(r);
        return (jstr_t){"", 0};
    }
    char *o = s;
    if (latin1) {
        for (size_t i = 0; i < n; i++)
            utf8_put(&o, r->p[i] ? r->p[i] : '?'); /* a NUL cannot travel in a C string */
    } else {                                       /* UTF-8, nearly every string: copied whole */
        memcpy(s, r->p, n);
        for (char *z = memchr(s, 0, n); z; z = memchr(z + 1, 0, n - (size_t)(z + 1 - s)))
            *z = '?';
        o = s + n;
    }
    *o = 0;
    r->p += n;
    return (jstr_t){s, (uint32_t)(o - s)};
}

static jstr_t jr_string_chars(jr_t *r)
{
    size_t n = jr_count(r);
    char *s = lc_arena_alloc(r->j->arena, n * 3 + 1);
    if (!s) {
        too_big(r->j, "strings", LC_JFR_MEMORY);
        jr_fail(r);
        return (jstr_t){"", 0};
    }
    char *o = s;
    for (size_t i = 0; i < n && !r->err; i++) {
        uint32_t c = r->j->compressed ? (uint32_t)jr_varint(r) : (uint32_t)jr_be(r, 2);
        utf8_put(&o, c ? c & 0xffff : '?');
    }
    *o = 0;
    return (jstr_t){s, (uint32_t)(o - s)};
}

static jstr_t jr_string(jr_t *r)
{
    uint8_t enc = jr_u8(r);
    switch (enc) {
    case 0:
    case 1:
        return (jstr_t){"", 0};
    case 2: {
        uint32_t ix = jmap_get(&r->j->str_ix, jr_long(r));
        return ix == UINT32_MAX ? (jstr_t){"", 0} : r->j->strs[ix];
    }
    case 3:
        return jr_string_bytes(r, false);
    case 4:
        return jr_string_chars(r);
    case 5:
        return jr_string_bytes(r, true);
    default:
        if (!r->err)
            bad(r->j, "unknown string encoding %u at offset %zu", enc,
                (size_t)(r->p - r->base - 1));
        jr_fail(r);
        return (jstr_t){"", 0};
    }
}

/* ---------------------------------------------------------------- values */

static inline const jclass_t *class_of(jfr_t *j, uint64_t id)
{
    if (id < DIRECT_CLASSES && j->direct)
        return j->direct[id];
    uint32_t ix = jmap_get(&j->class_ix, id);
    return ix == UINT32_MAX ? NULL : &j->classes[ix];
}

static void read_struct(jr_t *r, const jclass_t *c, int depth);

static void frame_push(jr_t *r)
{
    jfr_t *j = r->j;
    if (j->n_frames >= LC_JFR_MAX_FRAMES) {
        too_big(j, "stack frames", LC_JFR_MAX_FRAMES);
        jr_fail(r);
        return;
    }
    j->frames = jfr_keep_grow(j->frames, &j->cap_frames, j->n_frames + 1, sizeof(*j->frames));
    /* Pyroscope reads lineNumber as uint32: -1 becomes 4294967295 */
    j->frames[j->n_frames++] = (jfr_frame_t){.method = j->vals[S_FRAME_METHOD].u,
                                             .line = (int64_t)(uint32_t)j->vals[S_FRAME_LINE].u};
}

/* One value of field f (not the array around it). */
static void jfr_read_value(jr_t *r, const jfield_t *f, int depth)
{
    jval_t *out = f->slot ? &r->j->vals[f->slot] : NULL;
    if (f->cp) {
        uint64_t v = jr_long(r);
        if (out)
            *out = (jval_t){.u = v, .gen = r->j->gen};
        return;
    }
    const jclass_t *t = f->t ? f->t : class_of(r->j, f->type);
    if (!t) {
        bad(r->j, "field %s has unknown type %llu", f->name, (unsigned long long)f->type);
        jr_fail(r);
        return;
    }
    uint64_t v = 0;
    switch (t->kind) {
    case K_BOOL:
    case K_BYTE:
        v = jr_u8(r);
        break;
    case K_CHAR:
    case K_SHORT:
        v = r->j->compressed ? jr_varint(r) : jr_be(r, 2);
        break;
    case K_INT:
        v = jr_int(r);
        break;
    case K_LONG:
        v = jr_long(r);
        break;
    case K_FLOAT:
        v = jr_be(r, 4);
        break;
    case K_DOUBLE:
        v = jr_be(r, 8);
        break;
    case K_STRING: {
        jstr_t s = jr_string(r);
        if (out)
            *out = (jval_t){.s = s, .gen = r->j->gen};
        return;
    }
    case K_STRUCT:
        if (f->slot == S_FRAMES) /* each frame starts blank */
            r->j->vals[S_FRAME_METHOD] = r->j->vals[S_FRAME_LINE] = (jval_t){0};
        read_struct(r, t, depth + 1);
        if (f->slot == S_FRAMES && !r->err)
            frame_push(r);
        return;
    }
    if (out)
        *out = (jval_t){.u = v, .gen = r->j->gen};
}

/* A class whose fields are all W_U8 or W_VARINT (c->flat), read without
 * the generic walk: the same values land in the same slots. */
static void read_flat(jr_t *r, const jclass_t *c)
{
    jfr_t *j = r->j;
    for (size_t i = 0; i < c->n_fields; i++) {
        const jfield_t *f = &c->fields[i];
        uint64_t v = f->wire == W_U8 ? jr_u8(r) : jr_varint(r);
        if (f->slot)
            j->vals[f->slot] = (jval_t){.u = v, .gen = j->gen};
    }
}

/* How many bytes jfr_varint_ends marked: one bit per byte summed by a multiply
 * (__builtin_popcountll is a libgcc call without -mpopcnt). */
static inline size_t varint_ends_count(uint64_t ends)
{
    return (size_t)(((ends >> 7) * 0x0101010101010101ull) >> 56);
}

/* Unchecked LEB128 for the frame loop and the events: the caller made sure
 * 9 bytes remain. (A branch-free gather of the 7-bit groups from one word
 * took more instructions and, by callgrind's branch model, more mispredicts.) */
static inline const uint8_t *varint_at(const uint8_t *p, uint64_t *v)
{
    if (p[0] < 0x80) { /* line numbers, frame types and many ids */
        *v = p[0];
        return p + 1;
    }
    uint64_t x = 0;
    for (unsigned i = 0; i < 8; i++) {
        x |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (p[i] < 0x80) {
            *v = x;
            return p + i + 1;
        }
    }
    *v = x | (uint64_t)p[8] << 56;
    return p + 9;
}

/* The 7-bit groups of a varint's bytes (little-endian in x, at most 7 of
 * them, the bytes after it cleared) put together. */
static inline uint64_t varint_gather(uint64_t x)
{
    return (x & 0x7f) | (x >> 1 & 0x3f80) | (x >> 2 & 0x1fc000) | (x >> 3 & 0xfe00000) |
           (x >> 4 & 0x7f0000000ull) | (x >> 5 & 0x3f800000000ull) | (x >> 6 & 0x1fc0000000000ull);
}

/* The low `bytes` bytes of a word (bytes <= 7). */
static inline uint64_t low_bytes(uint64_t w, unsigned bytes)
{
    return w & ((1ull << (8 * bytes)) - 1);
}

/* A frame of the usual layout whose n_fields varints all end within the 8
 * bytes at p (8 readable): method and line taken from one load, the ends
 * found by bit tricks, so no load waits on the one before (a frame's
 * fields are 4-8 bytes in the JDK's recordings). Returns the frame's end,
 * or NULL when it is longer: the caller reads it field by field. */
static inline const uint8_t *frame_in_word(const uint8_t *p, size_t n_fields, uint64_t *method,
                                           uint64_t *line)
{
    uint64_t w = jfr_le64(p), ends = jfr_varint_ends(w);
    if (varint_ends_count(ends) < n_fields)
        return NULL;
    unsigned method_len = (unsigned)__builtin_ctzll(ends) / 8 + 1;
    uint64_t rest = ends & (ends - 1);
    unsigned line_end = (unsigned)__builtin_ctzll(rest) / 8 + 1;
    for (size_t i = 2; i < n_fields; i++)
        rest &= rest - 1;
    *method = varint_gather(low_bytes(w, method_len));
    *line = varint_gather(low_bytes(w >> (8 * method_len), line_end - method_len));
    return p + __builtin_ctzll(rest) / 8 + 1;
}

/* One frame of an all-varint StackFrame with 9 bytes per field left: no
 * bounds check per byte, the fields nobody reads skipped undecoded. */
static void read_frame_unchecked(jr_t *r, const jclass_t *frame, uint64_t *method, uint64_t *line)
{
    const uint8_t *p = r->p;
    for (int i = 0; i < (int)frame->n_fields; i++) {
        if (i == frame->method_at)
            p = varint_at(p, method);
        else if (i == frame->line_at)
            p = varint_at(p, line);
        else
            p = jfr_varint_skip(p);
    }
    r->p = p;
}

static void read_frame_checked(jr_t *r, const jclass_t *frame, uint64_t *method, uint64_t *line)
{
    for (size_t i = 0; i < frame->n_fields; i++) {
        const jfield_t *f = &frame->fields[i];
        uint64_t v = f->wire == W_U8 ? jr_u8(r) : jr_varint(r);
        if (f->slot == S_FRAME_METHOD)
            *method = v;
        else if (f->slot == S_FRAME_LINE)
            *line = v;
    }
}

/* n frames of the usual all-varint StackFrame layout (method, lineNumber,
 * then fields nobody reads, as both the JDK and async-profiler write it),
 * 9 bytes per field known to remain, or every varint known to end within
 * the buffer (a lazy stack): no check per frame. Returns the end. */
static const uint8_t *decode_frames_usual(const uint8_t *p, size_t n_fields, jfr_frame_t *out,
                                          size_t n)
{
    for (size_t k = 0; k < n; k++) {
        uint64_t method, line;
        const uint8_t *word_end = frame_in_word(p, n_fields, &method, &line);
        if (word_end)
            p = word_end;
        else {
            p = varint_at(p, &method);
            p = varint_at(p, &line);
            for (size_t i = 2; i < n_fields; i++)
                p = jfr_varint_skip(p);
        }
        /* as frame_push: lineNumber read as uint32 */
        out[k] = (jfr_frame_t){.method = method, .line = (int64_t)(uint32_t)line};
    }
    return p;
}

/* Past k varints from p without decoding them, a word at a time (a varint
 * ends at its first byte under 0x80); NULL when they do not all end before
 * end, or when a run of 8 continuation bytes is met: there varint_at reads
 * a 9-byte varint whose last byte may have its top bit set, so counting
 * ends would disagree with decoding, and the caller reads the frames now. */
static const uint8_t *skip_stack_varints(const uint8_t *p, const uint8_t *end, size_t k)
{
    size_t run = 0; /* continuation bytes just before p */
    while (k && end - p >= 8) {
        uint64_t ends = jfr_varint_ends(jfr_le64(p));
        if (!ends || run + (size_t)__builtin_ctzll(ends) / 8 >= 8)
            return NULL;
        size_t c = varint_ends_count(ends);
        if (c >= k) {
            for (size_t i = 1; i < k; i++)
                ends &= ends - 1; /* drop the ends before the k-th */
            return p + __builtin_ctzll(ends) / 8 + 1;
        }
        k -= c;
        run = (size_t)__builtin_clzll(ends) / 8;
        p += 8;
    }
    for (; k && p < end; p++) {
        if (*p < 0x80)
            k--, run = 0;
        else if (++run >= 8)
            return NULL;
    }
    return k ? NULL : p;
}

/* The pending lazy frames into the frame array: a second frame array in
 * one stack trace entry follows them there. */
static void materialize_pending(jfr_t *j)
{
    if (!j->pending_fields)
        return;
    size_t n = j->pending_n;
    j->frames = jfr_keep_grow(j->frames, &j->cap_frames, j->n_frames + n, sizeof(*j->frames));
    decode_frames_usual(j->buf + j->pending_pos, j->pending_fields, j->frames + j->n_frames, n);
    j->n_frames += n;
    j->lazy_frames -= n;
    j->pending_fields = 0;
}

/* The frames of the usual layout located and skipped, for jfr_stack_at to
 * decode if a sample names the stack; false, r untouched, when they cannot
 * be (not a stack trace entry's first frame array, or see skip_stack_varints). */
static bool locate_frames_usual(jr_t *r, const jclass_t *frame, size_t n)
{
    jfr_t *j = r->j;
    if (!j->lazy_ok || j->pending_fields || r->p > r->end || frame->n_fields > UINT8_MAX ||
        (size_t)(r->p - r->base) > UINT32_MAX)
        return false;
    const uint8_t *end = skip_stack_varints(r->p, r->end, n * frame->n_fields);
    /* decode_frames_usual skips a field by loading the 8 bytes where it
     * starts: the last one may start just before end, so 8 bytes of the
     * recording must follow it (a pool at the very end is copied) */
    if (!end || (size_t)(j->buf + j->len - end) < 8)
        return false;
    j->pending_pos = (uint32_t)(r->p - r->base);
    j->pending_n = (uint32_t)n;
    j->pending_fields = (uint8_t)frame->n_fields;
    j->lazy_frames += n;
    r->p = end;
    return true;
}

/* A stack trace's frames when StackFrame is flat: the bulk of a recording,
 * so read straight into the frame array, method and line by their slots. */
static void read_flat_frames(jr_t *r, const jclass_t *frame, size_t n)
{
    jfr_t *j = r->j;
    if (n > LC_JFR_MAX_FRAMES - j->n_frames - j->lazy_frames) {
        too_big(j, "stack frames", LC_JFR_MAX_FRAMES);
        jr_fail(r);
        return;
    }
    if (n == 0)
        return;
    bool usual = frame->all_varint && frame->method_at == 0 && frame->line_at == 1;
    if (usual && locate_frames_usual(r, frame, n))
        return;
    materialize_pending(j);
    j->frames = jfr_keep_grow(j->frames, &j->cap_frames, j->n_frames + n, sizeof(*j->frames));
    jfr_frame_t *out = j->frames + j->n_frames;
    size_t room = 9 * frame->n_fields; /* n_fields <= LC_JFR_MAX_FIELDS */
    if (usual && r->p <= r->end && (size_t)(r->end - r->p) / room >= n) {
        r->p = decode_frames_usual(r->p, frame->n_fields, out, n);
        j->n_frames += n;
        return;
    }
    for (size_t k = 0; k < n; k++) {
        uint64_t method = 0, line = 0;
        if (frame->all_varint && r->p <= r->end && (size_t)(r->end - r->p) >= room)
            read_frame_unchecked(r, frame, &method, &line);
        else
            read_frame_checked(r, frame, &method, &line);
        if (r->err)
            return;
        /* as frame_push: lineNumber read as uint32 */
        out[k] = (jfr_frame_t){.method = method, .line = (int64_t)(uint32_t)line};
    }
    j->n_frames += n;
}

static void read_struct(jr_t *r, const jclass_t *c, int depth)
{
    if (c->flat) {
        read_flat(r, c);
        return;
    }
    if (depth > LC_JFR_MAX_NESTING) {
        bad(r->j, "values nested deeper than %d", LC_JFR_MAX_NESTING);
        jr_fail(r);
        return;
    }
    for (size_t i = 0; i < c->n_fields && !r->err; i++) {
        const jfield_t *f = &c->fields[i];
        if (!f->array) {
            jfr_read_value(r, f, depth);
            continue;
        }
        size_t n = jr_count(r);
        if (f->slot == S_FRAMES && n > LC_JFR_MAX_STACK_DEPTH) {
            too_big(r->j, "stack depth", LC_JFR_MAX_STACK_DEPTH);
            jr_fail(r);
            return;
        }
        if (f->slot == S_FRAMES && f->t->flat) {
            read_flat_frames(r, f->t, n);
            continue;
        }
        for (size_t k = 0; k < n && !r->err; k++)
            jfr_read_value(r, f, depth);
    }
}

/* ---------------------------------------------------------------- metadata */

typedef struct jelem_s {
    const char *name;
    size_t n_children;
    const char *a_id, *a_name, *a_class, *a_cp, *a_dim;
} jelem_t;

/* Where an attribute the reader uses goes, NULL for the others. Tested by
 * first letter before one compare: small recordings spend a tenth of their
 * time in metadata, most of it here. */
static const char **attribute_slot(jelem_t *e, const char *key)
{
    switch (key[0]) {
    case 'i':
        return !strcmp(key, "id") ? &e->a_id : NULL;
    case 'n':
        return !strcmp(key, "name") ? &e->a_name : NULL;
    case 'c':
        return !strcmp(key, "class") ? &e->a_class : !strcmp(key, "constantPool") ? &e->a_cp : NULL;
    case 'd':
        return !strcmp(key, "dimension") ? &e->a_dim : NULL;
    default:
        return NULL;
    }
}

static bool read_element(jr_t *r, const char **strs, size_t n_strs, jelem_t *e)
{
    memset(e, 0, sizeof(*e));
    uint32_t name = jr_int(r);
    if (r->err || name >= n_strs)
        return r->err ? false : (bad(r->j, "metadata element name out of range"), jr_fail(r));
    e->name = strs[name];
    size_t n_attr = jr_count(r);
    for (size_t i = 0; i < n_attr && !r->err; i++) {
        uint32_t k = jr_int(r), v = jr_int(r);
        if (k >= n_strs || v >= n_strs)
            return r->err ? false : (bad(r->j, "metadata attribute out of range"), jr_fail(r));
        const char **slot = attribute_slot(e, strs[k]);
        if (slot)
            *slot = strs[v];
    }
    e->n_children = jr_count(r);
    return !r->err;
}

static bool skip_element(jr_t *r, const char **strs, size_t n_strs, int depth)
{
    jelem_t e;
    if (depth > LC_JFR_MAX_NESTING)
        return bad(r->j, "metadata nested deeper than %d", LC_JFR_MAX_NESTING), jr_fail(r);
    if (!read_element(r, strs, n_strs, &e))
        return false;
    for (size_t i = 0; i < e.n_children; i++) {
        if (!skip_element(r, strs, n_strs, depth + 1))
            return false;
    }
    return true;
}

static bool jfr_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s)
        return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - 9) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

static jkind_t kind_of(const char *name)
{
    static const struct {
        const char *name;
        jkind_t kind;
    } prim[] = {{"boolean", K_BOOL}, {"byte", K_BYTE},     {"char", K_CHAR},
                {"short", K_SHORT},  {"int", K_INT},       {"long", K_LONG},
                {"float", K_FLOAT},  {"double", K_DOUBLE}, {"java.lang.String", K_STRING}};
    for (size_t i = 0; i < sizeof(prim) / sizeof(prim[0]); i++) {
        if (!strcmp(name, prim[i].name))
            return prim[i].kind;
    }
    return K_STRUCT;
}

static void class_roles(jclass_t *c)
{
    static const struct {
        const char *name;
        jrole_t role;
        jfr_event_kind_t event;
    } known[] = {
        {"jdk.types.Symbol", C_SYMBOL, 0},
        {"java.lang.Class", C_CLASS, 0},
        {"jdk.types.Method", C_METHOD, 0},
        {"jdk.types.ThreadState", C_STATE, 0},
        {"jdk.types.StackTrace", C_STACKTRACE, 0},
        {"jdk.types.StackFrame", C_STACKFRAME, 0},
        {"java.lang.String", C_STRING, 0},
        {"jdk.ExecutionSample", C_OTHER, JFR_EV_EXECUTION_SAMPLE},
        {"profiler.WallClockSample", C_OTHER, JFR_EV_WALL_CLOCK_SAMPLE},
        {"jdk.ObjectAllocationInNewTLAB", C_OTHER, JFR_EV_ALLOC_IN_NEW_TLAB},
        {"jdk.ObjectAllocationOutsideTLAB", C_OTHER, JFR_EV_ALLOC_OUTSIDE_TLAB},
        {"jdk.ObjectAllocationSample", C_OTHER, JFR_EV_ALLOC_SAMPLE},
        {"jdk.JavaMonitorEnter", C_OTHER, JFR_EV_MONITOR_ENTER},
        {"jdk.ThreadPark", C_OTHER, JFR_EV_THREAD_PARK},
        {"profiler.LiveObject", C_OTHER, JFR_EV_LIVE_OBJECT},
        {"profiler.Malloc", C_OTHER, JFR_EV_MALLOC},
        {"jdk.ActiveSetting", C_OTHER, JFR_EV_ACTIVE_SETTING},
    };
    c->kind = kind_of(c->name);
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
        if (!strcmp(c->name, known[i].name)) {
            c->role = known[i].role;
            c->event = known[i].event;
        }
    }
}

/* The field of each event kind that holds its value. */
static const char *event_value_field(jfr_event_kind_t k)
{
    switch (k) {
    case JFR_EV_WALL_CLOCK_SAMPLE:
        return "samples";
    case JFR_EV_ALLOC_IN_NEW_TLAB:
        return "tlabSize";
    case JFR_EV_ALLOC_OUTSIDE_TLAB:
        return "allocationSize";
    case JFR_EV_ALLOC_SAMPLE:
        return "weight";
    case JFR_EV_MONITOR_ENTER:
    case JFR_EV_THREAD_PARK:
        return "duration";
    case JFR_EV_MALLOC:
        return "size";
    default:
        return NULL;
    }
}

/* Slot of a field of class c, given the shape the converter expects. */
static uint8_t field_slot(jfr_t *j, const jclass_t *c, const jfield_t *f)
{
    const jclass_t *t = class_of(j, f->type);
    bool scalar = !f->array && !f->cp && t;
    bool number = scalar && t->kind >= K_BYTE && t->kind <= K_LONG;
    bool string = scalar && t->kind == K_STRING;
    bool ref = f->cp && !f->array;
    const char *n = f->name;
    switch (c->role) {
    case C_SYMBOL:
        return string && !strcmp(n, "string") ? S_SYMBOL_STRING : S_NONE;
    case C_CLASS:
        return ref && !strcmp(n, "name") ? S_CLASS_NAME : S_NONE;
    case C_METHOD:
        return ref && !strcmp(n, "type")   ? S_METHOD_TYPE
               : ref && !strcmp(n, "name") ? S_METHOD_NAME
                                           : S_NONE;
    case C_STATE:
        return string && !strcmp(n, "name") ? S_STATE_NAME : S_NONE;
    case C_STACKTRACE:
        return f->array && !f->cp && f->type == j->t_frame && !strcmp(n, "frames") ? S_FRAMES
                                                                                   : S_NONE;
    case C_STACKFRAME:
        return ref && !strcmp(n, "method")          ? S_FRAME_METHOD
               : number && !strcmp(n, "lineNumber") ? S_FRAME_LINE
                                                    : S_NONE;
    default:
        break;
    }
    if (c->event == JFR_EV_NONE)
        return S_NONE;
    const char *vf = event_value_field(c->event);
    if (ref && !strcmp(n, "stackTrace"))
        return S_EV_STACK;
    if (ref && !strcmp(n, "state"))
        return S_EV_STATE;
    if (number && !strcmp(n, "contextId"))
        return S_EV_CONTEXT;
    if (number && !strcmp(n, "spanId"))
        return S_EV_SPAN_ID;
    if (number && !strcmp(n, "spanName"))
        return S_EV_SPAN_NAME;
    if (number && vf && !strcmp(n, vf))
        return S_EV_VALUE;
    if (string && c->event == JFR_EV_ACTIVE_SETTING)
        return !strcmp(n, "name") ? S_EV_NAME : !strcmp(n, "value") ? S_EV_SETTING : S_NONE;
    return S_NONE;
}

static bool jfr_read_field(jr_t *r, const char **strs, size_t n_strs, jclass_t *c)
{
    jelem_t e;
    if (!read_element(r, strs, n_strs, &e))
        return false;
    if (!strcmp(e.name, "field")) {
        if (c->n_fields >= LC_JFR_MAX_FIELDS)
            return too_big(r->j, "fields per class", LC_JFR_MAX_FIELDS), jr_fail(r);
        jfield_t *f = &c->fields[c->n_fields];
        if (!e.a_name || !jfr_parse_u64(e.a_class, &f->type))
            return bad(r->j, "field of %s without name or class", c->name), jr_fail(r);
        if (e.a_dim && strcmp(e.a_dim, "1") != 0)
            return bad(r->j, "field %s.%s has dimension %s", c->name, e.a_name, e.a_dim),
                   jr_fail(r);
        f->name = e.a_name;
        f->cp = e.a_cp && !strcmp(e.a_cp, "true");
        f->array = e.a_dim != NULL;
        c->n_fields++;
    }
    for (size_t i = 0; i < e.n_children; i++) {
        if (!skip_element(r, strs, n_strs, 2))
            return false;
    }
    return true;
}

static bool read_class(jr_t *r, const char **strs, size_t n_strs)
{
    jfr_t *j = r->j;
    jelem_t e;
    if (!read_element(r, strs, n_strs, &e))
        return false;
    if (strcmp(e.name, "class") != 0) { /* not a class: skip its subtree */
        for (size_t i = 0; i < e.n_children; i++) {
            if (!skip_element(r, strs, n_strs, 2))
                return false;
        }
        return true;
    }
    if (j->n_classes >= j->cap_classes)
        return too_big(j, "classes", LC_JFR_MAX_CLASSES), jr_fail(r);
    jclass_t *c = &j->classes[j->n_classes];
    memset(c, 0, sizeof(*c));
    if (!e.a_name || !*e.a_name || !jfr_parse_u64(e.a_id, &c->id))
        return bad(j, "class without id or name"), jr_fail(r);
    c->name = e.a_name;
    size_t cap = e.n_children < LC_JFR_MAX_FIELDS ? e.n_children : LC_JFR_MAX_FIELDS;
    c->fields = lc_arena_calloc(j->meta_arena, cap ? cap : 1, sizeof(*c->fields));
    if (!c->fields)
        return too_big(j, "metadata", LC_JFR_MEMORY), jr_fail(r);
    for (size_t i = 0; i < e.n_children; i++) {
        if (!jfr_read_field(r, strs, n_strs, c))
            return false;
    }
    class_roles(c);
    jmap_put(&j->class_ix, c->id, (uint32_t)j->n_classes++);
    return true;
}

static const char **read_meta_strings(jr_t *r, size_t *n)
{
    jfr_t *j = r->j;
    *n = jr_count(r);
    if (*n > LC_JFR_MAX_META_STRINGS)
        return too_big(j, "metadata strings", LC_JFR_MAX_META_STRINGS), jr_fail(r), NULL;
    const char **strs = lc_arena_calloc(j->meta_arena, *n ? *n : 1, sizeof(*strs));
    if (!strs)
        return too_big(j, "metadata", LC_JFR_MEMORY), jr_fail(r), NULL;
    lc_arena_t *keep = j->arena;
    j->arena = j->meta_arena; /* metadata strings live for the chunk only */
    for (size_t i = 0; i < *n && !r->err; i++)
        strs[i] = jr_string(r).s;
    j->arena = keep;
    return r->err ? NULL : strs;
}

static jwire_t wire_of(const jfr_t *j, const jfield_t *f)
{
    if (f->array)
        return W_OTHER;
    if (f->cp)
        return j->compressed ? W_VARINT : W_OTHER;
    switch (f->t->kind) {
    case K_BOOL:
    case K_BYTE:
        return W_U8;
    case K_CHAR:
    case K_SHORT:
    case K_INT:
    case K_LONG:
        return j->compressed ? W_VARINT : W_OTHER;
    default:
        return W_OTHER;
    }
}

/* The direct table of small class ids, once every class is known (a
 * repeated id keeps its last class, as the id map does). */
static int index_classes(jfr_t *j)
{
    const jclass_t **direct = lc_arena_calloc(j->meta_arena, DIRECT_CLASSES, sizeof(*direct));
    if (!direct)
        return too_big(j, "metadata", LC_JFR_MEMORY);
    for (size_t i = 0; i < j->n_classes; i++) {
        if (j->classes[i].id < DIRECT_CLASSES)
            direct[j->classes[i].id] = class_of(j, j->classes[i].id);
    }
    j->direct = direct;
    return 0;
}

/* Binds every field now that all classes (their kinds) are known. */
static int bind_fields(jfr_t *j)
{
    const char *frame = "jdk.types.StackFrame";
    j->t_frame = UINT64_MAX;
    for (size_t i = 0; i < j->n_classes; i++) {
        if (!strcmp(j->classes[i].name, frame))
            j->t_frame = j->classes[i].id;
    }
    for (size_t i = 0; i < j->n_classes; i++) {
        jclass_t *c = &j->classes[i];
        for (size_t k = 0; k < c->n_fields; k++) {
            c->fields[k].slot = field_slot(j, c, &c->fields[k]);
            c->fields[k].t = class_of(j, c->fields[k].type);
            if (!c->fields[k].cp && !c->fields[k].t)
                return bad(j, "field %s.%s has unknown type", c->name, c->fields[k].name);
            c->fields[k].wire = (uint8_t)wire_of(j, &c->fields[k]);
        }
        c->flat = c->kind == K_STRUCT;
        for (size_t k = 0; k < c->n_fields; k++)
            c->flat = c->flat && c->fields[k].wire != W_OTHER;
        c->lazy = c->role == C_SYMBOL && c->n_fields == 1 && c->fields[0].slot == S_SYMBOL_STRING;
        c->all_varint = c->flat;
        c->method_at = c->line_at = -1;
        for (size_t k = 0; k < c->n_fields; k++) {
            c->all_varint = c->all_varint && c->fields[k].wire == W_VARINT;
            if (c->fields[k].slot == S_FRAME_METHOD)
                c->method_at = (int)k;
            else if (c->fields[k].slot == S_FRAME_LINE)
                c->line_at = (int)k;
        }
    }
    return index_classes(j);
}

/* Room for n more classes (a metadata element's children), up to the cap;
 * sized by the element, not the cap, so a chunk does not clear megabytes. */
static int class_room(jfr_t *j, size_t n)
{
    size_t cap = j->n_classes + (n < LC_JFR_MAX_CLASSES ? n : LC_JFR_MAX_CLASSES);
    if (cap > LC_JFR_MAX_CLASSES)
        cap = LC_JFR_MAX_CLASSES;
    if (cap <= j->cap_classes)
        return 0;
    jclass_t *c = lc_arena_calloc(j->meta_arena, cap, sizeof(*c));
    if (!c)
        return too_big(j, "metadata", LC_JFR_MEMORY);
    if (j->n_classes)
        memcpy(c, j->classes, j->n_classes * sizeof(*c));
    j->classes = c;
    j->cap_classes = cap;
    return 0;
}

static int read_metadata(jfr_t *j, size_t pos)
{
    jr_t r = jr_at(j, pos, j->chunk_end);
    lc_arena_reset(j->meta_arena);
    jmap_free(&j->class_ix);
    memset(&j->class_ix, 0, sizeof(j->class_ix));
    j->n_classes = j->cap_classes = 0;
    j->classes = NULL;
    j->direct = NULL;
    jr_long(&r); /* size */
    if (jr_long(&r) != T_METADATA && !r.err)
        return bad(j, "metadata offset does not point at a metadata event");
    jr_long(&r); /* start */
    jr_long(&r); /* duration */
    jr_long(&r); /* metadata id */
    size_t n_strs;
    const char **strs = read_meta_strings(&r, &n_strs);
    jelem_t root;
    if (!strs || !read_element(&r, strs, n_strs, &root))
        return -1;
    if (strcmp(root.name, "root") != 0)
        return bad(j, "metadata root element is %s", root.name);
    for (size_t i = 0; i < root.n_children; i++) {
        jelem_t e;
        if (!read_element(&r, strs, n_strs, &e))
            return -1;
        bool meta = !strcmp(e.name, "metadata");
        if (meta && class_room(j, e.n_children) < 0)
            return -1;
        for (size_t k = 0; k < e.n_children; k++) {
            if (!(meta ? read_class(&r, strs, n_strs) : skip_element(&r, strs, n_strs, 2)))
                return -1;
        }
    }
    return bind_fields(j);
}

/* ---------------------------------------------------------------- constant pools */

static void *pool_slot(jfr_t *j, jmap_t *ix, uint64_t id, void **arr, size_t *n, size_t *cap,
                       size_t size)
{
    uint32_t at = jmap_get(ix, id);
    if (at == UINT32_MAX) {
        *arr = jfr_keep_grow(*arr, cap, *n + 1, size);
        at = (uint32_t)(*n)++;
        jmap_put(ix, id, at);
    }
    (void)j;
    return (char *)*arr + (size_t)at * size;
}

#define POOL_SLOT(j, ixm, id, arr, n, cap)                                                         \
    pool_slot(j, &(j)->ixm, id, (void **)&(j)->arr, &(j)->n, &(j)->cap, sizeof(*(j)->arr))

/* What a thread state's name means to the converter, decided once per pool
 * entry rather than by a string compare per event. */
static jfr_state_t state_kind(const char *name)
{
    if (!strcmp(name, "STATE_RUNNABLE"))
        return JFR_STATE_RUNNABLE;
    if (!strcmp(name, "STATE_SLEEPING"))
        return JFR_STATE_SLEEPING;
    return JFR_STATE_OTHER;
}

/* A Method entry, new or rewriting one: a rewritten entry whose name was
 * given keeps it in prev and waits for check_renames. */
static void keep_method(jfr_t *j, uint64_t id, uint64_t cls, uint64_t name)
{
    uint32_t at = jmap_get(&j->meth_ix, id);
    if (at == UINT32_MAX) {
        j->meths = jfr_keep_grow(j->meths, &j->cap_meths, j->n_meths + 1, sizeof(*j->meths));
        j->meths[j->n_meths] = (jmethod_t){.cls = cls, .name = name};
        jmap_put(&j->meth_ix, id, (uint32_t)j->n_meths++);
        return;
    }
    jmethod_t *m = &j->meths[at];
    if (m->full && !m->early) /* asked for since the last check: that is the name given */
        m->prev = m->full;
    m->full = NULL;
    m->early = false;
    m->cls = cls;
    m->name = name;
    if (m->prev && !m->pending) {
        j->pending =
            jfr_keep_grow(j->pending, &j->cap_pending, j->n_pending + 1, sizeof(*j->pending));
        j->pending[j->n_pending++] = at;
        m->pending = true;
    }
}

static void keep_entry(jfr_t *j, const jclass_t *c, uint64_t id, size_t frames_before)
{
    jval_t *v = j->vals;
    switch (c->role) {
    case C_SYMBOL: {
        jsym_t *s = POOL_SLOT(j, sym_ix, id, syms, n_syms, cap_syms);
        size_t len = v[S_SYMBOL_STRING].s.len;
        const char *m = val_set(j, S_SYMBOL_STRING)
                            ? lc_jfr_merge_generated(v[S_SYMBOL_STRING].s.s, len, j->arena, &len)
                            : "";
        *s = (jsym_t){m, (uint32_t)len, 0, 0, 0};
        break;
    }
    case C_CLASS:
        *(uint64_t *)POOL_SLOT(j, cls_ix, id, clss, n_clss, cap_clss) =
            val_u(j, S_CLASS_NAME, UINT64_MAX);
        break;
    case C_METHOD:
        keep_method(j, id, val_u(j, S_METHOD_TYPE, UINT64_MAX),
                    val_u(j, S_METHOD_NAME, UINT64_MAX));
        break;
    case C_STATE:
        *(uint8_t *)POOL_SLOT(j, state_ix, id, states, n_states, cap_states) =
            (uint8_t)state_kind(val_set(j, S_STATE_NAME) ? v[S_STATE_NAME].s.s : "");
        j->last_state = JFR_STATE_UNKNOWN; /* the entry may replace the cached one */
        break;
    case C_STACKTRACE:
        *(jstack_t *)POOL_SLOT(j, stack_ix, id, stacks, n_stacks, cap_stacks) =
            j->pending_fields
                ? (jstack_t){j->pending_pos, j->pending_n, j->pending_fields}
                : (jstack_t){(uint32_t)frames_before, (uint32_t)(j->n_frames - frames_before), 0};
        j->pending_fields = 0;
        break;
    default:
        break;
    }
}

/* Room for the frames a stack trace pool of `bytes` bytes can hold (a
 * StackFrame of the usual four fields takes at least four), once, instead of
 * doubling through them: memory not written is not touched. */
static void frames_reserve(jfr_t *j, size_t bytes)
{
    size_t want = bytes / 4;
    if (want > LC_JFR_MAX_FRAMES - j->n_frames)
        want = LC_JFR_MAX_FRAMES - j->n_frames;
    j->frames = jfr_keep_grow(j->frames, &j->cap_frames, j->n_frames + want, sizeof(*j->frames));
}

/* A Symbol entry that is one UTF-8 (3) or Latin-1 (5) string, located and
 * skipped (jsym_t); false leaves r untouched for the generic read. Other
 * encodings depend on the chunk (its string pool, compressed integers) and
 * are decoded now. */
static bool read_lazy_symbol(jr_t *r, const jclass_t *c, uint64_t id)
{
    if (!c->lazy || r->p >= r->end || (*r->p != 3 && *r->p != 5))
        return false;
    const uint8_t *at = r->p++;
    size_t n = jr_count(r);
    if (r->err)
        return true;
    r->p += n;
    jfr_t *j = r->j;
    *(jsym_t *)POOL_SLOT(j, sym_ix, id, syms, n_syms, cap_syms) =
        (jsym_t){NULL, 0, (uint32_t)(at - r->base), (uint32_t)(r->p - r->base), 0};
    return true;
}

/* A String pool entry is a bare string, not a struct. */
static void read_pool_entry(jr_t *r, const jclass_t *c, uint64_t id)
{
    jfr_t *j = r->j;
    if (read_lazy_symbol(r, c, id))
        return;
    vals_next(j);
    size_t frames_before = j->n_frames;
    if (c->kind == K_STRING) {
        jstr_t s = jr_string(r);
        if (!r->err)
            *(jstr_t *)POOL_SLOT(j, str_ix, id, strs, n_strs, cap_strs) = s;
        return;
    }
    if (c->kind != K_STRUCT) {
        jfield_t f = {.name = c->name, .type = c->id};
        jfr_read_value(r, &f, 0);
        return;
    }
    j->lazy_ok = c->role == C_STACKTRACE && j->lazy_pool;
    j->pending_fields = 0;
    read_struct(r, c, 0);
    j->lazy_ok = false;
    if (!r->err)
        keep_entry(j, c, id, frames_before);
}

static int read_pool(jr_t *r)
{
    jfr_t *j = r->j;
    uint64_t type = jr_long(r);
    size_t n = jr_count(r);
    const jclass_t *c = class_of(j, type);
    if (r->err)
        return -1;
    if (!c)
        return bad(j, "constant pool of unknown type %llu", (unsigned long long)type);
    size_t left = (size_t)(r->end - r->p);
    j->lazy_pool = left >= j->lazy_min;
    if (c->role == C_STACKTRACE && !j->lazy_pool)
        frames_reserve(j, left);
    for (size_t i = 0; i < n && !r->err; i++) {
        if (++j->pool_entries > LC_JFR_MAX_POOL_ENTRIES)
            return too_big(j, "constant pool entries", LC_JFR_MAX_POOL_ENTRIES);
        uint64_t id = jr_long(r);
        read_pool_entry(r, c, id);
    }
    return r->err ? -1 : 0;
}

/* One checkpoint event; *delta is the relative offset of the previous one. */
static int read_checkpoint(jfr_t *j, size_t pos, int64_t *delta)
{
    jr_t r = jr_at(j, pos, j->chunk_end);
    uint64_t size = j->compressed ? jr_varint(&r) : jr_be(&r, 4);
    if (r.err || size < 2 || size > j->chunk_end - pos)
        return bad(j, "checkpoint at offset %zu has size %llu", pos, (unsigned long long)size);
    r.end = j->buf + pos + size;
    if (r.p > r.end)
        return bad(j, "checkpoint at offset %zu is shorter than its header", pos);
    if (jr_long(&r) != T_CHECKPOINT && !r.err)
        return bad(j, "constant pool offset %zu is not a checkpoint event", pos);
    jr_long(&r); /* start */
    jr_long(&r); /* duration */
    *delta = (int64_t)jr_long(&r);
    jr_u8(&r); /* flush / type mask */
    size_t n = jr_count(&r);
    for (size_t i = 0; i < n && !r.err; i++) {
        if (read_pool(&r) < 0)
            return -1;
    }
    return r.err ? -1 : 0;
}

static int read_pools(jfr_t *j, size_t pos)
{
    for (size_t n = 0; n < MAX_CHECKPOINTS; n++) {
        int64_t delta = 0;
        if (read_checkpoint(j, pos, &delta) < 0)
            return -1;
        if (delta == 0)
            return 0;
        int64_t next = (int64_t)pos + delta;
        if (next < (int64_t)(j->chunk_start + CHUNK_HEADER) || next >= (int64_t)j->chunk_end)
            return bad(j, "checkpoint chain leaves the chunk at offset %zu", pos);
        pos = (size_t)next;
    }
    return bad(j, "more than %d checkpoints in a chunk", MAX_CHECKPOINTS);
}

/* ---------------------------------------------------------------- events */

/* A flat event's fields straight into v (by slot) when the buffer holds 9
 * bytes per field past r->p: no bounds check per byte, and the fields
 * nobody reads (start time, thread) skipped undecoded; most of a recording
 * of few stacks is such events (async-profiler's 16-byte samples). False,
 * r untouched, when the buffer is too short or the fields run past the
 * event's end (v then holds garbage): the checked read reports where. */
static bool read_flat_event_fast(jr_t *r, const jclass_t *c, uint64_t *v)
{
    const uint8_t *p = r->p;
    if ((size_t)(r->j->buf + r->j->len - p) / 9 < c->n_fields)
        return false;
    for (size_t i = 0; i < c->n_fields; i++) {
        const jfield_t *f = &c->fields[i];
        if (f->wire == W_U8)
            v[f->slot] = *p++;
        else if (f->slot)
            p = varint_at(p, &v[f->slot]);
        else
            p = jfr_varint_skip(p);
    }
    if (p > r->end)
        return false;
    r->p = p;
    return true;
}

/* The event of c whose values are v (by slot), handed to cb. */
static int emit_event(jfr_t *j, const jclass_t *c, const uint64_t *v, const char *name,
                      const char *setting, jfr_event_cb cb, void *data)
{
    jfr_event_t ev = {.kind = c->event,
                      .stack = v[S_EV_STACK],
                      .state = v[S_EV_STATE],
                      .context_id = v[S_EV_CONTEXT],
                      .span_id = v[S_EV_SPAN_ID],
                      .span_name = v[S_EV_SPAN_NAME],
                      .value = (int64_t)v[S_EV_VALUE],
                      .name = name,
                      .setting = setting};
    return cb(j, &ev, data);
}

static int read_event(jfr_t *j, jr_t *r, const jclass_t *c, jfr_event_cb cb, void *data)
{
    if (++j->events > LC_JFR_MAX_EVENTS)
        return too_big(j, "events", LC_JFR_MAX_EVENTS);
    /* an event class's fields have S_EV_* slots or none; a field of S_NONE
     * lands in v[0], never read */
    uint64_t v[S_EV_SETTING + 1] = {0};
    v[S_EV_STACK] = v[S_EV_STATE] = UINT64_MAX;
    if (c->flat && read_flat_event_fast(r, c, v))
        return emit_event(j, c, v, "", "", cb, data);
    vals_next(j);
    read_struct(r, c, 0);
    if (r->err)
        return -1;
    v[S_EV_STACK] = val_u(j, S_EV_STACK, UINT64_MAX);
    v[S_EV_STATE] = val_u(j, S_EV_STATE, UINT64_MAX);
    v[S_EV_CONTEXT] = val_u(j, S_EV_CONTEXT, 0);
    v[S_EV_SPAN_ID] = val_u(j, S_EV_SPAN_ID, 0);
    v[S_EV_SPAN_NAME] = val_u(j, S_EV_SPAN_NAME, 0);
    v[S_EV_VALUE] = val_u(j, S_EV_VALUE, 0);
    return emit_event(j, c, v, val_set(j, S_EV_NAME) ? j->vals[S_EV_NAME].s.s : "",
                      val_set(j, S_EV_SETTING) ? j->vals[S_EV_SETTING].s.s : "", cb, data);
}

static int read_events(jfr_t *j, jfr_event_cb cb, void *data)
{
    size_t pos = j->chunk_start + CHUNK_HEADER;
    while (pos < j->chunk_end) {
        jr_t r = jr_at(j, pos, j->chunk_end);
        uint64_t size, type;
        if (j->compressed && j->chunk_end - pos >= 18) { /* two varints, unchecked */
            r.p = varint_at(varint_at(r.p, &size), &type);
        } else {
            size = j->compressed ? jr_varint(&r) : jr_be(&r, 4);
            type = jr_long(&r);
        }
        if (r.err)
            return -1;
        if (size == 0 || size > j->chunk_end - pos)
            return bad(j, "event at offset %zu has size %llu", pos, (unsigned long long)size);
        r.end = j->buf + pos + size;
        if (r.p > r.end)
            return bad(j, "event at offset %zu is shorter than its header", pos);
        const jclass_t *c = type > T_CHECKPOINT ? class_of(j, type) : NULL;
        if (c && c->event != JFR_EV_NONE && read_event(j, &r, c, cb, data) < 0)
            return -1;
        pos += size;
    }
    return 0;
}

/* ---------------------------------------------------------------- chunks */

static int read_header(jfr_t *j, size_t pos)
{
    if (j->len - pos < CHUNK_HEADER)
        return bad(j, "truncated chunk header at offset %zu", pos);
    jr_t r = jr_at(j, pos, j->len);
    uint64_t magic = jr_be(&r, 4), major = jr_be(&r, 2);
    jr_be(&r, 2); /* minor */
    uint64_t size = jr_be(&r, 8), cp = jr_be(&r, 8), meta = jr_be(&r, 8);
    r.p += 32; /* start nanos, duration, start ticks, ticks per second */
    uint64_t features = jr_be(&r, 4);
    if (magic != CHUNK_MAGIC)
        return bad(j, "no chunk magic at offset %zu", pos);
    if (major != 2)
        return bad(j, "unsupported format version %llu", (unsigned long long)major);
    if (size < CHUNK_HEADER || size > j->len - pos)
        return bad(j, "chunk at offset %zu has size %llu but %zu bytes remain", pos,
                   (unsigned long long)size, j->len - pos);
    if (cp < CHUNK_HEADER || cp >= size || meta < CHUNK_HEADER || meta >= size)
        return bad(j, "chunk at offset %zu has pool/metadata offsets outside it", pos);
    j->chunk_start = pos;
    j->chunk_end = pos + size;
    j->cp_off = (size_t)cp;
    j->meta_off = (size_t)meta;
    j->compressed = features & 1;
    j->all_compressed = j->all_compressed && j->compressed;
    return 0;
}

static void check_renames(jfr_t *j);

static int read_chunk(jfr_t *j, size_t pos, jfr_event_cb on_event, jfr_chunk_cb on_chunk_end,
                      void *data)
{
    if (read_header(j, pos) < 0 || read_metadata(j, pos + j->meta_off) < 0 ||
        read_pools(j, pos + j->cp_off) < 0)
        return -1;
    check_renames(j);
    if (read_events(j, on_event, data) < 0)
        return -1;
    return on_chunk_end ? on_chunk_end(j, data) : 0;
}

static void jfr_fini(jfr_t *j)
{
    jmap_t *maps[] = {&j->class_ix, &j->sym_ix,   &j->str_ix,  &j->cls_ix,
                      &j->meth_ix,  &j->state_ix, &j->stack_ix};
    for (size_t i = 0; i < sizeof(maps) / sizeof(maps[0]); i++)
        jmap_free(maps[i]);
    jfr_keep_free(j->syms);
    jfr_keep_free(j->strs);
    jfr_keep_free(j->states);
    jfr_keep_free(j->clss);
    jfr_keep_free(j->meths);
    jfr_keep_free(j->pending);
    jfr_keep_free(j->stacks);
    jfr_keep_free(j->frames);
    jfr_keep_free(j->decoded);
    lc_arena_free(j->meta_arena);
}

int jfr_read(const uint8_t *buf, size_t len, size_t lazy_min, lc_arena_t *arena,
             jfr_event_cb on_event, jfr_chunk_cb on_chunk_end, void *data, lc_status_t *st)
{
    jfr_t j = {.buf = buf,
               .len = len,
               .lazy_min = lazy_min ? lazy_min : LAZY_STACKS_MIN_BYTES,
               .arena = arena,
               .st = st,
               .all_compressed = true,
               .meta_arena = lc_arena_new(LC_JFR_MEMORY)};
    int rc = len == 0 ? bad(&j, "empty recording") : 0;
    size_t chunks = 0;
    for (size_t pos = 0; rc == 0 && pos < len; pos = j.chunk_end) {
        if (++chunks > LC_JFR_MAX_CHUNKS)
            rc = too_big(&j, "chunks", LC_JFR_MAX_CHUNKS);
        else
            rc = read_chunk(&j, pos, on_event, on_chunk_end, data);
    }
    jfr_fini(&j);
    return rc;
}

/* ---------------------------------------------------------------- lookups */

uint32_t jfr_stack_order(const jfr_t *j, uint64_t id)
{
    return jmap_get(&j->stack_ix, id);
}

uint32_t jfr_stack_places(const jfr_t *j)
{
    return (uint32_t)j->n_stacks;
}

const jfr_frame_t *jfr_stack_at(jfr_t *j, uint32_t order, size_t *n)
{
    if (order >= j->n_stacks)
        return NULL;
    jstack_t *s = &j->stacks[order];
    *n = s->n;
    /* an empty stack is known too (its sample is kept), even before any
     * frame array exists */
    static const jfr_frame_t no_frames[1];
    if (!s->n)
        return no_frames;
    if (!s->lazy_fields)
        return j->frames + s->off;
    /* located by skip_stack_varints: every varint ends within the recording
     * (the converter reads these by jfr_stack_raw, undecoded) */
    j->decoded = jfr_keep_grow(j->decoded, &j->cap_decoded, s->n, sizeof(*j->decoded));
    decode_frames_usual(j->buf + s->off, s->lazy_fields, j->decoded, s->n);
    return j->decoded;
}

bool jfr_stack_raw(const jfr_t *j, uint32_t order, const uint8_t **p, size_t *n, size_t *fields)
{
    if (order >= j->n_stacks || !j->stacks[order].lazy_fields)
        return false;
    const jstack_t *s = &j->stacks[order];
    *p = j->buf + s->off;
    *n = s->n;
    *fields = s->lazy_fields;
    return true;
}

const uint8_t *jfr_frame_decode(const uint8_t *p, size_t fields, jfr_frame_t *out)
{
    return decode_frames_usual(p, fields, out, 1);
}

/* A symbol with its text, decoded on first use (jsym_t). */
static const jsym_t *symbol_text(jfr_t *j, jsym_t *sym)
{
    if (!sym->s) {
        /* the bytes were bounds-checked when located; UTF-8 and Latin-1
         * decode the same in any chunk */
        jr_t r = jr_at(j, sym->pos, sym->end);
        jstr_t raw = jr_string(&r);
        size_t len = raw.len;
        sym->s = r.err ? "" : lc_jfr_merge_generated(raw.s, len, j->arena, &len);
        sym->len = r.err ? 0 : (uint32_t)len;
    }
    return sym;
}

/* The class and name symbols of a method (NULL: an unknown symbol, read
 * as "" as in Pyroscope); false when the method's class is unknown. */
static bool method_symbols(jfr_t *j, const jmethod_t *m, jsym_t **cls, jsym_t **name)
{
    uint32_t cix = jmap_get(&j->cls_ix, m->cls);
    if (cix == UINT32_MAX)
        return false;
    uint32_t six = jmap_get(&j->sym_ix, j->clss[cix]), nix = jmap_get(&j->sym_ix, m->name);
    *cls = six == UINT32_MAX ? NULL : &j->syms[six];
    *name = nix == UINT32_MAX ? NULL : &j->syms[nix];
    return true;
}

/* Whether the located bytes of sym are those at [pos, end). */
static bool same_located(const jfr_t *j, jsym_t *sym, uint32_t pos, uint32_t end)
{
    if (!sym || !end || !sym->end || sym->end - sym->pos != end - pos)
        return false;
    if (sym->same_at == pos)
        return true;
    if (memcmp(j->buf + sym->pos, j->buf + pos, end - pos) != 0)
        return false;
    sym->same_at = pos;
    return true;
}

/* Whether a method's name, made now, would be s (len bytes): its symbols
 * are the bytes the name was made of (while every chunk has compressed
 * integers a located string decodes the same wherever it lies), or decode
 * to its two halves. */
static bool named(jfr_t *j, const jmethod_t *m, const char *s, size_t len)
{
    jsym_t *cls_sym, *name_sym;
    if (!method_symbols(j, m, &cls_sym, &name_sym))
        return false;
    if (j->all_compressed && same_located(j, cls_sym, m->cls_pos, m->cls_end) &&
        same_located(j, name_sym, m->name_pos, m->name_end))
        return true;
    const jsym_t *cls = cls_sym ? symbol_text(j, cls_sym) : NULL;
    const jsym_t *name = name_sym ? symbol_text(j, name_sym) : NULL;
    size_t cl = cls ? cls->len : 0, nl = name ? name->len : 0;
    return cl + nl + 1 == len && (!cl || !memcmp(s, cls->s, cl)) && s[cl] == '.' &&
           (!nl || !memcmp(s + cl + 1, name->s, nl));
}

/* Once a chunk's pools are read, before its events: every method rewritten
 * after its name was given (or named here last chunk and not asked since)
 * is given that name again when it would be made the same now, which is
 * what jfr_method_name would then make; any other counts a rename, and is
 * made afresh when asked. A method's name is thus the one made when it is
 * first asked after its entry was written, as without this. */
static void check_renames(jfr_t *j)
{
    size_t keep = 0;
    bool renamed = false;
    for (size_t i = 0; i < j->n_pending; i++) {
        jmethod_t *m = &j->meths[j->pending[i]];
        if (m->full && !m->early) { /* asked for since its check: settled */
            m->prev = NULL;
            m->pending = false;
            continue;
        }
        m->full = NULL; /* not asked in the chunk that named it: check again */
        m->early = false;
        if (named(j, m, m->prev, m->full_len)) {
            m->full = m->prev;
            m->early = true;
            j->pending[keep++] = j->pending[i];
        } else {
            renamed = true;
            m->prev = NULL;
            m->pending = false;
        }
    }
    j->n_pending = keep;
    j->renames += renamed;
}

uint64_t jfr_renames(const jfr_t *j)
{
    return j->renames;
}

const char *jfr_method_name(jfr_t *j, uint64_t method)
{
    uint32_t ix = jmap_get(&j->meth_ix, method);
    if (ix == UINT32_MAX)
        return NULL;
    jmethod_t *m = &j->meths[ix];
    if (m->full) {
        m->early = false; /* asked: the name given */
        return m->full;
    }
    jsym_t *cls_sym, *name_sym;
    if (!method_symbols(j, m, &cls_sym, &name_sym))
        return NULL;
    /* an unknown symbol reads as "", as in Pyroscope */
    const jsym_t *cls = cls_sym ? symbol_text(j, cls_sym) : NULL;
    const jsym_t *name = name_sym ? symbol_text(j, name_sym) : NULL;
    size_t cl = cls ? cls->len : 0, nl = name ? name->len : 0;
    char *full = lc_arena_alloc(j->arena, cl + nl + 2);
    if (!full)
        return NULL;
    if (cl)
        memcpy(full, cls->s, cl);
    full[cl] = '.';
    if (nl)
        memcpy(full + cl + 1, name->s, nl);
    full[cl + 1 + nl] = 0;
    m->full = full;
    m->full_len = (uint32_t)(cl + 1 + nl);
    m->cls_pos = cls ? cls->pos : 0;
    m->cls_end = cls ? cls->end : 0;
    m->name_pos = name ? name->pos : 0;
    m->name_end = name ? name->end : 0;
    return m->full;
}

jfr_state_t jfr_thread_state(jfr_t *j, uint64_t id)
{
    if (j->last_state != JFR_STATE_UNKNOWN && j->last_state_id == id)
        return j->last_state;
    uint32_t ix = jmap_get(&j->state_ix, id);
    if (ix == UINT32_MAX)
        return JFR_STATE_UNKNOWN;
    j->last_state_id = id;
    j->last_state = (jfr_state_t)j->states[ix];
    return j->last_state;
}
