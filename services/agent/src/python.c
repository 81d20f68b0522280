/*
 * python.c — CPython processes: recognising the interpreter, telling the BPF
 * walker where its state is, and naming the frames it brings back.
 *
 * Recognition: an executable mapping whose object exports `_PyRuntime` (the
 * python binary itself, or libpython) makes the process an interpreter. Its
 * version comes from `Py_Version` (3.11+, read from the process), else from
 * the object's file name (python3.10, libpython3.10.so). A version without a
 * row in the offsets table below is skipped and counted, never guessed.
 * 3.13's row takes its numbers from the process: the _Py_DebugOffsets table
 * the runtime keeps at the start of _PyRuntime.
 *
 * Offsets are facts of each version's structure layout (x86-64), checked
 * against the running interpreter itself (tests/integration/
 * test_agent_python.py probes them with ctypes): _PyRuntime ->
 * interpreters.head -> threads.head -> next ... (native_thread_id), then
 * tstate->cframe->current_frame -> _PyInterpreterFrame {f_code, previous,
 * prev_instr, is_entry}; PyCodeObject {co_firstlineno, co_filename,
 * co_qualname, co_linetable, co_code_adaptive}.
 *
 * 3.10 (PyFrameObject chain, threads by pthread_t) differs in ways the
 * BPF walk is told by flags (sampler.h, AGT_PY_F_*).
 *
 * Naming: the BPF program sends (code object address, instruction offset)
 * per frame, and announces each code object the first time it sees it
 * (AGT_EVENT_PYCODE), so that it is read while the process lives: a
 * program that exits before the drain keeps its names. The code object is
 * read here with process_vm_readv, checked to
 * be a code object (its type is PyCode_Type), and cached per process until
 * the cache holds PY_MAX_CODES entries (then it starts over: the memory is
 * capped, a long-lived process only pays the reads again). The line comes
 * from the location table (PEP 657 format, 3.11+; 3.10: PEP 626 pairs). The
 * name is module.co_qualname, the module from co_filename: its dotted path
 * through the enclosing packages (directories with an __init__.py), looked
 * up through /proc/PID/root once per file and cached per process, bounded
 * (why: docs/internals/agent.md).
 *
 * Threading: the agent's job only (one at a time), like procs.c.
 */
#define _GNU_SOURCE /* process_vm_readv */
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "agent_int.h"
#include "lc/log.h"
#include "lc/utf8.h"

#define PY_MAX_CODES 8192             /* code objects cached per process */
#define PY_MAX_CODE_BYTES (64u << 20) /* the caches of all processes together */
#define PY_MAX_STRING 1024            /* bytes of a name or file name */
#define PY_MAX_LINETABLE 65536        /* bytes of a location table */
#define PY_UNICODE_HEADER 80          /* bytes read ahead of a str's data */
#define PY_CODE_HEADER 256            /* bytes read of a code object */
#define PY_MAX_FILES 1024             /* file -> module names cached per process */
#define PY_MAX_PATH 4096              /* bytes of a path looked up (the kernel's PATH_MAX) */
#define PY_MAX_PACKAGE_DEPTH 32       /* packages enclosing one module */

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
    bool from_debug_offsets;   /* 3.13: every offset is read from the process itself */
} py_layout_t;

