/*
 * test_debuginfo_bucket.c — uploaded debug files in a real filesystem object
 * store (debuginfo_bucket.h), read by a second "ingester" through its own
 * copies: the object's key and bytes, tenants kept apart by the key escape,
 * the per-tenant bound over the bucket's objects, a delete reaching the
 * other copies at their next check, and the remembered answers past their
 * table's size. The ELF file is this test's own executable.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "debuginfo_bucket.h"
#include "lc/alloc.h"
#include "lc_test.h"

typedef struct node_s {
    char cache_dir[256];
    lc_debuginfo_t *cache;
    ing_dbucket_t *bucket;
} node_t;

static char fs_dir[256];
static uint8_t *elf;
static size_t elf_len;

static void read_self(void)
{
    FILE *f = fopen("/proc/self/exe", "rb");
    LC_CHECK(f != NULL);
    fseek(f, 0, SEEK_END);
    elf_len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    elf = lc_xmalloc(elf_len);
    LC_CHECK(fread(elf, 1, elf_len, f) == elf_len);
    fclose(f);
}

static void node_open(node_t *n, uint64_t max_tenant_bytes, uint64_t recheck_ns)
{
    snprintf(n->cache_dir, sizeof(n->cache_dir), "/tmp/ember-dbucket-copies-XXXXXX");
    LC_CHECK(mkdtemp(n->cache_dir) != NULL);
    lc_debuginfo_limits_t lim = {.max_file_bytes = 1ULL << 30,
                                 .max_tenant_bytes = 1ULL << 32,
                                 .max_inflated_bytes = 1ULL << 30};
    LC_ASSERT_OK(lc_debuginfo_open(n->cache_dir, &lim, &n->cache));
    lc_objstore_opts_t os = {.backend = LC_OBJSTORE_FILESYSTEM, .fs_dir = fs_dir};
    ing_dbucket_opts_t o = {.store = &os,
                            .cache = n->cache,
                            .max_tenant_bytes = max_tenant_bytes,
                            .recheck_ns = recheck_ns};
    LC_ASSERT_OK(ing_dbucket_open(&o, &n->bucket));
}

static void node_close(node_t *n)
{
    ing_dbucket_close(n->bucket);
    lc_debuginfo_close(n->cache);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", n->cache_dir);
    LC_CHECK(system(cmd) == 0);
}

static bool object_exists(const char *rel)
{
    char p[512];
    struct stat sb;
    snprintf(p, sizeof(p), "%s/%s", fs_dir, rel);
    return stat(p, &sb) == 0;
}

static int count_one(const lc_debuginfo_entry_t *e, void *data)
{
    LC_ASSERT_EQ(e->size, elf_len);
    (*(size_t *)data)++;
    return 0;
}

/* A put on one node is found by the other, through its own copy; tenants
 * whose ids escape alike in a naive scheme stay apart. */
static void test_put_found_elsewhere(void)
{
    node_t a, b;
    node_open(&a, 1ULL << 32, 3600ULL * 1000000000ULL);
    node_open(&b, 1ULL << 32, 3600ULL * 1000000000ULL);
    lc_status_t st = {0};
    LC_ASSERT_OK(lc_debuginfo_put_file_hash(a.cache, "a/b", "ab12", elf, elf_len, &st));
    LC_ASSERT_OK(ing_dbucket_put(a.bucket, "a/b", "ab12", elf, elf_len, &st));
    LC_CHECK(object_exists("debuginfo/a_2fb/ab12.debug"));
    uint64_t size = 0;
    LC_ASSERT_OK(ing_dbucket_has(b.bucket, "a/b", "ab12", &size));
    LC_ASSERT_EQ(size, elf_len);
    LC_ASSERT_EQ(ing_dbucket_has(b.bucket, "a_2fb", "ab12", &size), LC_ENOTFOUND);
    LC_ASSERT_EQ(ing_dbucket_has(b.bucket, "a_b", "ab12", &size), LC_ENOTFOUND);
    char path[LC_DEBUGINFO_PATH_MAX];
    LC_CHECK(ing_dbucket_find(b.bucket, "a/b", "ab12", path));
    LC_CHECK(strncmp(path, b.cache_dir, strlen(b.cache_dir)) == 0);
    LC_CHECK(!ing_dbucket_find(b.bucket, "a_2fb", "ab12", path));
    LC_CHECK(!ing_dbucket_find(b.bucket, "a/b", "cd34", path));
    size_t listed = 0;
    LC_ASSERT_OK(ing_dbucket_list(b.bucket, "a/b", count_one, &listed));
    LC_ASSERT_EQ(listed, 1);
    LC_ASSERT_OK(ing_dbucket_delete(a.bucket, "a/b", "ab12"));
    LC_CHECK(!object_exists("debuginfo/a_2fb/ab12.debug"));
    node_close(&a);
    node_close(&b);
}

