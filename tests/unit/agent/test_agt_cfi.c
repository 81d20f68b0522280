/*
 * test_agt_cfi.c — the unwind rows cfi.c builds from .eh_frame/.debug_frame,
 * checked row by row against binutils' interpretation of the same CFI
 * (`readelf --debug-dump=frames-interp`, the independent oracle), on a
 * program built -O2 -fomit-frame-pointer here, libc, libz and this test.
 *
 * For every row readelf prints (address, CFA rule, rbp and return-address
 * columns) the agent's table must hold the same rule at that address:
 * rsp/rbp + offset exactly, "exp" as the PLT form or unsupported, the
 * return address at c-8 or undefined (outermost frame).
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agt_test_util.h"

typedef struct oracle_stats_s {
    size_t rows, plt, undef, rbp_saved;
} oracle_stats_t;

static void load_rows(const char *path, agt_elf_t *e)
{
    memset(e, 0, sizeof(*e));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    LC_CHECK(fd >= 0);
    LC_ASSERT_OK(agt_elf_load(fd, NULL, 0, e));
    close(fd);
}

/* Column index of name in readelf's "LOC CFA ..." header, or -1. */
static int column(char cols[][16], int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        if (!strcmp(cols[i], name))
            return i;
    }
    return -1;
}

/* One readelf row against our table. Columns: LOC CFA <regs...>. */
static void check_row(const agt_elf_t *e, char cols[][16], int ncols, char vals[][32], int nvals,
                      const char *where, oracle_stats_t *st)
{
    uint64_t loc = strtoull(vals[0], NULL, 16);
    const struct agt_unwind_row *r = agt_cfi_lookup(&e->cfi, loc);
    char ctx[256];
    snprintf(ctx, sizeof(ctx), "%s @%llx CFA=%s", where, (unsigned long long)loc, vals[1]);
    if (!r) {
        fprintf(stderr, "no row: %s\n", ctx);
        LC_CHECK(r);
        return;
    }
    st->rows++;
    int ra = column(cols, ncols, "ra"), rbp = column(cols, ncols, "rbp");
    const char *ra_v = ra >= 0 && ra < nvals ? vals[ra] : "u";
    if (!strcmp(ra_v, "u")) {
        st->undef++;
        if (r->cfa != AGT_CFA_UNDEF_RA)
            fprintf(stderr, "want UNDEF_RA: %s got %d\n", ctx, r->cfa);
        LC_CHECK(r->cfa == AGT_CFA_UNDEF_RA);
        return;
    }
    if (strcmp(ra_v, "c-8") != 0) {
        LC_CHECK(r->cfa == AGT_CFA_UNSUPPORTED);
        return;
    }
    long off;
    char reg[8];
    if (sscanf(vals[1], "%7[a-z0-9]%ld", reg, &off) == 2 && vals[1][strlen(reg)] == '+') {
        int want = !strcmp(reg, "rsp") ? AGT_CFA_RSP : !strcmp(reg, "rbp") ? AGT_CFA_RBP : -1;
        if (want < 0) {
            LC_CHECK(r->cfa == AGT_CFA_UNSUPPORTED);
            return;
        }
        if (off < INT16_MIN || off > INT16_MAX) { /* frames over 32 KiB: stop, by design */
            LC_CHECK(r->cfa == AGT_CFA_UNSUPPORTED);
            return;
        }
        if (r->cfa != want || r->cfa_off != off)
            fprintf(stderr, "CFA mismatch: %s got kind %d off %d\n", ctx, r->cfa, r->cfa_off);
        LC_CHECK(r->cfa == want && r->cfa_off == off);
    } else if (!strcmp(vals[1], "exp")) {
        st->plt += r->cfa == AGT_CFA_PLT;
        LC_CHECK(r->cfa == AGT_CFA_PLT || r->cfa == AGT_CFA_UNSUPPORTED);
    } else {
        LC_CHECK(r->cfa == AGT_CFA_UNSUPPORTED);
        return;
    }
    const char *rbp_v = rbp >= 0 && rbp < nvals ? vals[rbp] : "u";
    long rbp_off;
    if (sscanf(rbp_v, "c%ld", &rbp_off) == 1) {
        st->rbp_saved++;
        if (r->rbp_off * 8 != rbp_off)
            fprintf(stderr, "rbp mismatch: %s rbp=%s got %d\n", ctx, rbp_v, r->rbp_off);
        LC_CHECK(r->rbp_off * 8 == rbp_off);
    } else if (!strcmp(rbp_v, "u") || !strcmp(rbp_v, "s")) {
        LC_CHECK(r->rbp_off == 0);
    } else {
        LC_CHECK(r->rbp_off == AGT_RBP_LOST);
    }
}