static const py_layout_t PY_LAYOUTS[] = {
    /* 3.10: a PyFrameObject chain (tstate->frame, f_back, f_code, int
     * f_lasti), one eval call per frame, threads known by pthread_t, no
     * co_qualname (co_name instead), the PEP 626 line table. */
    {
        .minor = 10,
        .bpf =
            {
                .runtime_interp_head = 32,
                .interp_threads_head = 8, /* tstate_head */
                .tstate_next = 8,
                .tstate_native_tid = 176, /* thread_id */
                .tstate_cframe = AGT_PY_NO_FIELD,
                .cframe_current_frame = 24, /* tstate->frame */
                .frame_code = 32,
                .frame_previous = 24,   /* f_back */
                .frame_prev_instr = 96, /* f_lasti */
                .frame_is_entry = AGT_PY_NO_FIELD,
                .code_adaptive = AGT_PY_NO_FIELD,
                .frame_owner = AGT_PY_NO_FIELD,
                .flags = AGT_PY_F_TID_IS_PTHREAD | AGT_PY_F_EACH_FRAME_ENTRY | AGT_PY_F_LASTI_INDEX,
            },
        .code_type = 8,
        .code_first_line = 40,
        .code_filename = 104,
        .code_qualname = 112, /* co_name */
        .code_linetable = 120,
        .str_length = 16,
        .str_state = 32,
        .str_ascii_data = 48,
        .str_compact_data = 72,
        .bytes_size = 16,
        .bytes_data = 32,
    },
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
    /* 3.13: the runtime states its own layout (_Py_DebugOffsets, below);
     * only what it does not say is here. */
    {
        .minor = 13,
        .bpf =
            {
                .tstate_cframe = AGT_PY_NO_FIELD, /* no _PyCFrame: tstate->current_frame */
                .frame_is_entry = AGT_PY_NO_FIELD,
            },
        .from_debug_offsets = true,
    },
};

/* The head of CPython 3.13's _Py_DebugOffsets, the first member of
 * _PyRuntime (Include/internal/pycore_runtime.h at v3.13.0): every field a
 * uint64_t, in this order. Only the sections the agent reads are named;
 * the ones between them are skipped as counts of words. */
#define PY_DEBUG_COOKIE "xdebugpy"
typedef struct py_debug_offsets_s {
    char cookie[8];
    uint64_t version; /* PY_VERSION_HEX */
    uint64_t free_threaded;
    struct {
        uint64_t size, finalizing, interpreters_head;
    } runtime;
    struct {
        uint64_t size, id, next, threads_head;
        uint64_t rest[9]; /* gc ... gil_runtime_state_holder */
    } interp;
    struct {
        uint64_t size, prev, next, interp, current_frame, thread_id, native_thread_id;
        uint64_t rest[2]; /* datastack_chunk, status */
    } tstate;
    struct {
        uint64_t size, previous, executable, instr_ptr, localsplus, owner;
    } frame;
    struct {
        uint64_t size, filename, name, qualname, linetable, firstlineno;
        uint64_t argcount, localsplusnames, localspluskinds, co_code_adaptive;
    } code;
    struct {
        uint64_t size, ob_type;
    } object;
    uint64_t type_tuple_list_dict_float_long[18]; /* sections the agent does not read */
    struct {
        uint64_t size, ob_size, ob_sval;
    } bytes;
    struct {
        uint64_t size, state, length, asciiobject_size;
    } unicode;
} py_debug_offsets_t;

_Static_assert(offsetof(py_debug_offsets_t, frame) == 224, "3.13 _Py_DebugOffsets layout");
_Static_assert(offsetof(py_debug_offsets_t, bytes) == 512, "3.13 _Py_DebugOffsets layout");
_Static_assert(sizeof(py_debug_offsets_t) == 568, "3.13 _Py_DebugOffsets layout");

#define PY_UNICODE_UTF8_FIELDS 16 /* PyCompactUnicodeObject: utf8_length, utf8 (3.12+) */

/* One source file's module name, as found on the process' file system. */
typedef struct py_module_s {
    char *file;   /* co_filename */
    char *module; /* dotted; "" for none */
} py_module_t;

/* What the agent keeps for one interpreter process. */
typedef struct agt_py_state_s {
    py_layout_t layout;
    uint64_t runtime;          /* _PyRuntime in the process: which interpreter this is */
    uint64_t eval_lo, eval_hi; /* _PyEval_EvalFrameDefault in the process */
    uint64_t text_lo, text_hi; /* the interpreter object's executable mappings */
    uint64_t code_type;        /* PyCode_Type in the process (0: unchecked) */
    agt_u64map_t by_addr;      /* code object address -> index + 1 into codes */
    agt_py_code_t *codes;
    size_t n_codes, cap_codes;
    size_t code_bytes;    /* the code objects' and the module names' */
    agt_u64map_t by_file; /* co_filename str address -> index + 1 into modules */
    py_module_t *modules;
    size_t n_modules, cap_modules;
    size_t module_bytes;
} agt_py_state_t;

