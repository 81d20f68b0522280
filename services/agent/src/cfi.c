/*
 * cfi.c — x86-64 unwind tables from an object's call frame information
 * (.eh_frame, and .debug_frame where present), in the compact, sorted form
 * the BPF unwinder binary-searches (struct agt_unwind_row, sampler.h).
 *
 * Our own parser rather than libdw's: libdw answers "what is the frame at
 * this address" (dwarf_cfi_addrframe) but offers no walk over the rows of
 * an FDE, so building a whole table through it would mean probing every
 * instruction address of every function. One pass over the CIE/FDE
 * instructions gives every row directly, in linear time, and the subset of
 * DWARF that matters here (x86-64 CFA = register + offset, the PLT
 * expression, where rbp and the return address are saved) is small.
 * Everything else is kept as an explicit "unsupported" row so the unwinder
 * stops there and counts it, instead of guessing.
 *
 * Input is any binary mapped on the host: every read is bounds-checked, the
 * row count and the remember/restore depth are capped.
 */
#define _GNU_SOURCE /* qsort_r */
#include <stdlib.h>
#include <string.h>

#include "agent_int.h"

#define CFI_MAX_ROWS (1u << 24) /* the BPF binary search does 24 steps */
#define CFI_STATE_STACK 16
#define CFI_REG_RBP 6
#define CFI_REG_RSP 7
#define CFI_REG_RA 16

enum { RULE_SAME, RULE_UNDEF, RULE_OFFSET, RULE_OTHER };
enum { CFA_REG, CFA_PLT, CFA_OTHER };

typedef struct cfi_reader_s {
    const uint8_t *p, *end;
    bool bad;
} cfi_reader_t;

typedef struct cfi_state_s {
    int cfa_kind;
    uint32_t cfa_reg;
    int64_t cfa_off; /* CFA_PLT: the (rip & 15) threshold */
    int rbp_rule, ra_rule;
    int64_t rbp_off, ra_off;
} cfi_state_t;

typedef struct cfi_cie_s {
    uint64_t code_align;
    int64_t data_align;
    uint32_t ra_reg;
    uint8_t fde_enc;
    bool has_aug_data;
    const uint8_t *insns, *insns_end;
} cfi_cie_t;

typedef struct cfi_section_s {
    const uint8_t *data;
    size_t len;
    uint64_t vaddr;
    bool eh; /* .eh_frame (else .debug_frame) */
} cfi_section_t;

typedef struct cfi_range_s {
    uint64_t start, end;
} cfi_range_t;

typedef struct cfi_builder_s {
    agt_cfi_rows_t *out;
    uint32_t seq;
    /* FDE ranges of .eh_frame, so a .debug_frame FDE for the same code is skipped */
    cfi_range_t *eh;
    size_t n_eh, cap_eh;
    bool full;
} cfi_builder_t;

/* ---------------------------------------------------------------- reading */

static uint64_t rd_fixed(cfi_reader_t *r, size_t n)
{
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return 0;
    }
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    return v;
}

static uint64_t rd_uleb(cfi_reader_t *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; !r->bad; shift += 7) {
        if (r->p >= r->end || shift > 63) {
            r->bad = true;
            return 0;
        }
        uint8_t b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    return 0;
}

static int64_t rd_sleb(cfi_reader_t *r)
{
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0x80;
    while (!r->bad && (b & 0x80)) {
        if (r->p >= r->end || shift > 63) {
            r->bad = true;
            return 0;
        }
        b = *r->p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
    }
    if (shift < 64 && (b & 0x40))
        v |= ~(uint64_t)0 << shift;
    return (int64_t)v;
}

static int64_t sign_extend(uint64_t v, unsigned bits)
{
    uint64_t m = (uint64_t)1 << (bits - 1);
    return (int64_t)((v ^ m) - m);
}

