/*
 * python.c — CPython processes: recognising the interpreter, telling the BPF
 * walker where its state is, and naming the frames it brings back.
 *
 * Recognition: an executable mapping whose object exports `_PyRuntime` (the
 * python binary itself, or libpython) makes the process an interpreter. Its
 * version comes from `Py_Version` (3.11+, read from the process), else from
 * the object's file name (python3.10, libpython3.10.so). A version without a
 * row in the offsets table below is skipped and counted, never guessed.
 *
 * Offsets are facts of each version's structure layout (x86-64), checked
 * against the running interpreter itself (tests/integration/
 * test_agent_python.py probes them with ctypes): _PyRuntime ->
 * interpreters.head -> threads.head -> next ... (native_thread_id), then
 * tstate->cframe->current_frame -> _PyInterpreterFrame {f_code, previous,
 * prev_instr, is_entry}; PyCodeObject {co_firstlineno, co_filename,
 * co_qualname, co_linetable, co_code_adaptive}.
 *
 * Naming: the BPF program sends (code object address, instruction offset)
 * per frame, and announces each code object the first time it sees it
 * (AGT_EVENT_PYCODE), so that it is read while the process lives: a
 * program that exits before the drain keeps its names. The code object is
 * read here with process_vm_readv, checked to
 * be a code object (its type is PyCode_Type), and cached per process until
 * the cache holds PY_MAX_CODES entries (then it starts over: the memory is
 * capped, a long-lived process only pays the reads again). The line comes
 * from the location table (PEP 657 format, 3.11+).
 *
 * Threading: the agent's job only (one at a time), like procs.c.
 */
#define _GNU_SOURCE /* process_vm_readv */
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include <bpf/bpf.h>

#include "agent_int.h"
#include "lc/log.h"
#include "lc/utf8.h"

#define PY_MAX_CODES 8192      /* code objects cached per process */
#define PY_MAX_STRING 1024     /* bytes of a name or file name */
#define PY_MAX_LINETABLE 65536 /* bytes of a location table */
#define PY_UNICODE_HEADER 80   /* bytes read ahead of a str's data */
#define PY_CODE_HEADER 256     /* bytes read of a code object */

/* One minor version's layout beyond what the BPF walk needs. */
typedef struct py_layout_s {
    int minor;
    struct agt_py_offsets bpf;
    uint16_t code_type;        /* PyObject.ob_type */
    uint16_t code_first_line;  /* int */
    uint16_t code_filename;    /* PyObject * (str) */
    uint16_t code_qualname;    /* PyObject * (str) */
    uint16_t code_linetable;   /* PyObject * (bytes) */
    uint16_t str_length;       /* PyASCIIObject.length */
    uint16_t str_state;        /* PyASCIIObject.state bits */
    uint16_t str_ascii_data;   /* compact ASCII: data after PyASCIIObject */
    uint16_t str_compact_data; /* compact non-ASCII: data after PyCompactUnicodeObject */
    uint16_t bytes_size;       /* PyVarObject.ob_size */
    uint16_t bytes_data;       /* PyBytesObject.ob_sval */
} py_layout_t;

static const py_layout_t PY_LAYOUTS[] = {
    {
        .minor = 11,
        .bpf =
            {
                .runtime_interp_head = 40,
                .interp_threads_head = 16,
                .tstate_next = 8,
                .tstate_native_tid = 160,
                .tstate_cframe = 56,
                .cframe_current_frame = 8,
                .frame_code = 32,
                .frame_previous = 48,
                .frame_prev_instr = 56,
                .frame_is_entry = 68,
                .code_adaptive = 184,
                .frame_owner = AGT_PY_NO_FIELD,
            },
        .code_type = 8,
        .code_first_line = 72,
        .code_filename = 112,
        .code_qualname = 128,
        .code_linetable = 136,
        .str_length = 16,
        .str_state = 32,
        .str_ascii_data = 48,
        .str_compact_data = 72,
        .bytes_size = 16,
        .bytes_data = 32,
    },
    {
        .minor = 12,
        .bpf =
            {
                .runtime_interp_head = 40,
                .interp_threads_head = 72,
                .tstate_next = 8,
                .tstate_native_tid = 144,
                .tstate_cframe = 56,
                .cframe_current_frame = 0,
                .frame_code = 0,
                .frame_previous = 8,
                .frame_prev_instr = 56,
                .frame_is_entry = AGT_PY_NO_FIELD,
                .code_adaptive = 192,
                .frame_owner = 70,
            },
        .code_type = 8,
        .code_first_line = 68,
        .code_filename = 112,
        .code_qualname = 128,
        .code_linetable = 136,
        .str_length = 16,
        .str_state = 32,
        .str_ascii_data = 40,
        .str_compact_data = 56,
        .bytes_size = 16,
        .bytes_data = 32,
    },
};