/* A CIE's initial row, by section offset: an FDE without a table of its own
 * (readelf prints none) has exactly that row. */
typedef struct oracle_cie_s {
    uint64_t offset;
    char cols[24][16];
    char vals[24][32];
    int ncols, nvals;
} oracle_cie_t;

typedef struct oracle_s {
    oracle_cie_t *cies;
    size_t n_cies;
    oracle_cie_t *cur_cie; /* the CIE whose rows are being read, or NULL */
    uint64_t fde_start, fde_cie;
    bool fde_open, fde_has_rows;
    char cols[24][16];
    int ncols;
} oracle_t;

static void close_fde(oracle_t *o, const agt_elf_t *e, const char *path, oracle_stats_t *st)
{
    if (!o->fde_open || o->fde_has_rows)
        return;
    o->fde_open = false;
    for (size_t i = 0; i < o->n_cies; i++) {
        oracle_cie_t *c = &o->cies[i];
        if (c->offset != o->fde_cie || !c->nvals)
            continue;
        char vals[24][32];
        memcpy(vals, c->vals, sizeof(vals));
        snprintf(vals[0], sizeof(vals[0]), "%016llx", (unsigned long long)o->fde_start);
        check_row(e, c->cols, c->ncols, vals, c->nvals, path, st);
    }
}

/* Splits a readelf line into columns; "r10 (r10)" is one column. */
static int split_columns(char *line, char *tok[24])
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " \t\n", &save); t; t = strtok_r(NULL, " \t\n", &save)) {
        if (t[0] == '(' && n > 0)
            continue; /* the register name readelf adds after "rN" */
        if (n < 24)
            tok[n++] = t;
    }
    return n;
}

static void oracle_line(oracle_t *o, char *line, const agt_elf_t *e, const char *path,
                        oracle_stats_t *st)
{
    char *p;
    if ((p = strstr(line, " CIE"))) {
        close_fde(o, e, path, st);
        o->cies = lc_xrealloc(o->cies, (o->n_cies + 1) * sizeof(*o->cies));
        o->cur_cie = &o->cies[o->n_cies++];
        memset(o->cur_cie, 0, sizeof(*o->cur_cie));
        o->cur_cie->offset = strtoull(line, NULL, 16);
        return;
    }
    if (strstr(line, " FDE ") && (p = strstr(line, "pc="))) {
        close_fde(o, e, path, st);
        char *cie = strstr(line, "cie=");
        o->fde_cie = cie ? strtoull(cie + 4, NULL, 16) : 0;
        o->fde_start = strtoull(p + 3, NULL, 16);
        o->fde_open = true;
        o->fde_has_rows = false;
        o->cur_cie = NULL;
        return;
    }
    char *tok[24];
    int n = split_columns(line, tok);
    if (n >= 2 && !strcmp(tok[0], "LOC")) {
        o->ncols = n;
        for (int i = 0; i < n; i++)
            snprintf(o->cols[i], sizeof(o->cols[i]), "%s", tok[i]);
        if (o->cur_cie) {
            memcpy(o->cur_cie->cols, o->cols, sizeof(o->cols));
            o->cur_cie->ncols = n;
        }
        return;
    }
    if (n < 2 || strlen(tok[0]) < 16 || strspn(tok[0], "0123456789abcdef") != strlen(tok[0]))
        return; /* not a row ("ZERO terminator", blank lines) */
    char vals[24][32];
    for (int i = 0; i < n; i++)
        snprintf(vals[i], sizeof(vals[i]), "%s", tok[i]);
    if (o->cur_cie) {
        if (!o->cur_cie->nvals) { /* the initial row */
            memcpy(o->cur_cie->vals, vals, sizeof(vals));
            o->cur_cie->nvals = n;
        }
    } else if (o->fde_open) {
        o->fde_has_rows = true;
        check_row(e, o->cols, o->ncols, vals, n, path, st);
    }
}

/* Runs readelf on path and checks every interpreted row of `section`
 * (.debug_frame FDEs for code .eh_frame covers are ignored by design, so
 * .debug_frame is checked on objects built without .eh_frame entries). */