struct agt_python_s {
    int procs_fd;
    const char *procfs; /* where /PID/root is looked up (the agent's) */
    agt_python_stats_t stats;
    /* the last code object read while the caches were at PY_MAX_CODE_BYTES:
     * named all the same, valid until the next read */
    agt_py_code_t uncached;
};

static void code_free(agt_py_code_t *c)
{
    lc_free(c->name);
    lc_free(c->file);
    lc_free(c->linetable);
    memset(c, 0, sizeof(*c));
}

agt_python_t *agt_python_new(int py_procs_fd, const char *procfs)
{
    agt_python_t *py = lc_xcalloc(1, sizeof(*py));
    py->procs_fd = py_procs_fd;
    py->procfs = procfs;
    return py;
}

void agt_python_free(agt_python_t *py)
{
    if (!py)
        return; /* an agent refused before its runtimes were set up */
    code_free(&py->uncached);
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

static void state_free_modules(agt_py_state_t *s)
{
    for (size_t i = 0; i < s->n_modules; i++) {
        lc_free(s->modules[i].file);
        lc_free(s->modules[i].module);
    }
    s->n_modules = 0;
    s->code_bytes -= s->module_bytes;
    s->module_bytes = 0;
    agt_u64map_clear(&s->by_file);
}

static void state_free_codes(agt_py_state_t *s)
{
    state_free_modules(s);
    for (size_t i = 0; i < s->n_codes; i++)
        code_free(&s->codes[i]);
    lc_free(s->codes);
    s->codes = NULL;
    s->n_codes = s->cap_codes = 0;
    s->code_bytes = 0;
    agt_u64map_clear(&s->by_addr);
}

/* Empties a process' code object cache and takes it out of the totals. */
static void drop_cache(agt_python_t *py, agt_py_state_t *s)
{
    py->stats.codes -= s->n_codes;
    py->stats.code_bytes -= s->code_bytes;
    state_free_codes(s);
}

void agt_python_proc_free(agt_py_state_t *s)
{
    if (!s)
        return;
    state_free_codes(s);
    agt_u64map_fini(&s->by_addr);
    agt_u64map_fini(&s->by_file);
    lc_free(s->modules);
    lc_free(s);
}

/* One stated offset, the size of its structure, and where it goes. */
typedef struct py_stated_s {
    uint64_t off, struct_size;
    uint16_t *out;
} py_stated_t;

/* Copies stated offsets; false when one does not start inside its structure
 * (a damaged or foreign table) or does not fit the walk's u16. */
static bool take_stated(const py_stated_t *f, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (f[i].off >= f[i].struct_size || f[i].off >= AGT_PY_NO_FIELD)
            return false;
        *f[i].out = (uint16_t)f[i].off;
    }
    return true;
}

/* Fills a 3.13 layout from the _Py_DebugOffsets at the start of _PyRuntime;
 * false when the table is not there, is not 3.13's, or is implausible. */
static bool layout_from_debug_offsets(uint32_t pid, uint64_t runtime, py_layout_t *l)
{
    py_debug_offsets_t d;
    if (!read_target(pid, runtime, &d, sizeof(d)) ||
        memcmp(d.cookie, PY_DEBUG_COOKIE, sizeof(d.cookie)) != 0)
        return false;
    if ((d.version >> 16) != 0x030d || d.free_threaded)
        return false; /* another layout of the table, or of PyObject */
    struct agt_py_offsets *b = &l->bpf;
    const py_stated_t fields[] = {
        {d.runtime.interpreters_head, d.runtime.size, &b->runtime_interp_head},
        {d.interp.threads_head, d.interp.size, &b->interp_threads_head},
        {d.tstate.next, d.tstate.size, &b->tstate_next},
        {d.tstate.native_thread_id, d.tstate.size, &b->tstate_native_tid},
        {d.tstate.current_frame, d.tstate.size, &b->cframe_current_frame},
        {d.frame.executable, d.frame.size, &b->frame_code},
        {d.frame.previous, d.frame.size, &b->frame_previous},
        {d.frame.instr_ptr, d.frame.size, &b->frame_prev_instr},
        {d.frame.owner, d.frame.size, &b->frame_owner},
        {d.code.co_code_adaptive, d.code.size, &b->code_adaptive},
        {d.object.ob_type, d.object.size, &l->code_type},
        {d.code.firstlineno, d.code.size, &l->code_first_line},
        {d.code.filename, d.code.size, &l->code_filename},
        {d.code.qualname, d.code.size, &l->code_qualname},
        {d.code.linetable, d.code.size, &l->code_linetable},
        {d.unicode.length, d.unicode.size, &l->str_length},
        {d.unicode.state, d.unicode.size, &l->str_state},
        {d.unicode.asciiobject_size, d.unicode.size + 1, &l->str_ascii_data}, /* a size */
        {d.bytes.ob_size, d.bytes.size, &l->bytes_size},
        {d.bytes.ob_sval, d.bytes.size, &l->bytes_data},
    };
    if (!take_stated(fields, LC_ARRAY_LEN(fields)))
        return false;
    l->str_compact_data = (uint16_t)(l->str_ascii_data + PY_UNICODE_UTF8_FIELDS);
    return true;
}