/* What the agent keeps for one interpreter process. */
typedef struct agt_py_state_s {
    const py_layout_t *layout;
    uint64_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault in the process */
    uint64_t code_type;        /* PyCode_Type in the process (0: unchecked) */
    agt_u64map_t by_addr;      /* code object address -> index + 1 into codes */
    agt_py_code_t *codes;
    size_t n_codes, cap_codes;
    size_t code_bytes;
} agt_py_state_t;

struct agt_python_s {
    int procs_fd;
    agt_python_stats_t stats;
};

agt_python_t *agt_python_new(int py_procs_fd)
{
    agt_python_t *py = lc_xcalloc(1, sizeof(*py));
    py->procs_fd = py_procs_fd;
    return py;
}

void agt_python_free(agt_python_t *py)
{
    lc_free(py);
}

void agt_python_stats(const agt_python_t *py, agt_python_stats_t *out)
{
    *out = py->stats;
}

/* ---------------------------------------------------------------- target memory */

static bool read_target(uint32_t pid, uint64_t addr, void *out, size_t len)
{
    struct iovec local = {out, len};
    struct iovec remote = {(void *)(uintptr_t)addr, len};
    return addr && process_vm_readv((pid_t)pid, &local, 1, &remote, 1, 0) == (ssize_t)len;
}

static uint64_t word_at(const uint8_t *buf, uint16_t off)
{
    uint64_t v;
    memcpy(&v, buf + off, sizeof(v));
    return v;
}

/* ---------------------------------------------------------------- recognition */

static const py_layout_t *layout_of(int minor)
{
    for (size_t i = 0; i < LC_ARRAY_LEN(PY_LAYOUTS); i++) {
        if (PY_LAYOUTS[i].minor == minor)
            return &PY_LAYOUTS[i];
    }
    return NULL;
}

/* The minor version: Py_Version (PY_VERSION_HEX) when exported, else the
 * "python3.N" in the object's file name; -1 when neither says. */
static int minor_version(const agt_proc_t *p, const agt_map_t *m, uint64_t bias)
{
    uint64_t hex;
    if (m->elf->py.version && read_target(p->pid, m->elf->py.version + bias, &hex, sizeof(hex)))
        return (hex >> 24) == 3 ? (int)((hex >> 16) & 0xff) : -1;
    const char *at = strstr(m->elf->basename, "python3.");
    int minor;
    return at && sscanf(at + 8, "%d", &minor) == 1 ? minor : -1;
}

static void state_free_codes(agt_py_state_t *s)
{
    for (size_t i = 0; i < s->n_codes; i++) {
        lc_free(s->codes[i].name);
        lc_free(s->codes[i].file);
        lc_free(s->codes[i].linetable);
    }
    lc_free(s->codes);
    s->codes = NULL;
    s->n_codes = s->cap_codes = 0;
    s->code_bytes = 0;
    agt_u64map_clear(&s->by_addr);
}

void agt_python_proc_free(agt_py_state_t *s)
{
    if (!s)
        return;
    state_free_codes(s);
    agt_u64map_fini(&s->by_addr);
    lc_free(s);
}

/* Writes the BPF entry of an interpreter of a supported version. */
static void recognise(agt_python_t *py, agt_proc_t *p, const agt_map_t *m, uint64_t bias,
                      const py_layout_t *layout)
{
    struct agt_py_proc entry = {
        .start_ns = p->start_ns, .runtime = m->elf->py.runtime + bias, .off = layout->bpf};
    if (bpf_map_update_elem(py->procs_fd, &p->pid, &entry, BPF_ANY) != 0) {
        py->stats.failed_total++;
        LC_LOG_DEBUG("agent: no Python entry (map full) pid=%u", p->pid);
        return;
    }
    agt_py_state_t *s = lc_xcalloc(1, sizeof(*s));
    s->layout = layout;
    agt_u64map_init(&s->by_addr);
    if (m->elf->py.eval) {
        s->eval_lo = m->elf->py.eval + bias;
        s->eval_hi = s->eval_lo + (m->elf->py.eval_size ? m->elf->py.eval_size : 1);
    }
    s->code_type = m->elf->py.code_type ? m->elf->py.code_type + bias : 0;
    p->py = s;
    py->stats.recognised_total++;
    py->stats.procs++;
}

