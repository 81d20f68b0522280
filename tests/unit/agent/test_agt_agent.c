/*
 * test_agt_agent.c — the whole agent on a libuv loop, publishing into a
 * capturing transport: two forked children burn CPU under different names,
 * a filter keeps one, and closing with flush delivers the partial interval.
 *
 * Oracles: the children's pids and names (set here), the filter's meaning,
 * and the libuv rule that a closed loop has no handles left.
 */
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agt_test_util.h"

typedef struct capture_s {
    lc_transport_t base;
    agt_msg_t *msgs;
    size_t n, cap;
} capture_t;

/* Calls back synchronously, which the transport contract allows. */
static int capture_publish(lc_transport_t *t, const uint8_t *msg, size_t len, uint32_t partition,
                           const uint8_t *id, size_t id_len, lc_transport_publish_cb cb, void *data)
{
    capture_t *c = (capture_t *)t;
    LC_UNUSED(id);
    LC_UNUSED(id_len);
    c->msgs = lc_xgrow(c->msgs, &c->cap, c->n + 1, sizeof(*c->msgs));
    c->msgs[c->n].data = lc_xmalloc(len);
    memcpy(c->msgs[c->n].data, msg, len);
    c->msgs[c->n].len = len;
    c->msgs[c->n].partition = partition;
    c->n++;
    cb(0, data);
    return 0;
}

static void capture_stats(lc_transport_t *t, lc_transport_stats_t *out)
{
    LC_UNUSED(t);
    memset(out, 0, sizeof(*out));
}

static void capture_close(lc_transport_t *t, void (*cb)(void *data), void *data)
{
    LC_UNUSED(t);
    if (cb)
        cb(data);
}

static const lc_transport_ops_t capture_ops = {capture_publish, capture_stats, capture_close};

#define RATE_HZ 499

/* A child that burns `cpu_s` of CPU time, or stops at `wall_s` if a loaded
 * machine does not give it that much: it must be gone before the agent's
 * final drain, and its sample count is judged against what it really ran. */
static pid_t spawn_burner(const char *name, double cpu_s, double wall_s)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_NAME, name, 0, 0, 0);
        double end = agt_test_now_ms() + wall_s * 1e3;
        double cpu_end = agt_test_thread_cpu_ms() + cpu_s * 1e3;
        volatile uint64_t x = 0;
        while (agt_test_now_ms() < end && agt_test_thread_cpu_ms() < cpu_end)
            for (int i = 0; i < 100000; i++)
                x += (uint64_t)i;
        _exit(0);
    }
    return pid;
}

static bool closed;

static void on_closed(void *data)
{
    LC_UNUSED(data);
    closed = true;
}

/* What the stop timer waits for: at least two full intervals and a partial
 * one, and both children gone (a loaded machine may take many intervals to
 * give them their CPU time; the flush at close delivers what is left). */
typedef struct stop_s {
    agt_t *agent;
    pid_t children[2];
    double not_before_ms;
} stop_t;