/* Where the interpreter's own code is: the executable mappings of the object
 * that holds _PyRuntime (the python binary or libpython), which do not move
 * while the process lives. A C extension is another object. */
static void interpreter_text(const agt_proc_t *p, const agt_elf_t *interp, agt_py_state_t *s)
{
    for (size_t i = 0; i < p->n_maps; i++) {
        const agt_map_t *m = &p->maps[i];
        if (m->elf != interp)
            continue;
        if (s->text_hi == 0 || m->start < s->text_lo)
            s->text_lo = m->start;
        if (m->end > s->text_hi)
            s->text_hi = m->end;
    }
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
    s->layout = *layout;
    s->runtime = entry.runtime;
    agt_u64map_init(&s->by_addr);
    agt_u64map_init(&s->by_file);
    if (m->elf->py.eval) {
        s->eval_lo = m->elf->py.eval + bias;
        s->eval_hi = s->eval_lo + (m->elf->py.eval_size ? m->elf->py.eval_size : 1);
    }
    s->code_type = m->elf->py.code_type ? m->elf->py.code_type + bias : 0;
    interpreter_text(p, m->elf, s);
    p->py = s;
    py->stats.recognised_total++;
    LC_ASSERT(layout->minor >= AGT_PY_FIRST_MINOR &&
              layout->minor < AGT_PY_FIRST_MINOR + AGT_PY_N_MINORS); /* a row beyond the counters */
    py->stats.recognised_by_minor[layout->minor - AGT_PY_FIRST_MINOR]++;
    py->stats.procs++;
}

/* Whether the maps still hold the interpreter p->py was made for: the
 * runtime does not move while an image lives, but an exec replaces the
 * image under the same pid and start time (a Popen child is its parent's
 * Python until it execs another). */
static bool interpreter_mapped(const agt_proc_t *p)
{
    for (size_t i = 0; i < p->n_maps; i++) {
        const agt_map_t *m = &p->maps[i];
        uint64_t bias;
        if (m->elf && m->elf->py.runtime && agt_map_bias(m, &bias) &&
            m->elf->py.runtime + bias == p->py->runtime)
            return true;
    }
    return false;
}