void agt_python_on_maps(agt_python_t *py, agt_proc_t *p)
{
    if (p->py)
        return; /* the runtime does not move while the process lives */
    for (size_t i = 0; i < p->n_maps; i++) {
        const agt_map_t *m = &p->maps[i];
        uint64_t bias;
        if (!m->elf || !m->elf->py.runtime || !agt_map_bias(m, &bias))
            continue;
        int minor = minor_version(p, m, bias);
        const py_layout_t *layout = layout_of(minor);
        if (!layout) {
            py->stats.unsupported_total++;
            LC_LOG_INFO("agent: Python version without offsets, frames not read pid=%u "
                        "version=3.%d",
                        p->pid, minor);
            return;
        }
        recognise(py, p, m, bias, layout);
        return;
    }
}

void agt_python_forget(agt_python_t *py, agt_proc_t *p)
{
    if (!p->py)
        return;
    (void)bpf_map_delete_elem(py->procs_fd, &p->pid); /* ENOENT after an exec: fine */
    py->stats.procs--;
    py->stats.codes -= p->py->n_codes;
    py->stats.code_bytes -= p->py->code_bytes;
    agt_python_proc_free(p->py);
    p->py = NULL;
}

bool agt_python_is_eval(const agt_proc_t *p, uint64_t addr)
{
    return p->py && addr >= p->py->eval_lo && addr < p->py->eval_hi;
}

/* ---------------------------------------------------------------- code objects */

/* Latin-1 bytes as UTF-8 (out holds 2 * n + 1). */
static void latin1_to_utf8(const uint8_t *in, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (in[i] < 0x80) {
            out[k++] = (char)in[i];
        } else {
            out[k++] = (char)(0xc0 | (in[i] >> 6));
            out[k++] = (char)(0x80 | (in[i] & 0x3f));
        }
    }
    out[k] = '\0';
}

/* A str object's text: compact ASCII or Latin-1 strings (what names and
 * file names are); NULL for anything else or an unreadable one. */
static char *read_str(uint32_t pid, const py_layout_t *l, uint64_t addr)
{
    uint8_t head[PY_UNICODE_HEADER];
    if (!read_target(pid, addr, head, sizeof(head)))
        return NULL;
    uint64_t len = word_at(head, l->str_length);
    uint32_t state;
    memcpy(&state, head + l->str_state, sizeof(state));
    unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
    if (!compact || kind != 1)
        return NULL;
    if (len > PY_MAX_STRING)
        len = PY_MAX_STRING;
    uint8_t raw[PY_MAX_STRING];
    uint64_t data = addr + (ascii ? l->str_ascii_data : l->str_compact_data);
    if (len && !read_target(pid, data, raw, (size_t)len))
        return NULL;
    char *out = lc_xmalloc(2 * (size_t)len + 1);
    latin1_to_utf8(raw, (size_t)len, out);
    lc_utf8_sanitize(out);
    return out;
}

static uint8_t *read_bytes_object(uint32_t pid, const py_layout_t *l, uint64_t addr, size_t *len)
{
    uint8_t head[PY_UNICODE_HEADER];
    *len = 0;
    if (!read_target(pid, addr, head, sizeof(head)))
        return NULL;
    uint64_t n = word_at(head, l->bytes_size);
    if (n > PY_MAX_LINETABLE)
        return NULL; /* no line numbers beat a bad read */
    uint8_t *out = lc_xmalloc(n ? (size_t)n : 1);
    if (n && !read_target(pid, addr + l->bytes_data, out, (size_t)n)) {
        lc_free(out);
        return NULL;
    }
    *len = (size_t)n;
    return out;
}

static bool read_code(uint32_t pid, const agt_py_state_t *s, uint64_t addr, agt_py_code_t *out)
{
    const py_layout_t *l = s->layout;
    uint8_t head[PY_CODE_HEADER];
    if (!read_target(pid, addr, head, sizeof(head)))
        return false;
    if (s->code_type && word_at(head, l->code_type) != s->code_type)
        return false; /* not (or no longer) a code object */
    int32_t first;
    memcpy(&first, head + l->code_first_line, sizeof(first));
    memset(out, 0, sizeof(*out));
    out->name = read_str(pid, l, word_at(head, l->code_qualname));
    if (!out->name)
        return false;
    out->file = read_str(pid, l, word_at(head, l->code_filename));
    if (!out->file)
        out->file = lc_xstrdup("");
    out->first_line = first;
    out->linetable =
        read_bytes_object(pid, l, word_at(head, l->code_linetable), &out->linetable_len);
    return true;
}

