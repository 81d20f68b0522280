/*
 * test_agt_symbols.c — the symbol sources: ELF objects (this test binary's
 * .symtab, libc's .dynsym, the vDSO), the ELF cache, kallsyms and perf maps.
 *
 * Oracles: the addresses of this file's own functions and of libc's getpid
 * (what the dynamic linker resolved), /proc/self/maps for where they are
 * mapped, and hand-written kallsyms / perf map text.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gelf.h>

#include "agt_test_util.h"

__attribute__((noinline)) int agt_probe_function(int x)
{
    return x * 3 + 1;
}

/* Our own executable mappings, parsed by the agent's own parser. */
static void own_maps(agt_proc_t *p)
{
    memset(p, 0, sizeof(*p));
    static char text[1 << 20]; /* procfs reports size 0: read until EOF */
    FILE *f = fopen("/proc/self/maps", "r");
    size_t len = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
    if (f)
        fclose(f);
    LC_CHECK(len > 0);
    LC_ASSERT_OK(agt_proc_parse_maps(p, text, len));
}

static void free_maps(agt_proc_t *p)
{
    lc_free(p->maps);
    lc_free(p->map_paths);
}

/* Symbolizes addr through the mapping it falls in, as the agent does. */
static const char *symbolize(const agt_proc_t *p, const agt_elf_t *e, uint64_t addr)
{
    const agt_map_t *m = agt_proc_find_map(p, addr);
    uint64_t vaddr;
    if (!m || !agt_elf_offset_to_vaddr(e, addr - m->start + m->offset, &vaddr))
        return NULL;
    return agt_elf_symbol(e, vaddr);
}

static void test_elf_symtab_of_this_binary(void)
{
    agt_proc_t p;
    own_maps(&p);
    uint64_t addr = (uint64_t)(uintptr_t)&agt_probe_function;
    const agt_map_t *m = agt_proc_find_map(&p, addr);
    LC_CHECK(m && m->kind == AGT_MAP_FILE);
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    agt_elf_t e = {0};
    LC_ASSERT_OK(agt_elf_load(fd, NULL, 0, &e));
    close(fd);
    LC_CHECK(e.has_symtab);
    LC_CHECK(strlen(e.build_id) >= 32);
    LC_ASSERT_STR_EQ(symbolize(&p, &e, addr), "agt_probe_function");
    LC_ASSERT_STR_EQ(symbolize(&p, &e, addr + 3), "agt_probe_function");
    LC_ASSERT_STR_EQ(symbolize(&p, &e, (uint64_t)(uintptr_t)&test_elf_symtab_of_this_binary),
                     "test_elf_symtab_of_this_binary");
    char only_id[65];
    fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    LC_ASSERT_OK(agt_elf_read_build_id(fd, only_id));
    close(fd);
    LC_ASSERT_STR_EQ(only_id, e.build_id);
    agt_elf_fini(&e);
    free_maps(&p);
}

/* The address of this binary's section `name` (0: none), read with libelf
 * itself rather than through the agent. */
static uint64_t own_section_addr(const char *name)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    size_t shstrndx = 0;
    uint64_t addr = 0;
    if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0) {
        for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn)) && !addr;) {
            GElf_Shdr sh;
            const char *n = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
            if (n && strcmp(n, name) == 0)
                addr = sh.sh_addr;
        }
    }
    if (elf)
        elf_end(elf);
    close(fd);
    return addr;
}

/* `_init` has no size (crti.o): it covers .init, not the PLT stubs after it. */
static void test_elf_sizeless_symbol_ends_with_its_section(void)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    agt_elf_t e = {0};
    LC_ASSERT_OK(agt_elf_load(fd, NULL, 0, &e));
    close(fd);
    uint64_t init = own_section_addr(".init"), plt = own_section_addr(".plt");
    LC_CHECK(init && plt > init);
    LC_ASSERT_STR_EQ(agt_elf_symbol(&e, init), "_init");
    LC_CHECK(agt_elf_symbol(&e, plt) == NULL);
    LC_CHECK(agt_elf_symbol(&e, plt + 16) == NULL);
    agt_elf_fini(&e);
}

