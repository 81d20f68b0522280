/*
 * test_agt_python.c — the CPython pieces that need no live target: the
 * location table reader and the interpreter's landmarks in its ELF file.
 *
 * Oracles: a location table and the line of each of its code units as
 * CPython 3.11 itself reports them (code.co_linetable and co_positions() of
 * a function with branches, a multi-line expression and a try block, dumped
 * by /usr/bin/python3.11), the same for 3.10's older table (co_linetable
 * and co_lines() of a like function under pyenv's 3.10.13), and `nm -D` on
 * Debian's python3.11.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agt_test_util.h"

/* sample.__code__.co_linetable (co_firstlineno 1) */
static const uint8_t LINETABLE[] = {
    0x80, 0x00, 0xd8, 0x0c, 0x0d, 0x80, 0x45, 0xdd, 0x0d, 0x12, 0x90, 0x31, 0x89, 0x58, 0x8c, 0x58,
    0xf0, 0x00, 0x05, 0x05, 0x17, 0xf0, 0x00, 0x05, 0x05, 0x17, 0x88, 0x01, 0xd8, 0x0b, 0x0c, 0x88,
    0x71, 0x89, 0x35, 0x90, 0x41, 0x8a, 0x3a, 0x88, 0x3a, 0xd8, 0x0c, 0x11, 0x90, 0x51, 0x89, 0x4a,
    0x88, 0x45, 0x88, 0x45, 0xf0, 0x06, 0x00, 0x0d, 0x12, 0x90, 0x51, 0x89, 0x4a, 0x88, 0x45, 0x88,
    0x45, 0xf0, 0x02, 0x04, 0x05, 0x11, 0xf0, 0x02, 0x01, 0x0d, 0x20, 0xf0, 0x00, 0x01, 0x0d, 0x20,
    0xdd, 0x16, 0x1b, 0x98, 0x41, 0x91, 0x68, 0x94, 0x68, 0xf0, 0x03, 0x01, 0x0d, 0x20, 0xf1, 0x00,
    0x01, 0x0d, 0x20, 0xf4, 0x00, 0x01, 0x0d, 0x20, 0x88, 0x01, 0x88, 0x01, 0xf8, 0xe5, 0x0b, 0x15,
    0xf0, 0x00, 0x01, 0x05, 0x11, 0xf0, 0x00, 0x01, 0x05, 0x11, 0xf0, 0x00, 0x01, 0x05, 0x11, 0xd8,
    0x0c, 0x10, 0x88, 0x01, 0x88, 0x01, 0x88, 0x01, 0xf0, 0x03, 0x01, 0x05, 0x11, 0xf8, 0xf8, 0xf8,
    0xe0, 0x0b, 0x10, 0x90, 0x21, 0x88, 0x38, 0x80, 0x4f};

/* [line for unit in co_positions()]; -1 where CPython has no location */
static const int LINES[] = {1,  2,  2,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,  3,
                            3,  3,  4,  4,  4,  4,  4,  4,  4,  4,  4,  5,  5,  5,  5,  5,  5,  8,
                            8,  8,  8,  8,  8,  9,  10, 10, 11, 11, 11, 11, 11, 11, 11, 11, 11, 11,
                            11, 11, 11, 11, 10, 10, 10, 10, 10, 10, 10, 10, 10, 10, -1, 12, 12, 12,
                            12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 12, -1, -1, -1, 14, 14, 14, 14};

typedef int64_t (*line_reader_t)(const uint8_t *, size_t, int64_t, uint32_t);

/* Every unit's line from `read` against CPython's (-1: no location, any
 * line of the function will do). */
static void check_lines(line_reader_t read, const uint8_t *table, size_t len, const int *want,
                        size_t n)
{
    for (uint32_t unit = 0; unit < n; unit++) {
        if (want[unit] < 0)
            continue;
        int64_t line = read(table, len, 1, unit);
        if (line != want[unit])
            fprintf(stderr, "unit %u: line %lld, CPython says %d\n", unit, (long long)line,
                    want[unit]);
        LC_CHECK(line == want[unit]);
    }
    /* past the table: the first line, never a made-up one */
    LC_CHECK(read(table, len, 1, 5000) == 1);
}