/* A DW_EH_PE-encoded pointer; `section` places pc-relative values. */
static uint64_t rd_encoded(cfi_reader_t *r, uint8_t enc, const cfi_section_t *sec)
{
    if (enc == 0xff) /* DW_EH_PE_omit */
        return 0;
    uint64_t field = sec->vaddr + (uint64_t)(r->p - sec->data);
    uint64_t v;
    switch (enc & 0x0f) {
    case 0x00:
        v = rd_fixed(r, 8);
        break;
    case 0x01:
        v = rd_uleb(r);
        break;
    case 0x02:
        v = rd_fixed(r, 2);
        break;
    case 0x03:
        v = rd_fixed(r, 4);
        break;
    case 0x04:
        v = rd_fixed(r, 8);
        break;
    case 0x09:
        v = (uint64_t)rd_sleb(r);
        break;
    case 0x0a:
        v = (uint64_t)sign_extend(rd_fixed(r, 2), 16);
        break;
    case 0x0b:
        v = (uint64_t)sign_extend(rd_fixed(r, 4), 32);
        break;
    case 0x0c:
        v = rd_fixed(r, 8);
        break;
    default:
        r->bad = true;
        return 0;
    }
    switch (enc & 0x70) {
    case 0x00:
        break;
    case 0x10:
        v += field;
        break; /* pcrel */
    default:
        r->bad = true;
        break; /* textrel/datarel/funcrel: not used on x86-64 Linux */
    }
    return v;
}

/* ---------------------------------------------------------------- CIE */

static bool parse_augmentation(cfi_reader_t *r, const char *aug, cfi_cie_t *cie,
                               const cfi_section_t *sec)
{
    if (aug[0] != 'z')
        return aug[0] == '\0';
    uint64_t len = rd_uleb(r);
    if (r->bad || len > (uint64_t)(r->end - r->p))
        return false;
    const uint8_t *after = r->p + len;
    cie->has_aug_data = true;
    for (const char *a = aug + 1; *a; a++) {
        if (*a == 'R') {
            cie->fde_enc = (uint8_t)rd_fixed(r, 1);
        } else if (*a == 'P') {
            uint8_t enc = (uint8_t)rd_fixed(r, 1);
            (void)rd_encoded(r, enc & 0x7f, sec); /* personality routine */
        } else if (*a == 'L') {
            (void)rd_fixed(r, 1); /* LSDA encoding: the FDE's data is skipped by length */
        } else if (*a != 'S' && *a != 'B' && *a != 'G') {
            break; /* unknown letter: the length still lets us skip the rest */
        }
    }
    r->p = after;
    return !r->bad;
}

/* Parses the CIE whose length field starts at `at`. */
static bool parse_cie(const cfi_section_t *sec, const uint8_t *at, cfi_cie_t *cie)
{
    cfi_reader_t r = {at, sec->data + sec->len, false};
    uint64_t len = rd_fixed(&r, 4);
    bool dwarf64 = len == 0xffffffffu;
    if (dwarf64)
        len = rd_fixed(&r, 8);
    if (r.bad || len > (uint64_t)(r.end - r.p))
        return false;
    r.end = r.p + len;
    uint64_t id = rd_fixed(&r, dwarf64 ? 8 : 4);
    uint64_t want = sec->eh ? 0 : dwarf64 ? ~(uint64_t)0 : 0xffffffffu;
    uint8_t version = (uint8_t)rd_fixed(&r, 1);
    if (r.bad || id != want || (version != 1 && version != 3 && version != 4))
        return false;
    const char *aug = (const char *)r.p;
    const uint8_t *nul = memchr(r.p, 0, (size_t)(r.end - r.p));
    if (!nul)
        return false;
    r.p = nul + 1;
    if (version == 4) {
        uint64_t address_size = rd_fixed(&r, 1), segment_size = rd_fixed(&r, 1);
        if (address_size != 8 || segment_size != 0)
            return false;
    }
    *cie = (cfi_cie_t){.fde_enc = 0}; /* DW_EH_PE_absptr unless 'R' says otherwise */
    cie->code_align = rd_uleb(&r);
    cie->data_align = rd_sleb(&r);
    cie->ra_reg = version == 1 ? (uint32_t)rd_fixed(&r, 1) : (uint32_t)rd_uleb(&r);
    if (r.bad || !parse_augmentation(&r, aug, cie, sec))
        return false;
    cie->insns = r.p;
    cie->insns_end = r.end;
    return cie->ra_reg == CFI_REG_RA;
}