void agt_python_on_maps(agt_python_t *py, agt_proc_t *p)
{
    if (p->py && interpreter_mapped(p))
        return;
    agt_python_forget(py, p); /* exec'd: its old interpreter's entry would walk the new one */
    for (size_t i = 0; i < p->n_maps; i++) {
        const agt_map_t *m = &p->maps[i];
        uint64_t bias;
        if (!m->elf || !m->elf->py.runtime || !agt_map_bias(m, &bias))
            continue;
        int minor = minor_version(p, m, bias);
        const py_layout_t *layout = layout_of(minor);
        py_layout_t read;
        if (layout && layout->from_debug_offsets) {
            read = *layout;
            layout =
                layout_from_debug_offsets(p->pid, m->elf->py.runtime + bias, &read) ? &read : NULL;
        }
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
    drop_cache(py, p->py);
    agt_python_proc_free(p->py);
    p->py = NULL;
}

bool agt_python_is_eval(const agt_proc_t *p, uint64_t addr)
{
    return p->py && addr >= p->py->eval_lo && addr < p->py->eval_hi;
}

bool agt_python_in_interpreter(const agt_proc_t *p, uint64_t addr)
{
    return p->py && addr >= p->py->text_lo && addr < p->py->text_hi;
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

/* Module names are looked up once per source file; an entry replaced when
 * the str at the address is another file's (a freed str's memory reused). */
static size_t module_size(const py_module_t *m)
{
    return sizeof(*m) + strlen(m->file) + strlen(m->module) + 2;
}

/* Adds (or takes out) a module entry's bytes to the process' and the totals. */
static void count_module(agt_python_t *py, agt_py_state_t *s, const py_module_t *m, bool add)
{
    size_t size = module_size(m);
    s->module_bytes = add ? s->module_bytes + size : s->module_bytes - size;
    s->code_bytes = add ? s->code_bytes + size : s->code_bytes - size;
    py->stats.code_bytes = add ? py->stats.code_bytes + size : py->stats.code_bytes - size;
}

/* The slot of a new entry for file_at; the process' entries start over at
 * PY_MAX_FILES. */
static uint64_t *new_module_slot(agt_python_t *py, agt_py_state_t *s, uint64_t file_at)
{
    if (s->n_modules >= PY_MAX_FILES) {
        py->stats.code_bytes -= s->module_bytes;
        state_free_modules(s); /* a cap: this process' files are looked up again */
    }
    s->modules = lc_xgrow(s->modules, &s->cap_modules, s->n_modules + 1, sizeof(*s->modules));
    uint64_t *slot = agt_u64map_put(&s->by_file, file_at, NULL);
    *slot = ++s->n_modules;
    return slot;
}

/* The file's module, cached per process by its co_filename str object: found
 * on the process' own file system (/proc/PID/root; a relative name, under
 * its working directory) while it is alive. */
static const char *module_of_file(agt_python_t *py, uint32_t pid, agt_py_state_t *s,
                                  uint64_t file_at, const char *file)
{
    if (!file_at || !file[0])
        return ""; /* no file name read: no module */
    uint64_t *slot = agt_u64map_get(&s->by_file, file_at);
    if (slot && strcmp(s->modules[*slot - 1].file, file) == 0)
        return s->modules[*slot - 1].module;
    char root[PY_MAX_PATH];
    snprintf(root, sizeof(root), "%s/%u/%s", py->procfs, pid, file[0] == '/' ? "root" : "cwd");
    py_module_t m = {lc_xstrdup(file), agt_python_module(root, file)};
    if (slot) { /* another file's str now at the address */
        py_module_t *old = &s->modules[*slot - 1];
        count_module(py, s, old, false);
        lc_free(old->file);
        lc_free(old->module);
    } else {
        slot = new_module_slot(py, s, file_at);
    }
    s->modules[*slot - 1] = m;
    count_module(py, s, &m, true);
    return s->modules[*slot - 1].module;
}

static bool read_code(agt_python_t *py, const agt_proc_t *p, uint64_t addr, agt_py_code_t *out)
{
    agt_py_state_t *s = p->py;
    const py_layout_t *l = &s->layout;
    uint8_t head[PY_CODE_HEADER];
    if (!read_target(p->pid, addr, head, sizeof(head)))
        return false;
    if (s->code_type && word_at(head, l->code_type) != s->code_type)
        return false; /* not (or no longer) a code object */
    int32_t first;
    memcpy(&first, head + l->code_first_line, sizeof(first));
    memset(out, 0, sizeof(*out));
    char *qualname = read_str(p->pid, l, word_at(head, l->code_qualname));
    if (!qualname)
        return false;
    out->file = read_str(p->pid, l, word_at(head, l->code_filename));
    if (!out->file)
        out->file = lc_xstrdup("");
    const char *module = module_of_file(py, p->pid, s, word_at(head, l->code_filename), out->file);
    out->name = agt_python_qualified_name(module, qualname);
    lc_free(qualname);
    out->first_line = first;
    out->qualname_at = word_at(head, l->code_qualname);
    out->filename_at = word_at(head, l->code_filename);
    out->linetable =
        read_bytes_object(p->pid, l, word_at(head, l->code_linetable), &out->linetable_len);
    return true;
}

/* ---------------------------------------------------------------- module names */

/* A path component: [start, end) of a string. */
typedef struct py_span_s {
    size_t start, end;
} py_span_t;

/* The component ending at `end` (exclusive) of path. */
static py_span_t component_before(const char *path, size_t end)
{
    size_t start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    return (py_span_t){start, end};
}

/* Whether the directory path[0, end) holds an __init__.py: a package. */
static bool is_package_dir(const char *path, size_t end)
{
    char probe[PY_MAX_PATH + sizeof("/__init__.py")];
    snprintf(probe, sizeof(probe), "%.*s/__init__.py", (int)end, path);
    return access(probe, F_OK) == 0;
}

/* The module's components in path (the file's, then each enclosing package
 * directory's, rootward), none at or above `floor`. Returns how many. */
static size_t package_components(const char *path, size_t floor, py_span_t *out)
{
    size_t end = strlen(path) - 3; /* without ".py" */
    py_span_t c = component_before(path, end);
    size_t n = 0;
    if (c.end - c.start == 8 && strncmp(path + c.start, "__init__", 8) == 0) {
        if (c.start <= floor + 1)
            return 0; /* an __init__.py at the root: a package without a name */
        c = component_before(path, c.start - 1); /* it names its directory */
    }
    if (c.start == c.end)
        return 0; /* "x/.py", "x//__init__.py": no name */
    out[n++] = c;
    while (n < PY_MAX_PACKAGE_DEPTH && c.start > floor + 1 && is_package_dir(path, c.start - 1)) {
        c = component_before(path, c.start - 1);
        if (c.start <= floor || c.start == c.end)
            break;
        out[n++] = c;
    }
    return n;
}

static char *join_components(const char *path, const py_span_t *c, size_t n)
{
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += c[i].end - c[i].start + 1;
    char *out = lc_xmalloc(len + 1);
    size_t k = 0;
    for (size_t i = n; i-- > 0;) { /* rootward first */
        memcpy(out + k, path + c[i].start, c[i].end - c[i].start);
        k += c[i].end - c[i].start;
        if (i)
            out[k++] = '.';
    }
    out[k] = '\0';
    return out;
}

/* The base name of a file that is not a .py module (a script without the
 * suffix): its module is its name, no packages looked for. */
static char *base_name(const char *file)
{
    const char *slash = strrchr(file, '/');
    return lc_xstrdup(slash ? slash + 1 : file);
}

char *agt_python_module(const char *root, const char *file)
{
    const char *close = strchr(file, '>');
    if (strncmp(file, "<frozen ", 8) == 0 && close)
        return lc_xstrndup(file + 8, (size_t)(close - file) - 8);
    if (file[0] == '<' || file[0] == '\0')
        return lc_xstrdup("");
    size_t len = strlen(file);
    if (len < 3 || strcmp(file + len - 3, ".py") != 0)
        return base_name(file);
    char path[PY_MAX_PATH];
    int n = snprintf(path, sizeof(path), "%s%s%s", root, file[0] == '/' ? "" : "/", file);
    if (n < 0 || (size_t)n >= sizeof(path))
        return lc_xstrdup(""); /* longer than any path the kernel takes */
    py_span_t parts[PY_MAX_PACKAGE_DEPTH];
    return join_components(path, parts, package_components(path, strlen(root), parts));
}

char *agt_python_qualified_name(const char *module, const char *qualname)
{
    if (module[0] == '\0')
        return lc_xstrdup(qualname);
    size_t n = strlen(module) + 1 + strlen(qualname) + 1;
    char *out = lc_xmalloc(n);
    snprintf(out, n, "%s.%s", module, qualname);
    return out;
}

static size_t code_size(const agt_py_code_t *c)
{
    return sizeof(*c) + strlen(c->name) + strlen(c->file) + 2 + c->linetable_len;
}

/* Whether the code object at addr is still the one cached: a freed code
 * object's memory goes to the next (a module's code run once at import, then
 * a function's), and the BPF walk announces an address once. True when the
 * process cannot be read (gone): its cache is all there is. */
static bool still_there(uint32_t pid, const agt_py_state_t *s, uint64_t addr,
                        const agt_py_code_t *c)
{
    const py_layout_t *l = &s->layout;
    uint8_t head[PY_CODE_HEADER];
    if (!read_target(pid, addr, head, sizeof(head)))
        return true;
    return word_at(head, l->code_qualname) == c->qualname_at &&
           word_at(head, l->code_filename) == c->filename_at &&
           (!s->code_type || word_at(head, l->code_type) == s->code_type);
}

/* The cached code object at addr, read on a miss (and, with `check`, when
 * the object there is no longer the one cached). */
static const agt_py_code_t *code_at(agt_python_t *py, agt_proc_t *p, uint64_t addr, bool check)
{
    agt_py_state_t *s = p->py;
    uint64_t *slot = agt_u64map_get(&s->by_addr, addr);
    if (slot && (!check || still_there(p->pid, s, addr, &s->codes[*slot - 1])))
        return &s->codes[*slot - 1];
    agt_py_code_t c;
    if (!read_code(py, p, addr, &c)) {
        py->stats.code_reads_failed++;
        return NULL;
    }
    size_t size = code_size(&c);
    if (slot) { /* stale: the new object takes its place */
        agt_py_code_t *old = &s->codes[*slot - 1];
        s->code_bytes -= code_size(old);
        py->stats.code_bytes -= code_size(old);
        code_free(old);
        *old = c;
        s->code_bytes += size;
        py->stats.code_bytes += size;
        py->stats.code_replaced_total++;
        return old;
    }
    if (s->n_codes >= PY_MAX_CODES || py->stats.code_bytes + size > PY_MAX_CODE_BYTES)
        drop_cache(py, s); /* a cap: this process starts over */
    if (py->stats.code_bytes + size > PY_MAX_CODE_BYTES) {
        py->stats.cache_full_total++; /* the others hold it all: named, not kept */
        code_free(&py->uncached);
        py->uncached = c;
        return &py->uncached;
    }
    s->codes = lc_xgrow(s->codes, &s->cap_codes, s->n_codes + 1, sizeof(*s->codes));
    s->codes[s->n_codes++] = c;
    *agt_u64map_put(&s->by_addr, addr, NULL) = s->n_codes;
    s->code_bytes += size;
    py->stats.codes++;
    py->stats.code_bytes += size;
    return &s->codes[s->n_codes - 1];
}

void agt_python_prefetch(agt_python_t *py, agt_proc_t *p, uint64_t addr)
{
    if (p->py)
        (void)code_at(py, p, addr, false);
}

const agt_py_code_t *agt_python_code(agt_python_t *py, agt_proc_t *p, uint64_t word, int64_t *line)
{
    *line = 0;
    if (!p->py)
        return NULL;
    const agt_py_code_t *c = code_at(py, p, word & AGT_PY_FRAME_ADDR_MASK, true);
    if (!c)
        return NULL;
    uint32_t unit = (uint32_t)((word >> AGT_PY_FRAME_OFF_SHIFT) & AGT_PY_FRAME_OFF_MAX);
    *line = p->py->layout.minor == 10
                ? agt_python_line_310(c->linetable, c->linetable_len, c->first_line, unit)
                : agt_python_line(c->linetable, c->linetable_len, c->first_line, unit);
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

/* 3.10's table (PEP 626): byte pairs (bytes of code covered, unsigned; line
 * delta, signed, -128 for "no line"), addresses in bytes (2 per unit). */
int64_t agt_python_line_310(const uint8_t *table, size_t len, int64_t first_line, uint32_t unit)
{
    uint64_t addr = (uint64_t)unit * 2, start = 0;
    int64_t line = first_line;
    for (size_t i = 0; i + 1 < len; i += 2) {
        int8_t delta = (int8_t)table[i + 1];
        uint64_t end = start + table[i];
        if (delta != -128)
            line += delta;
        if (addr >= start && addr < end)
            return delta == -128 ? first_line : line;
        start = end;
    }
    return first_line;
}