static void test_line_table_matches_cpython(void)
{
    check_lines(agt_python_line, LINETABLE, sizeof(LINETABLE), LINES, LC_ARRAY_LEN(LINES));
}

/* sample.__code__.co_linetable under 3.10 (co_firstlineno 1): a loop, a
 * branch, a two-line expression, a try block */
static const uint8_t LINETABLE_310[] = {0x04, 0x01, 0x08, 0x01, 0x0c, 0x01, 0x04, 0x01,
                                        0x02, 0x01, 0x08, 0xff, 0x02, 0x03, 0x0c, 0x01,
                                        0x0c, 0x01, 0x04, 0x01, 0x02, 0xff, 0x04, 0x02};

/* the line of each code unit as co_lines() ranges say */
static const int LINES_310[] = {2, 2, 3, 3, 3, 3, 4, 4,  4,  4,  4,  4,  5,  5,  6,  5,  5,  5, 5,
                                8, 9, 9, 9, 9, 9, 9, 10, 10, 10, 10, 10, 10, 11, 11, 10, 12, 12};

static void test_line_table_310_matches_cpython(void)
{
    check_lines(agt_python_line_310, LINETABLE_310, sizeof(LINETABLE_310), LINES_310,
                LC_ARRAY_LEN(LINES_310));
    LC_CHECK(agt_python_line_310(LINETABLE_310, 3, 7, 40) == 7); /* odd length: last byte unused */
    LC_CHECK(agt_python_line_310(NULL, 0, 7, 0) == 7);
}

static void test_line_table_bad_input_stays_in_bounds(void)
{
    /* truncated mid-entry, a byte that starts no entry, an empty table */
    LC_CHECK(agt_python_line(LINETABLE, 3, 7, 40) == 7);
    static const uint8_t junk[] = {0x01, 0x02};
    LC_CHECK(agt_python_line(junk, sizeof(junk), 7, 0) == 7);
    LC_CHECK(agt_python_line(NULL, 0, 7, 0) == 7);
    static const uint8_t endless[] = {0xf0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
    LC_CHECK(agt_python_line(endless, sizeof(endless), 7, 0) == 7);
}

static void check_name(const char *root, const char *file, const char *qualname, const char *want)
{
    char *module = agt_python_module(root, file);
    char *got = agt_python_qualified_name(module, qualname);
    if (strcmp(got, want) != 0)
        fprintf(stderr, "%s%s %s: %s, want %s\n", root, file, qualname, got, want);
    LC_CHECK(strcmp(got, want) == 0);
    lc_free(got);
    lc_free(module);
}

/* Oracle: the __name__ CPython gives each file's module (json/__init__.py
 * is "json", a frozen module's is what its pseudo file name says). */
static void test_qualified_names(void)
{
    check_name("", "/srv/app/py_split.py", "Outer.Inner.crunch", "py_split.Outer.Inner.crunch");
    check_name("", "/usr/lib/python3.11/json/__init__.py", "loads", "json.loads");
    check_name("", "<frozen importlib._bootstrap>", "_find_and_load",
               "importlib._bootstrap._find_and_load");
    check_name("", "<string>", "<module>", "<module>"); /* exec'd text: no module to tell */
    check_name("", "", "f", "f");
    check_name("", "/__init__.py", "f", "f");             /* a package without a name */
    check_name("", "/usr/bin/tool", "main", "tool.main"); /* a script without .py */
}

/* Creates root/rel (directories on the way), empty. */
static void touch(const char *root, const char *rel)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *slash = strchr(path + strlen(root) + 1, '/'); slash;
         slash = strchr(slash + 1, '/')) {
        *slash = '\0';
        (void)mkdir(path, 0700);
        *slash = '/';
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    LC_CHECK(fd >= 0);
    close(fd);
}

static void remove_tree(const char *root)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    LC_CHECK(system(cmd) == 0);
}

/* Oracle: the __name__ CPython's import system gives a module found through
 * a sys.path entry of `root` (tests/integration/test_agent_python.py has the
 * live interpreters name a package's module the same way). */