static void test_elf_dynsym_of_libc(void)
{
    agt_proc_t p;
    own_maps(&p);
    pid_t (*fn)(void) = getpid;
    uint64_t addr = (uint64_t)(uintptr_t)fn;
    const agt_map_t *m = agt_proc_find_map(&p, addr);
    LC_CHECK(m && strstr(m->path, "libc"));
    if (m) {
        int fd = open(m->path, O_RDONLY | O_CLOEXEC);
        agt_elf_t e = {0};
        LC_ASSERT_OK(agt_elf_load(fd, NULL, 0, &e));
        close(fd);
        const char *name = symbolize(&p, &e, addr);
        LC_CHECK(name && strstr(name, "getpid"));
        if (!name || !strstr(name, "getpid"))
            fprintf(stderr, "getpid resolved to %s\n", name ? name : "(null)");
        agt_elf_fini(&e);
    }
    free_maps(&p);
}

static void test_vdso_has_clock_functions(void)
{
    agt_elfcache_t *c = agt_elfcache_new(4);
    agt_elf_t *v = agt_elfcache_vdso(c);
    LC_CHECK(v != NULL);
    bool found = false;
    for (size_t i = 0; v && i < v->n_syms; i++)
        found |= strstr(v->names + v->sym_names[i], "clock_gettime") != NULL;
    LC_CHECK(found);
    LC_CHECK(agt_elfcache_vdso(c) == v); /* parsed once */
    agt_elfcache_free(c);
}

/* Same file by (dev, inode) is a hit; the same build id under another
 * inode (a container's copy) is a hit too; unreferenced objects get trimmed. */
static void test_elfcache_hits_by_file_and_build_id(void)
{
    agt_elfcache_t *c = agt_elfcache_new(0);
    struct stat st;
    LC_ASSERT_OK(stat("/proc/self/exe", &st));
    agt_elf_t *a = agt_elfcache_get(c, st.st_dev, st.st_ino, "/proc/self/exe", NULL, "/x/test");
    agt_elf_t *b = agt_elfcache_get(c, st.st_dev, st.st_ino, "/nonexistent", NULL, "/x/test");
    agt_elf_t *other = agt_elfcache_get(c, st.st_dev + 1000, 42, "/nonexistent", "/proc/self/exe",
                                        "/container/test");
    agt_elfcache_stats_t s;
    agt_elfcache_stats(c, &s);
    LC_CHECK(a && a == b && a == other);
    LC_ASSERT_EQ(s.misses, 1);
    LC_ASSERT_EQ(s.hits, 2);
    LC_CHECK(a && a->refs == 3);
    LC_CHECK(agt_elfcache_get(c, 1, 2, "/nonexistent", NULL, "/gone") == NULL);
    agt_elfcache_stats(c, &s);
    LC_ASSERT_EQ(s.failures, 1);
    LC_ASSERT_STR_EQ(a ? a->basename : NULL, "test");
    for (int i = 0; i < 3; i++)
        agt_elfcache_unref(c, a);
    LC_ASSERT_EQ(agt_elfcache_size(c), 1);
    agt_elfcache_trim(c, 1);
    LC_ASSERT_EQ(agt_elfcache_size(c), 0);
    LC_CHECK(agt_elfcache_get(c, st.st_dev, st.st_ino, "/nonexistent", NULL, "/x") == NULL);
    agt_elfcache_free(c);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    LC_CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void test_kallsyms_text_symbols_in_order(void)
{
    char path[] = "/tmp/agt-kallsyms-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    write_file(path, "ffffffff81000200 T beta_fn\n"
                     "ffffffff81000100 t alpha_fn\n"
                     "ffffffff81000300 D some_data\n"
                     "ffffffffc0001000 t mod_fn\t[mymod]\n"
                     "garbage line\n");
    agt_kallsyms_t ks;
    LC_ASSERT_OK(agt_kallsyms_load(path, &ks));
    LC_ASSERT_EQ(ks.n, 3);
    LC_ASSERT_STR_EQ(agt_kallsyms_lookup(&ks, 0xffffffff81000150ULL), "alpha_fn");
    LC_ASSERT_STR_EQ(agt_kallsyms_lookup(&ks, 0xffffffff81000200ULL), "beta_fn");
    LC_ASSERT_STR_EQ(agt_kallsyms_lookup(&ks, 0xffffffff81000350ULL), "beta_fn");
    LC_ASSERT_STR_EQ(agt_kallsyms_lookup(&ks, 0xffffffffc0001010ULL), "mod_fn [mymod]");
    LC_CHECK(agt_kallsyms_lookup(&ks, 0xffffffff81000000ULL) == NULL);
    agt_kallsyms_fini(&ks);
    write_file(path, "0000000000000000 T hidden_a\n0000000000000000 t hidden_b\n");
    LC_ASSERT_EQ(agt_kallsyms_load(path, &ks), LC_EUNSUPPORTED);
    unlink(path);
}