static size_t code_size(const agt_py_code_t *c)
{
    return sizeof(*c) + strlen(c->name) + strlen(c->file) + 2 + c->linetable_len;
}

/* The cached code object at addr, read on a miss. */
static const agt_py_code_t *code_at(agt_python_t *py, agt_proc_t *p, uint64_t addr)
{
    agt_py_state_t *s = p->py;
    uint64_t *slot = agt_u64map_get(&s->by_addr, addr);
    if (slot)
        return &s->codes[*slot - 1];
    agt_py_code_t c;
    if (!read_code(p->pid, s, addr, &c)) {
        py->stats.code_reads_failed++;
        return NULL;
    }
    if (s->n_codes >= PY_MAX_CODES) { /* the cap: start over */
        py->stats.codes -= s->n_codes;
        py->stats.code_bytes -= s->code_bytes;
        state_free_codes(s);
    }
    s->codes = lc_xgrow(s->codes, &s->cap_codes, s->n_codes + 1, sizeof(*s->codes));
    s->codes[s->n_codes++] = c;
    *agt_u64map_put(&s->by_addr, addr, NULL) = s->n_codes;
    s->code_bytes += code_size(&c);
    py->stats.codes++;
    py->stats.code_bytes += code_size(&c);
    return &s->codes[s->n_codes - 1];
}

void agt_python_prefetch(agt_python_t *py, agt_proc_t *p, uint64_t addr)
{
    if (p->py)
        (void)code_at(py, p, addr);
}

const agt_py_code_t *agt_python_code(agt_python_t *py, agt_proc_t *p, uint64_t word, int64_t *line)
{
    *line = 0;
    if (!p->py)
        return NULL;
    const agt_py_code_t *c = code_at(py, p, word & AGT_PY_FRAME_ADDR_MASK);
    if (!c)
        return NULL;
    uint32_t unit = (uint32_t)((word >> AGT_PY_FRAME_OFF_SHIFT) & AGT_PY_FRAME_OFF_MAX);
    *line = agt_python_line(c->linetable, c->linetable_len, c->first_line, unit);
    return c;
}

/* ---------------------------------------------------------------- location table */

/* A 6-bit-chunk varint (bit 6 continues); false past the end. */
static bool read_varint(const uint8_t *t, size_t len, size_t *i, uint32_t *out)
{
    uint32_t v = 0;
    for (unsigned shift = 0; *i < len && shift < 32; shift += 6) {
        uint8_t b = t[(*i)++];
        v |= (uint32_t)(b & 63) << shift;
        if (!(b & 64)) {
            *out = v;
            return true;
        }
    }
    return false;
}

static bool read_svarint(const uint8_t *t, size_t len, size_t *i, int64_t *out)
{
    uint32_t v;
    if (!read_varint(t, len, i, &v))
        return false;
    *out = (v & 1) ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
    return true;
}

/* One entry's line delta; false when the table is malformed. Entry codes:
 * 0-9 short form (same line, one byte of columns), 10-12 one-line forms
 * (delta code - 10, two bytes), 13 no columns (signed delta), 14 long form
 * (signed delta, end line, two columns), 15 no location. */
static bool entry_delta(const uint8_t *t, size_t len, size_t *i, unsigned code, int64_t *delta)
{
    uint32_t skip;
    *delta = 0;
    if (code <= 9) {
        *i += 1;
    } else if (code <= 12) {
        *delta = (int64_t)code - 10;
        *i += 2;
    } else if (code == 13) {
        return read_svarint(t, len, i, delta);
    } else if (code == 14) {
        return read_svarint(t, len, i, delta) && read_varint(t, len, i, &skip) &&
               read_varint(t, len, i, &skip) && read_varint(t, len, i, &skip);
    }
    return *i <= len;
}

int64_t agt_python_line(const uint8_t *table, size_t len, int64_t first_line, uint32_t unit)
{
    int64_t line = first_line;
    uint32_t at = 0;
    for (size_t i = 0; i < len;) {
        uint8_t head = table[i++];
        if (!(head & 0x80))
            break; /* not at an entry's start: malformed */
        unsigned code = (head >> 3) & 15;
        uint32_t units = (uint32_t)(head & 7) + 1;
        int64_t delta;
        if (!entry_delta(table, len, &i, code, &delta))
            break;
        line += delta;
        if (unit < at + units)
            return line;
        at += units;
    }
    return first_line;
}