static void test_module_names_from_packages(void)
{
    char root[] = "/tmp/ember-pymod-XXXXXX";
    LC_CHECK(mkdtemp(root) != NULL);
    touch(root, "pkg/__init__.py");
    touch(root, "pkg/sub/__init__.py");
    touch(root, "pkg/sub/mod.py");
    touch(root, "plain/mod.py"); /* no __init__.py: a directory on sys.path, not a package */
    touch(root, "top.py");
    check_name(root, "/pkg/sub/mod.py", "hot", "pkg.sub.mod.hot");
    check_name(root, "/pkg/sub/__init__.py", "f", "pkg.sub.f");
    check_name(root, "/pkg/__init__.py", "f", "pkg.f");
    check_name(root, "/plain/mod.py", "f", "mod.f");
    check_name(root, "/top.py", "f", "top.f");
    check_name(root, "pkg/sub/mod.py", "hot", "pkg.sub.mod.hot"); /* root as a working directory */
    check_name(root, "/gone/x.py", "f", "x.f");                   /* nothing to look at: the name */
    /* the root is the process' "/": a package above it is not the process' */
    char below[sizeof(root) + 8];
    snprintf(below, sizeof(below), "%s/pkg", root);
    check_name(below, "/sub/mod.py", "hot", "sub.mod.hot");
    remove_tree(root);
}

/* Packages nested deeper than the limit: the innermost 32 named, no more. */
static void test_module_name_depth_is_bounded(void)
{
    char root[] = "/tmp/ember-pymod-XXXXXX";
    LC_CHECK(mkdtemp(root) != NULL);
    char rel[256] = "";
    size_t len = 0;
    for (int i = 0; i < 40; i++) {
        char init[300];
        snprintf(init, sizeof(init), "%sp/__init__.py", rel);
        touch(root, init);
        len += (size_t)snprintf(rel + len, sizeof(rel) - len, "p/");
    }
    snprintf(rel + len, sizeof(rel) - len, "m.py");
    touch(root, rel);
    char *module = agt_python_module(root, rel);
    size_t dots = 0;
    for (const char *c = module; *c; c++)
        dots += *c == '.';
    LC_CHECK(dots == 31);
    lc_free(module);
    remove_tree(root);
}

/* The value of `name` in `nm -D` output for path, or 0. */
static uint64_t nm_value(const char *path, const char *name)
{
    char cmd[512], line[512];
    snprintf(cmd, sizeof(cmd), "nm -D --defined-only %s", path);
    FILE *f = popen(cmd, "r");
    uint64_t found = 0;
    while (f && fgets(line, sizeof(line), f)) {
        unsigned long long v;
        char type, sym[256];
        if (sscanf(line, "%llx %c %255s", &v, &type, sym) == 3 && strcmp(sym, name) == 0)
            found = v;
    }
    if (f)
        pclose(f);
    return found;
}

static void test_interpreter_landmarks_in_its_elf(void)
{
    const char *path = "/usr/bin/python3.11";
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "skipped: %s not installed\n", path);
        return;
    }
    agt_elf_t e = {0};
    LC_ASSERT_OK(agt_elf_load(fd, NULL, 0, &e));
    close(fd);
    LC_CHECK(e.py.runtime != 0 && e.py.runtime == nm_value(path, "_PyRuntime"));
    LC_CHECK(e.py.version == nm_value(path, "Py_Version"));
    LC_CHECK(e.py.code_type == nm_value(path, "PyCode_Type"));
    LC_CHECK(e.py.eval == nm_value(path, "_PyEval_EvalFrameDefault"));
    LC_CHECK(e.py.eval_size > 0);
    agt_elf_fini(&e);
}

static void test_other_objects_are_no_interpreter(void)
{
    int fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    LC_CHECK(fd >= 0);
    agt_elf_t e = {0};
    LC_ASSERT_OK(agt_elf_load(fd, NULL, 0, &e));
    close(fd);
    LC_CHECK(e.py.runtime == 0 && e.py.eval == 0);
    agt_elf_fini(&e);
}

LC_TEST_MAIN(test_line_table_matches_cpython, test_line_table_310_matches_cpython,
             test_line_table_bad_input_stays_in_bounds, test_qualified_names,
             test_module_names_from_packages, test_module_name_depth_is_bounded,
             test_interpreter_landmarks_in_its_elf, test_other_objects_are_no_interpreter)