/* ---------------------------------------------------------------- rows */

static void emit(cfi_builder_t *b, uint64_t pc, const cfi_state_t *s, bool end)
{
    agt_cfi_rows_t *o = b->out;
    if (b->full || pc > UINT32_MAX)
        return;
    if (o->n >= CFI_MAX_ROWS) {
        b->full = true;
        return;
    }
    struct agt_unwind_row row = {.pc = (uint32_t)pc, .cfa = AGT_CFA_END};
    if (!end) {
        row.cfa = AGT_CFA_UNSUPPORTED;
        if (s->ra_rule == RULE_UNDEF) {
            row.cfa = AGT_CFA_UNDEF_RA;
        } else if (s->ra_rule == RULE_OFFSET && s->ra_off == -8) {
            if (s->cfa_kind == CFA_PLT) {
                row.cfa = AGT_CFA_PLT;
                row.cfa_off = (int16_t)s->cfa_off;
            } else if (s->cfa_kind == CFA_REG && s->cfa_off >= INT16_MIN &&
                       s->cfa_off <= INT16_MAX &&
                       (s->cfa_reg == CFI_REG_RSP || s->cfa_reg == CFI_REG_RBP)) {
                row.cfa = s->cfa_reg == CFI_REG_RSP ? AGT_CFA_RSP : AGT_CFA_RBP;
                row.cfa_off = (int16_t)s->cfa_off;
            }
        }
        if (s->rbp_rule == RULE_OFFSET && s->rbp_off % 8 == 0 && s->rbp_off / 8 >= -127 &&
            s->rbp_off / 8 <= 127 && s->rbp_off != 0)
            row.rbp_off = (int8_t)(s->rbp_off / 8);
        else if (s->rbp_rule != RULE_SAME)
            row.rbp_off = AGT_RBP_LOST;
    }
    o->v = lc_xgrow(o->v, &o->cap, o->n + 1, sizeof(*o->v));
    o->seq = lc_xgrow(o->seq, &o->cap_seq, o->n + 1, sizeof(*o->seq));
    o->seq[o->n] = b->seq++;
    o->v[o->n++] = row;
}

/* The PLT stub expression GCC and binutils emit for .plt entries:
 * rsp + 8 + ((rip & 15) >= K) << 3, i.e. DW_OP_breg7 8, DW_OP_breg16 0,
 * DW_OP_lit15, DW_OP_and, DW_OP_litK, DW_OP_ge, DW_OP_lit3, DW_OP_shl,
 * DW_OP_plus. Returns K, or -1 for any other expression. */
static int plt_threshold(const uint8_t *e, uint64_t len)
{
    static const uint8_t head[] = {0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a};
    static const uint8_t tail[] = {0x2a, 0x33, 0x24, 0x22};
    if (len != 11 || memcmp(e, head, sizeof(head)) != 0 || memcmp(e + 7, tail, sizeof(tail)) != 0)
        return -1;
    if (e[6] < 0x30 || e[6] > 0x4f)
        return -1;
    return e[6] - 0x30;
}

static void set_reg_rule(cfi_state_t *s, uint64_t reg, int rule, int64_t off)
{
    if (reg == CFI_REG_RBP) {
        s->rbp_rule = rule;
        s->rbp_off = off;
    } else if (reg == CFI_REG_RA) {
        s->ra_rule = rule;
        s->ra_off = off;
    }
}

static void restore_reg(cfi_state_t *s, const cfi_state_t *init, uint64_t reg)
{
    if (reg == CFI_REG_RBP) {
        s->rbp_rule = init->rbp_rule;
        s->rbp_off = init->rbp_off;
    } else if (reg == CFI_REG_RA) {
        s->ra_rule = init->ra_rule;
        s->ra_off = init->ra_off;
    }
}

typedef struct cfi_exec_s {
    cfi_builder_t *b; /* NULL while running a CIE's initial instructions */
    const cfi_cie_t *cie;
    const cfi_section_t *sec;
    cfi_state_t *s;
    const cfi_state_t *init;
    uint64_t loc, end;
    cfi_state_t stack[CFI_STATE_STACK];
    int depth;
} cfi_exec_t;