static bool exited(pid_t pid)
{
    siginfo_t info = {0};
    return waitid(P_PID, (id_t)pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

static void on_stop_timer(uv_timer_t *t)
{
    stop_t *st = t->data;
    if (agt_test_now_ms() < st->not_before_ms || !exited(st->children[0]) ||
        !exited(st->children[1]))
        return;
    agt_close(st->agent, true, on_closed, NULL);
    uv_close((uv_handle_t *)t, NULL);
}

static void test_filter_and_flush(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    lc_metrics_t *metrics = lc_metrics_new();
    capture_t cap = {.base = {.ops = &capture_ops}};
    agt_opts_t o;
    agt_opts_default(&o);
    o.sample_rate_hz = RATE_HZ;
    o.interval_ns = 1000000000LL;
    o.filter = "{comm=~\"agt_keep.*\"}";
    o.node = "unit";
    o.kubernetes_api = "off";
    agt_t *a = NULL;
    LC_ASSERT_OK(agt_new(&loop, &o, &cap.base, metrics, &a));
    if (!a)
        return;
    LC_CHECK(agt_ready(a));
    /* 0.8 s of CPU each, however long a busy machine takes to give it (at
     * most a minute): the kept one's count needs that much to have power */
    pid_t keep = spawn_burner("agt_keep_me", 0.8, 60), drop = spawn_burner("agt_drop_me", 0.8, 60);
    stop_t st = {.agent = a, .children = {keep, drop}, .not_before_ms = agt_test_now_ms() + 2500};
    uv_timer_t stop;
    uv_timer_init(&loop, &stop);
    stop.data = &st;
    uv_timer_start(&stop, on_stop_timer, 100, 100);
    uv_run(&loop, UV_RUN_DEFAULT);
    LC_CHECK(closed);
    struct rusage ru;
    wait4(keep, NULL, 0, &ru); /* what the kernel says the kept child ran */
    double keep_cpu_s = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec +
                        ru.ru_stime.tv_usec / 1e6;
    waitpid(drop, NULL, 0);

    char keep_pid[16];
    snprintf(keep_pid, sizeof(keep_pid), "%d", keep);
    int64_t kept = 0, others = 0;
    for (size_t i = 0; i < cap.n; i++) {
        agt_decoded_t dec;
        if (agt_test_decode(&cap.msgs[i], &dec) != 0) {
            LC_CHECK(!"decodable");
            continue;
        }
        const char *comm = agt_test_label(&dec, "comm"), *pid = agt_test_label(&dec, "pid");
        LC_CHECK(comm && strncmp(comm, "agt_keep", 8) == 0);
        LC_ASSERT_EQ(cap.msgs[i].partition, 0);
        for (size_t s = 0; s < dec.p->n_sample; s++) {
            if (pid && strcmp(pid, keep_pid) == 0)
                kept += dec.p->sample[s]->value[0];
            else
                others += dec.p->sample[s]->value[0];
        }
        agt_test_decoded_fini(&dec);
    }
    /* Every sample of the kept child, whatever share of the CPU it got: a
     * statistical bound on its own CPU time (agt_test_count_plausible), not a
     * band that a busy machine breaks. It needs some CPU to have power. */
    double expected = keep_cpu_s * RATE_HZ;
    fprintf(stderr, "kept child ran %.3f s of CPU\n", keep_cpu_s);
    LC_CHECK(expected > 50);
    LC_CHECK(agt_test_count_plausible((double)kept, expected));
    LC_ASSERT_EQ(others, 0);
    /* The published tally is exactly what the transport received. */
    LC_CHECK(lc_metric_value(lc_metrics_counter(metrics, "ember_agent_samples_published_total", "",
                                                "")) == (double)kept);
    LC_CHECK(lc_metric_value(lc_metrics_counter(metrics, "ember_agent_samples_skipped_total", "",
                                                "reason=\"filtered\"")) > 20);
    LC_CHECK(lc_metric_value(lc_metrics_counter(metrics, "ember_agent_profiles_published_total", "",
                                                "")) == (double)cap.n);
    LC_ASSERT_OK(uv_loop_close(&loop)); /* every handle was closed */
    for (size_t i = 0; i < cap.n; i++)
        lc_free(cap.msgs[i].data);
    lc_free(cap.msgs);
    lc_metrics_free(metrics);
}

static void test_bad_options_are_refused(void)
{
    uv_loop_t loop;
    uv_loop_init(&loop);
    lc_metrics_t *metrics = lc_metrics_new();
    capture_t cap = {.base = {.ops = &capture_ops}};
    agt_opts_t o;
    agt_t *a = NULL;
    agt_opts_default(&o);
    o.sample_rate_hz = 0;
    LC_ASSERT_EQ(agt_new(&loop, &o, &cap.base, metrics, &a), LC_EINPUT);
    agt_opts_default(&o);
    o.interval_ns = 1000;
    LC_ASSERT_EQ(agt_new(&loop, &o, &cap.base, metrics, &a), LC_EINPUT);
    agt_opts_default(&o);
    o.filter = "{comm=~\"(\"}";
    LC_ASSERT_EQ(agt_new(&loop, &o, &cap.base, metrics, &a), LC_EINPUT);
    LC_CHECK(a == NULL);
    LC_ASSERT_OK(uv_loop_close(&loop));
    lc_metrics_free(metrics);
}

LC_TEST_MAIN(test_filter_and_flush, test_bad_options_are_refused)