static oracle_stats_t check_section_against_readelf(const char *path, const char *section)
{
    agt_elf_t e;
    load_rows(path, &e);
    LC_CHECK(e.cfi.n > 0);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "readelf --wide --debug-dump=frames-interp '%s' 2>/dev/null", path);
    FILE *f = popen(cmd, "r");
    LC_CHECK(f);
    char line[1024];
    bool in_eh = false;
    oracle_t o = {0};
    oracle_stats_t st = {0};
    while (f && fgets(line, sizeof(line), f)) {
        if (strstr(line, "Contents of the "))
            in_eh = strstr(line, section) &&
                    strstr(line, " section") == strstr(line, section) + strlen(section);
        if (in_eh)
            oracle_line(&o, line, &e, path, &st);
    }
    close_fde(&o, &e, path, &st);
    if (f)
        pclose(f);
    lc_free(o.cies);
    fprintf(stderr, "%s: %zu rows (ours %zu), %zu PLT, %zu outermost, %zu with rbp saved\n", path,
            st.rows, e.cfi.n, st.plt, st.undef, st.rbp_saved);
    LC_CHECK(st.rows > 0);
    agt_elf_fini(&e);
    return st;
}

static oracle_stats_t check_against_readelf(const char *path)
{
    return check_section_against_readelf(path, ".eh_frame");
}

static bool build_tree(const char *flags, const char *exe)
{
    char src[512], cmd[1400]; /* this file is tests/unit/agent/test_agt_cfi.c */
    snprintf(src, sizeof(src), "%s", __FILE__);
    char *cut = strstr(src, "unit/agent/test_agt_cfi.c");
    if (!cut)
        return false;
    snprintf(cut, sizeof(src) - (size_t)(cut - src), "integration/agentprogs/unwind_tree.c");
    snprintf(cmd, sizeof(cmd), "cc %s -fno-ipa-icf %s -o %s -lz -ldl", flags, src, exe);
    return system(cmd) == 0;
}

static void test_debug_frame_only(void)
{
    char dir[] = "/tmp/agt-cfi-XXXXXX", exe[256];
    LC_CHECK(mkdtemp(dir));
    snprintf(exe, sizeof(exe), "%s/tree_dbg", dir);
    /* -g without unwind tables: GCC writes the CFI to .debug_frame */
    if (!build_tree("-O2 -g -fomit-frame-pointer -fno-asynchronous-unwind-tables "
                    "-fno-unwind-tables",
                    exe)) {
        fprintf(stderr, "skipped: no C compiler\n");
        return;
    }
    oracle_stats_t st = check_section_against_readelf(exe, ".debug_frame");
    LC_CHECK(st.rows > 20);
    unlink(exe);
    rmdir(dir);
}

static void test_program_without_frame_pointers(void)
{
    char dir[] = "/tmp/agt-cfi-XXXXXX", exe[256];
    LC_CHECK(mkdtemp(dir));
    snprintf(exe, sizeof(exe), "%s/tree", dir);
    if (!build_tree("-O2 -fomit-frame-pointer", exe)) {
        fprintf(stderr, "skipped: no C compiler\n");
        return;
    }
    oracle_stats_t st = check_against_readelf(exe);
    LC_CHECK(st.plt > 0);   /* the .plt's expression form */
    LC_CHECK(st.undef > 0); /* _start */
    unlink(exe);
    rmdir(dir);
}

static void test_shared_libraries(void)
{
    static const char *const libs[] = {"/lib/x86_64-linux-gnu/libc.so.6",
                                       "/lib/x86_64-linux-gnu/libz.so.1",
                                       "/lib/x86_64-linux-gnu/libm.so.6"};
    for (size_t i = 0; i < LC_ARRAY_LEN(libs); i++) {
        if (access(libs[i], R_OK) == 0)
            check_against_readelf(libs[i]);
    }
}

static void test_this_binary(void)
{
    char self[512];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    LC_CHECK(n > 0);
    self[n] = '\0';
    check_against_readelf(self);
}

static void test_garbage_is_rejected_quietly(void)
{
    /* Truncated and random CFI must not crash or produce rows past the input. */
    uint8_t junk[4096];
    uint32_t x = 2463534242u;
    for (size_t round = 0; round < 200; round++) {
        for (size_t i = 0; i < sizeof(junk); i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            junk[i] = (uint8_t)x;
        }
        /* a plausible CIE header at the start so parsing goes deeper */
        static const uint8_t cie[] = {0x14, 0, 0, 0, 0, 0, 0, 0, 1, 'z', 'R', 0, 1, 0x78, 0x10};
        memcpy(junk, cie, sizeof(cie));
        agt_cfi_section_t s = {junk, (size_t)(x % sizeof(junk)), 0x1000};
        agt_cfi_rows_t rows;
        agt_cfi_build(&s, NULL, &rows);
        for (size_t i = 1; i < rows.n; i++)
            LC_CHECK(rows.v[i - 1].pc < rows.v[i].pc);
        agt_cfi_rows_fini(&rows);
    }
}

LC_TEST_MAIN(test_program_without_frame_pointers, test_debug_frame_only, test_shared_libraries,
             test_this_binary, test_garbage_is_rejected_quietly)