static void advance(cfi_exec_t *x, uint64_t delta)
{
    uint64_t next = x->loc + delta * x->cie->code_align;
    if (x->b && next != x->loc && x->loc < x->end)
        emit(x->b, x->loc, x->s, false);
    x->loc = next;
}

/* factor * data_align as DWARF means it, computed modulo 2^64: a malformed
 * table may hold any factor, and a nonsense offset only makes a nonsense
 * (safely read) frame, where a signed overflow would be undefined. */
static int64_t data_aligned(uint64_t factor, int64_t data_align)
{
    return (int64_t)(factor * (uint64_t)data_align);
}

/* Runs one DW_CFA instruction; false on malformed or unknown input. */
static bool exec_one(cfi_exec_t *x, cfi_reader_t *r)
{
    cfi_state_t *s = x->s;
    uint8_t op = (uint8_t)rd_fixed(r, 1);
    uint8_t hi = op & 0xc0, lo = op & 0x3f;
    int64_t da = x->cie->data_align;
    if (hi == 0x40) {
        advance(x, lo);
    } else if (hi == 0x80) {
        set_reg_rule(s, lo, RULE_OFFSET, data_aligned(rd_uleb(r), da));
    } else if (hi == 0xc0) {
        restore_reg(s, x->init, lo);
    } else {
        uint64_t reg, len;
        switch (op) {
        case 0x00:
            break;   /* nop */
        case 0x01: { /* set_loc */
            uint64_t to = rd_encoded(r, x->cie->fde_enc, x->sec);
            if (to < x->loc)
                return false;
            advance(x, (to - x->loc) / (x->cie->code_align ? x->cie->code_align : 1));
            break;
        }
        case 0x02:
            advance(x, rd_fixed(r, 1));
            break;
        case 0x03:
            advance(x, rd_fixed(r, 2));
            break;
        case 0x04:
            advance(x, rd_fixed(r, 4));
            break;
        case 0x05:
            reg = rd_uleb(r);
            set_reg_rule(s, reg, RULE_OFFSET, data_aligned(rd_uleb(r), da));
            break;
        case 0x06:
            restore_reg(s, x->init, rd_uleb(r));
            break;
        case 0x07:
            set_reg_rule(s, rd_uleb(r), RULE_UNDEF, 0);
            break;
        case 0x08:
            set_reg_rule(s, rd_uleb(r), RULE_SAME, 0);
            break;
        case 0x09:
            reg = rd_uleb(r);
            (void)rd_uleb(r);
            set_reg_rule(s, reg, RULE_OTHER, 0);
            break;
        case 0x0a: /* remember_state */
            if (x->depth >= CFI_STATE_STACK)
                return false;
            x->stack[x->depth++] = *s;
            break;
        case 0x0b: /* restore_state: the CFA rule too, as GCC's unwinder does */
            if (x->depth <= 0)
                return false;
            *s = x->stack[--x->depth];
            break;
        case 0x0c:
            s->cfa_kind = CFA_REG;
            s->cfa_reg = (uint32_t)rd_uleb(r);
            s->cfa_off = (int64_t)rd_uleb(r);
            break;
        case 0x0d:
            s->cfa_reg = (uint32_t)rd_uleb(r);
            if (s->cfa_kind != CFA_REG)
                s->cfa_kind = CFA_OTHER;
            break;
        case 0x0e:
            s->cfa_off = (int64_t)rd_uleb(r);
            break;
        case 0x0f: /* def_cfa_expression */
            len = rd_uleb(r);
            if (r->bad || len > (uint64_t)(r->end - r->p))
                return false;
            s->cfa_off = plt_threshold(r->p, len);
            s->cfa_kind = s->cfa_off >= 0 ? CFA_PLT : CFA_OTHER;
            r->p += len;
            break;
        case 0x10: /* expression */
        case 0x16: /* val_expression */
            reg = rd_uleb(r);
            len = rd_uleb(r);
            if (r->bad || len > (uint64_t)(r->end - r->p))
                return false;
            r->p += len;
            set_reg_rule(s, reg, RULE_OTHER, 0);
            break;
        case 0x11:
            reg = rd_uleb(r);
            set_reg_rule(s, reg, RULE_OFFSET, data_aligned((uint64_t)rd_sleb(r), da));
            break;
        case 0x12:
            s->cfa_kind = CFA_REG;
            s->cfa_reg = (uint32_t)rd_uleb(r);
            s->cfa_off = data_aligned((uint64_t)rd_sleb(r), da);
            break;
        case 0x13:
            s->cfa_off = data_aligned((uint64_t)rd_sleb(r), da);
            break;
        case 0x14: /* val_offset */
        case 0x15:
            reg = rd_uleb(r);
            (void)(op == 0x14 ? (int64_t)rd_uleb(r) : rd_sleb(r));
            set_reg_rule(s, reg, RULE_OTHER, 0);
            break;
        case 0x2e:
            (void)rd_uleb(r);
            break; /* GNU_args_size */
        case 0x2f:
            reg = rd_uleb(r);
            set_reg_rule(s, reg, RULE_OFFSET, data_aligned(0 - rd_uleb(r), da));
            break;
        default:
            return false;
        }
    }
    return !r->bad;
}

