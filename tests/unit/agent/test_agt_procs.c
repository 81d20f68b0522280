/*
 * test_agt_procs.c — the process table and what feeds its labels:
 * /proc/PID/maps parsing, a snapshot of this very process, cgroup ->
 * container id -> service name, eviction, and the u64 map underneath.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "agt_test_util.h"

static void test_maps_keep_executable_mappings(void)
{
    const char *text =
        "55d0c0000000-55d0c0001000 r--p 00000000 fd:01 1234   /usr/bin/prog\n"
        "55d0c0001000-55d0c0005000 r-xp 00001000 fd:01 1234   /usr/bin/prog\n"
        "7f0000000000-7f0000010000 r-xp 00002000 08:02 99     /opt/my lib/libx.so (deleted)\n"
        "7f0000010000-7f0000011000 rwxp 00000000 00:00 0 \n"
        "7f0000020000-7f0000021000 r-xp 00000000 00:00 0      [anon:jit]\n"
        "7ffd00000000-7ffd00002000 r-xp 00000000 00:00 0      [vdso]\n"
        "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  [vsyscall]\n"
        "garbage\n";
    agt_proc_t p = {0};
    LC_ASSERT_OK(agt_proc_parse_maps(&p, text, strlen(text)));
    LC_ASSERT_EQ(p.n_maps, 5);
    LC_ASSERT_STR_EQ(p.maps[0].path, "/usr/bin/prog");
    LC_ASSERT_EQ(p.maps[0].offset, 0x1000);
    LC_ASSERT_EQ(p.maps[0].inode, 1234);
    LC_ASSERT_EQ(p.maps[0].kind, AGT_MAP_FILE);
    LC_ASSERT_STR_EQ(p.maps[1].path, "/opt/my lib/libx.so");
    LC_ASSERT_EQ(p.maps[2].kind, AGT_MAP_ANON);
    LC_ASSERT_STR_EQ(p.maps[2].path, "");
    LC_ASSERT_EQ(p.maps[3].kind, AGT_MAP_ANON);
    LC_ASSERT_STR_EQ(p.maps[3].path, "[anon:jit]");
    LC_ASSERT_EQ(p.maps[4].kind, AGT_MAP_VDSO);
    LC_CHECK(agt_proc_find_map(&p, 0x55d0c0001000ULL) == &p.maps[0]);
    LC_CHECK(agt_proc_find_map(&p, 0x55d0c0004fffULL) == &p.maps[0]);
    LC_CHECK(agt_proc_find_map(&p, 0x55d0c0005000ULL) == NULL);
    LC_CHECK(agt_proc_find_map(&p, 0x55d0c0000800ULL) == NULL); /* not executable */
    LC_CHECK(agt_proc_find_map(&p, 0x7ffd00000010ULL) == &p.maps[4]);
    lc_free(p.maps);
    lc_free(p.map_paths);
}

static void test_snapshot_of_this_process(void)
{
    agt_elfcache_t *elfs = agt_elfcache_new(8);
    agt_procs_t t;
    agt_procs_init(&t, "/proc", elfs);
    agt_proc_t *p = agt_procs_upsert(&t, (uint32_t)getpid(), 77, 0);
    LC_CHECK(p->needs_snapshot);
    LC_ASSERT_OK(agt_proc_snapshot(&t, p));
    LC_CHECK(!p->needs_snapshot && p->snapshot_ok);
    LC_ASSERT_STR_EQ(p->comm, "test_agt_procs");
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    LC_ASSERT_STR_EQ(p->exe, exe);
    LC_CHECK(p->cgroup[0] != '\0');
    LC_ASSERT_EQ(p->nspid, getpid());
    const agt_map_t *m = agt_proc_find_map(p, (uint64_t)(uintptr_t)&test_snapshot_of_this_process);
    LC_CHECK(m && m->elf && m->elf->n_syms > 0);
    LC_CHECK(agt_procs_get(&t, (uint32_t)getpid()) == p);
    LC_CHECK(agt_procs_upsert(&t, (uint32_t)getpid(), 77, 1) == p);
    agt_proc_t *recycled = agt_procs_upsert(&t, (uint32_t)getpid(), 78, 1);
    LC_CHECK(recycled->needs_snapshot && recycled->comm[0] == '\0');
    LC_ASSERT_EQ(agt_procs_count(&t), 1);
    agt_procs_fini(&t);
    LC_ASSERT_EQ(agt_elfcache_size(elfs), agt_elfcache_size(elfs)); /* freed cleanly (ASan) */
    agt_elfcache_free(elfs);
}

/* A process that is gone is dropped after a few idle rounds; a live one
 * stays longer, then goes too. */
static void test_eviction(void)
{
    agt_elfcache_t *elfs = agt_elfcache_new(8);
    agt_procs_t t;
    agt_procs_init(&t, "/proc", elfs);
    agt_procs_upsert(&t, 0x3ffffff0u, 1, 0); /* beyond pid_max: never alive */
    agt_procs_upsert(&t, (uint32_t)getpid(), 1, 0);
    LC_CHECK(agt_proc_snapshot(&t, agt_procs_get(&t, 0x3ffffff0u)) < 0);
    agt_procs_evict(&t, 2, 2);
    LC_ASSERT_EQ(agt_procs_count(&t), 2);
    agt_procs_evict(&t, 3, 2);
    LC_CHECK(agt_procs_get(&t, 0x3ffffff0u) == NULL);
    LC_CHECK(agt_procs_get(&t, (uint32_t)getpid()) != NULL);
    agt_procs_evict(&t, 9, 2);
    LC_ASSERT_EQ(agt_procs_count(&t), 0);
    agt_procs_fini(&t);
    agt_elfcache_free(elfs);
}