/* A delete through one node reaches the other's copy at its next check
 * (recheck 0: every find asks the bucket). */
static void test_delete_reaches_copies(void)
{
    node_t a, b;
    node_open(&a, 1ULL << 32, 0);
    node_open(&b, 1ULL << 32, 0);
    lc_status_t st = {0};
    LC_ASSERT_OK(ing_dbucket_put(a.bucket, "t", "ab12", elf, elf_len, &st));
    char path[LC_DEBUGINFO_PATH_MAX];
    LC_CHECK(ing_dbucket_find(b.bucket, "t", "ab12", path));
    LC_CHECK(lc_debuginfo_has(b.cache, "t", "ab12", NULL));
    LC_ASSERT_OK(ing_dbucket_delete(a.bucket, "t", "ab12"));
    LC_CHECK(!ing_dbucket_find(b.bucket, "t", "ab12", path));
    LC_CHECK(!lc_debuginfo_has(b.cache, "t", "ab12", NULL));
    node_close(&a);
    node_close(&b);
}

/* The bound counts the tenant's objects whoever stored them; replacing a
 * file does not count it twice. */
static void test_tenant_bound(void)
{
    node_t a, b;
    node_open(&a, elf_len * 3 / 2, 0);
    node_open(&b, elf_len * 3 / 2, 0);
    lc_status_t st = {0};
    LC_ASSERT_OK(ing_dbucket_put(a.bucket, "t", "0001", elf, elf_len, &st));
    st = (lc_status_t){0};
    LC_CHECK(ing_dbucket_put(b.bucket, "t", "0002", elf, elf_len, &st) != 0);
    LC_ASSERT_EQ(st.code, LC_CODE_RESOURCE_EXHAUSTED);
    LC_CHECK(!object_exists("debuginfo/t/0002.debug"));
    LC_ASSERT_OK(ing_dbucket_put(b.bucket, "other", "0002", elf, elf_len, &st));
    LC_ASSERT_OK(ing_dbucket_put(b.bucket, "t", "0001", elf, elf_len, &st));
    LC_ASSERT_OK(ing_dbucket_delete(a.bucket, "t", "0001"));
    LC_ASSERT_OK(ing_dbucket_delete(a.bucket, "other", "0002"));
    node_close(&a);
    node_close(&b);
}

/* More (tenant, build id) answers than the table holds: entries are reused
 * and an early one is asked again and still found. */
static void test_answers_reused(void)
{
    node_t a;
    node_open(&a, 1ULL << 32, 3600ULL * 1000000000ULL);
    lc_status_t st = {0};
    LC_ASSERT_OK(ing_dbucket_put(a.bucket, "t", "ab12", elf, elf_len, &st));
    char path[LC_DEBUGINFO_PATH_MAX], id[16];
    LC_CHECK(ing_dbucket_find(a.bucket, "t", "ab12", path));
    for (int i = 0; i < 5000; i++) {
        snprintf(id, sizeof(id), "%08x", (unsigned)i);
        LC_CHECK(!ing_dbucket_find(a.bucket, "t", id, path));
    }
    LC_CHECK(ing_dbucket_find(a.bucket, "t", "ab12", path));
    LC_ASSERT_OK(ing_dbucket_delete(a.bucket, "t", "ab12"));
    node_close(&a);
}

/* A tenant id too long for a key is refused, not truncated. */
static void test_long_tenant_refused(void)
{
    node_t a;
    node_open(&a, 1ULL << 32, 0);
    char tenant[200];
    memset(tenant, '/', sizeof(tenant) - 1);
    tenant[sizeof(tenant) - 1] = '\0';
    lc_status_t st = {0};
    LC_CHECK(ing_dbucket_put(a.bucket, tenant, "ab12", elf, elf_len, &st) != 0);
    LC_ASSERT_EQ(st.code, LC_CODE_INVALID_ARGUMENT);
    node_close(&a);
}

static void setup(void)
{
    snprintf(fs_dir, sizeof(fs_dir), "/tmp/ember-dbucket-fs-XXXXXX");
    LC_CHECK(mkdtemp(fs_dir) != NULL);
    read_self();
}

static void teardown(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", fs_dir);
    LC_CHECK(system(cmd) == 0);
    lc_free(elf);
}

static void test_all(void)
{
    setup();
    test_put_found_elsewhere();
    test_delete_reaches_copies();
    test_tenant_bound();
    test_answers_reused();
    test_long_tenant_refused();
    teardown();
}

LC_TEST_MAIN(test_all)