static bool exec_all(cfi_exec_t *x, const uint8_t *p, const uint8_t *end)
{
    cfi_reader_t r = {p, end, false};
    while (r.p < r.end) {
        if (!exec_one(x, &r))
            return false;
    }
    return true;
}

/* ---------------------------------------------------------------- FDEs */

static bool covered_by_eh(const cfi_builder_t *b, uint64_t start)
{
    size_t lo = 0, hi = b->n_eh;
    while (lo < hi) { /* eh ranges are sorted by start before .debug_frame runs */
        size_t mid = lo + (hi - lo) / 2;
        if (b->eh[mid].start <= start)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo > 0 && start < b->eh[lo - 1].end;
}

static void run_fde(cfi_builder_t *b, const cfi_section_t *sec, cfi_reader_t *r,
                    const cfi_cie_t *cie)
{
    uint64_t start = rd_encoded(r, cie->fde_enc, sec);
    uint64_t range = rd_encoded(r, cie->fde_enc & 0x0f, sec);
    if (cie->has_aug_data) {
        uint64_t alen = rd_uleb(r);
        if (r->bad || alen > (uint64_t)(r->end - r->p))
            return;
        r->p += alen;
    }
    if (r->bad || range == 0 || start + range < start)
        return;
    if (sec->eh) {
        b->eh = lc_xgrow(b->eh, &b->cap_eh, b->n_eh + 1, sizeof(*b->eh));
        b->eh[b->n_eh++] = (cfi_range_t){start, start + range};
    } else if (covered_by_eh(b, start)) {
        return;
    }
    cfi_state_t init = {.cfa_kind = CFA_OTHER, .rbp_rule = RULE_SAME, .ra_rule = RULE_SAME};
    cfi_exec_t x = {.cie = cie, .sec = sec, .s = &init, .init = &init, .loc = start};
    if (!exec_all(&x, cie->insns, cie->insns_end))
        return;
    cfi_state_t cur = init;
    x = (cfi_exec_t){.b = b,
                     .cie = cie,
                     .sec = sec,
                     .s = &cur,
                     .init = &init,
                     .loc = start,
                     .end = start + range};
    size_t before = b->out->n;
    if (!exec_all(&x, r->p, r->end)) {
        b->out->n = before; /* malformed: no rows rather than wrong ones */
        return;
    }
    if (x.loc < start + range)
        emit(b, x.loc, &cur, false);
    emit(b, start + range, &cur, true);
}

static void run_section(cfi_builder_t *b, const cfi_section_t *sec)
{
    const uint8_t *p = sec->data, *end = sec->data + sec->len;
    while (p < end && !b->full) {
        cfi_reader_t r = {p, end, false};
        uint64_t len = rd_fixed(&r, 4);
        bool dwarf64 = len == 0xffffffffu;
        if (dwarf64)
            len = rd_fixed(&r, 8);
        if (r.bad || len == 0 || len > (uint64_t)(end - r.p))
            break; /* .eh_frame's zero terminator, or a truncated entry */
        const uint8_t *next = r.p + len;
        r.end = next;
        const uint8_t *id_at = r.p;
        uint64_t id = rd_fixed(&r, dwarf64 ? 8 : 4);
        bool is_cie = sec->eh ? id == 0 : id == (dwarf64 ? ~(uint64_t)0 : 0xffffffffu);
        if (!r.bad && !is_cie) {
            /* the CIE pointer checked as an offset before it becomes an
             * address: pointer arithmetic out of the section is undefined */
            uint64_t here = (uint64_t)(id_at - sec->data), size = (uint64_t)(end - sec->data);
            bool inside = sec->eh ? id <= here : id < size;
            const uint8_t *cie_at = !inside ? NULL : sec->eh ? id_at - id : sec->data + id;
            cfi_cie_t cie;
            if (cie_at && parse_cie(sec, cie_at, &cie))
                run_fde(b, sec, &r, &cie);
        }
        p = next;
    }
}

/* ---------------------------------------------------------------- table */

static int row_cmp(const void *a, const void *b, void *arg)
{
    const agt_cfi_rows_t *o = arg;
    uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
    if (o->v[i].pc != o->v[j].pc)
        return o->v[i].pc < o->v[j].pc ? -1 : 1;
    /* At one address the start of the next FDE wins over the end of the previous. */
    bool ei = o->v[i].cfa == AGT_CFA_END, ej = o->v[j].cfa == AGT_CFA_END;
    if (ei != ej)
        return ei ? -1 : 1;
    return o->seq[i] < o->seq[j] ? -1 : o->seq[i] > o->seq[j];
}

static bool same_rule(const struct agt_unwind_row *a, const struct agt_unwind_row *b)
{
    return a->cfa == b->cfa && a->rbp_off == b->rbp_off && a->cfa_off == b->cfa_off;
}

/* Sorts by address (last row at an address wins) and drops rows that repeat
 * the rule before them. */
static void compact(agt_cfi_rows_t *o)
{
    if (!o->n)
        return;
    uint32_t *idx = lc_xmalloc(o->n * sizeof(*idx));
    for (size_t i = 0; i < o->n; i++)
        idx[i] = (uint32_t)i;
    qsort_r(idx, o->n, sizeof(*idx), row_cmp, o);
    struct agt_unwind_row *v = lc_xmalloc(o->n * sizeof(*v));
    size_t k = 0;
    for (size_t i = 0; i < o->n; i++) {
        struct agt_unwind_row r = o->v[idx[i]];
        if (k && v[k - 1].pc == r.pc)
            k--; /* a later row at the same address replaces it */
        if (k && same_rule(&v[k - 1], &r))
            continue;
        v[k++] = r;
    }
    lc_free(idx);
    lc_free(o->v);
    lc_free(o->seq);
    o->seq = NULL;
    o->cap_seq = 0;
    o->v = v;
    o->n = k;
    o->cap = o->n;
}

static int range_cmp(const void *a, const void *b)
{
    const cfi_range_t *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

void agt_cfi_build(const agt_cfi_section_t *eh, const agt_cfi_section_t *debug, agt_cfi_rows_t *out)
{
    memset(out, 0, sizeof(*out));
    cfi_builder_t b = {.out = out};
    if (eh && eh->data) {
        cfi_section_t s = {eh->data, eh->len, eh->vaddr, true};
        run_section(&b, &s);
    }
    if (debug && debug->data) {
        if (b.n_eh)
            qsort(b.eh, b.n_eh, sizeof(*b.eh), range_cmp);
        cfi_section_t s = {debug->data, debug->len, debug->vaddr, false};
        run_section(&b, &s);
    }
    lc_free(b.eh);
    out->truncated = b.full;
    compact(out);
}

void agt_cfi_rows_fini(agt_cfi_rows_t *o)
{
    lc_free(o->v);
    lc_free(o->seq);
    memset(o, 0, sizeof(*o));
}

const struct agt_unwind_row *agt_cfi_lookup(const agt_cfi_rows_t *o, uint64_t pc)
{
    size_t lo = 0, hi = o->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (o->v[mid].pc <= pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo ? &o->v[lo - 1] : NULL;
}