/* The real kernel: the address /proc/kallsyms gives do_syscall_64 (read
 * here with sscanf, independently) resolves back to it. */
static void test_kallsyms_of_the_running_kernel(void)
{
    FILE *f = fopen("/proc/kallsyms", "r");
    char line[512], name[256], type;
    unsigned long long addr = 0, found = 0;
    while (f && fgets(line, sizeof(line), f)) {
        if (sscanf(line, "%llx %c %255s", &addr, &type, name) == 3 &&
            !strcmp(name, "do_syscall_64")) {
            found = addr;
            break;
        }
    }
    if (f)
        fclose(f);
    LC_CHECK(found != 0);
    agt_kallsyms_t ks;
    LC_ASSERT_OK(agt_kallsyms_load("/proc/kallsyms", &ks));
    LC_ASSERT_STR_EQ(agt_kallsyms_lookup(&ks, found + 1), "do_syscall_64");
    agt_kallsyms_fini(&ks);
}

static void test_perfmap_parse_and_lookup(void)
{
    agt_perfmap_t pm;
    agt_perfmap_init(&pm);
    const char *text = "7f0000001000 100 jit_a\n"
                       "0x7f0000002000 0x80 LazyCompile:*run /app/x.js:10 with spaces\n"
                       "not a line\n"
                       "7f0000001000 100 jit_a_recompiled\n"
                       "7f0000003000 zz bad_size\n";
    LC_ASSERT_OK(agt_perfmap_parse(&pm, text, strlen(text)));
    LC_ASSERT_EQ(pm.n, 2);
    LC_ASSERT_STR_EQ(agt_perfmap_lookup(&pm, 0x7f0000001010ULL), "jit_a_recompiled");
    LC_ASSERT_STR_EQ(agt_perfmap_lookup(&pm, 0x7f000000207fULL),
                     "LazyCompile:*run /app/x.js:10 with spaces");
    LC_CHECK(agt_perfmap_lookup(&pm, 0x7f0000001100ULL) == NULL);
    LC_CHECK(agt_perfmap_lookup(&pm, 0x7f0000002080ULL) == NULL);
    LC_CHECK(agt_perfmap_lookup(&pm, 0x1000) == NULL);
    agt_perfmap_fini(&pm);
}

/* A runtime appends as it compiles: a grown file is read again. */
static void test_perfmap_refresh_follows_appends(void)
{
    char path[] = "/tmp/perf-agt-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    write_file(path, "1000 10 first\n");
    agt_perfmap_t pm;
    agt_perfmap_init(&pm);
    LC_ASSERT_OK(agt_perfmap_refresh(&pm, path));
    LC_ASSERT_STR_EQ(agt_perfmap_lookup(&pm, 0x1001), "first");
    LC_CHECK(agt_perfmap_lookup(&pm, 0x2001) == NULL);
    FILE *f = fopen(path, "a");
    fputs("2000 10 second\n", f);
    fclose(f);
    LC_ASSERT_OK(agt_perfmap_refresh(&pm, path));
    LC_ASSERT_STR_EQ(agt_perfmap_lookup(&pm, 0x2001), "second");
    LC_ASSERT_STR_EQ(agt_perfmap_lookup(&pm, 0x1001), "first");
    LC_ASSERT_EQ(agt_perfmap_refresh(&pm, "/nonexistent/perf-1.map"), -ENOENT);
    agt_perfmap_fini(&pm);
    unlink(path);
}

LC_TEST_MAIN(test_elf_symtab_of_this_binary, test_elf_sizeless_symbol_ends_with_its_section,
             test_elf_dynsym_of_libc, test_vdso_has_clock_functions,
             test_elfcache_hits_by_file_and_build_id, test_kallsyms_text_symbols_in_order,
             test_kallsyms_of_the_running_kernel, test_perfmap_parse_and_lookup,
             test_perfmap_refresh_follows_appends)