static void test_cgroup_pick(void)
{
    char out[256];
    const char *v2 = "0::/system.slice/nginx.service\n";
    agt_cgroup_pick(v2, strlen(v2), out, sizeof(out));
    LC_ASSERT_STR_EQ(out, "/system.slice/nginx.service");
    const char *hybrid = "9:name=systemd:/\n4:memory:/process_api/060f9edf\n1:cpu:/\n0::/\n";
    agt_cgroup_pick(hybrid, strlen(hybrid), out, sizeof(out));
    LC_ASSERT_STR_EQ(out, "/process_api/060f9edf");
    const char *v1 = "12:pids:/docker/abc\n11:memory:/docker/abcdef\n";
    agt_cgroup_pick(v1, strlen(v1), out, sizeof(out));
    LC_ASSERT_STR_EQ(out, "/docker/abcdef");
    const char *root = "0::/\n";
    agt_cgroup_pick(root, strlen(root), out, sizeof(out));
    LC_ASSERT_STR_EQ(out, "");
}

#define ID "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_container_ids(void)
{
    static const struct {
        const char *cgroup, *id;
    } cases[] = {
        {"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2.slice/"
         "cri-containerd-" ID ".scope",
         ID},
        {"/kubepods/burstable/pod1234/" ID, ID},
        {"/kubepods/pod1234/" ID, ID},
        {"/system.slice/docker-" ID ".scope", ID},
        {"/docker/" ID, ID},
        {"/machine.slice/libpod-" ID ".scope/container", ID},
        {"/kubepods.slice/crio-" ID ".scope", ID},
        {"/user.slice/user-0.slice/session-1.scope", ""},
        {"/system.slice/x" ID ".scope", ""}, /* no runtime-prefix separator */
        {"/docker/"
         "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
         ""},
        {"", ""},
    };
    for (size_t i = 0; i < LC_ARRAY_LEN(cases); i++) {
        char id[65];
        agt_container_id(cases[i].cgroup, id);
        LC_ASSERT_STR_EQ(id, cases[i].id);
    }
}

static void test_service_name_priority(void)
{
    char out[128];
    agt_service_name("shop", "cart", ID, "/kubepods/x", "/app/cart", "cart", out, sizeof(out));
    LC_ASSERT_STR_EQ(out, "shop/cart");
    agt_service_name(NULL, NULL, ID, "/docker/" ID, "/app/cart", "cart", out, sizeof(out));
    LC_ASSERT_STR_EQ(out, "0123456789ab");
    agt_service_name(NULL, NULL, "", "/system.slice/nginx.service", "/usr/sbin/nginx", "nginx", out,
                     sizeof(out));
    LC_ASSERT_STR_EQ(out, "nginx");
    agt_service_name(NULL, NULL, "", "/user.slice/session-1.scope", "/usr/bin/python3.11", "py",
                     out, sizeof(out));
    LC_ASSERT_STR_EQ(out, "python3.11");
    agt_service_name(NULL, NULL, "", "", "", "kworker", out, sizeof(out));
    LC_ASSERT_STR_EQ(out, "kworker");
    agt_service_name(NULL, NULL, "", "", "", "", out, sizeof(out));
    LC_ASSERT_STR_EQ(out, "unknown");
}

/* Random puts and deletes against a plain array as the reference. */
static void test_u64map_matches_reference(void)
{
    enum { KEYS = 3000 };
    static uint64_t ref[KEYS];
    static bool present[KEYS];
    agt_u64map_t m;
    agt_u64map_init(&m);
    uint64_t x = 88172645463325252ULL;
    size_t live = 0;
    for (int step = 0; step < 200000; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t k = (size_t)(x % KEYS);
        uint64_t key = (k + 1) * 0x9e3779b97f4a7c15ULL | 1; /* spread, never 0 */
        if (x & 0x10000) {
            bool added;
            *agt_u64map_put(&m, key, &added) = x;
            LC_CHECK(added == !present[k]);
            live += added;
            present[k] = true;
            ref[k] = x;
        } else {
            bool had = agt_u64map_del(&m, key);
            LC_CHECK(had == present[k]);
            live -= had;
            present[k] = false;
        }
    }
    LC_ASSERT_EQ(m.n, live);
    size_t bad = 0;
    for (size_t k = 0; k < KEYS; k++) {
        uint64_t *v = agt_u64map_get(&m, (k + 1) * 0x9e3779b97f4a7c15ULL | 1);
        bad += present[k] ? !v || *v != ref[k] : v != NULL;
    }
    LC_ASSERT_EQ(bad, 0);
    LC_CHECK(agt_u64map_get(&m, 0) == NULL);
    agt_u64map_clear(&m);
    LC_ASSERT_EQ(m.n, 0);
    agt_u64map_fini(&m);
}

LC_TEST_MAIN(test_maps_keep_executable_mappings, test_snapshot_of_this_process, test_eviction,
             test_cgroup_pick, test_container_ids, test_service_name_priority,
             test_u64map_matches_reference)
