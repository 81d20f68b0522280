/*
 * jvm.c — names for HotSpot's JIT code, asked of the running JVM.
 *
 * A JVM writes no perf map unless told to, and restarting it with
 * -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit helps nobody while it
 * runs. Instead the agent makes the request `jcmd PID Compiler.perfmap`
 * makes, through HotSpot's attach mechanism (facts from the JDK's
 * attachListener_linux.cpp and VirtualMachineImpl.java):
 *
 *   1. create `.attach_pid<nspid>` in the JVM's /tmp, owned by the JVM's user,
 *      and send SIGQUIT: the JVM's signal thread sees the file and starts its
 *      attach listener, a Unix socket at /tmp/.java_pid<nspid>;
 *   2. connect and write "1\0jcmd\0Compiler.perfmap\0\0\0" (protocol 1, the
 *      command, three arguments); the JVM writes /tmp/perf-<nspid>.map and
 *      answers "0\n" when it is done.
 *
 * perfmap.c then reads the file like any other perf map. Each step is taken
 * once per drain at most (no waiting for the listener inside the job), and
 * the request is repeated every JVM_REFRESH_NS while the process is sampled,
 * as code keeps being compiled. SIGQUIT is only sent to a process that
 * catches it (SigCgt): a JVM started with -Xrs would die of it.
 *
 * Threading: the agent's job only (one at a time), like procs.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent_int.h"
#include "lc/log.h"

#define JVM_REFRESH_NS (30 * 1000000000LL)     /* a fresh perf map this often */
#define JVM_ATTACH_WAIT_NS (10 * 1000000000LL) /* give up on a listener after this */
#define JVM_REPLY_TIMEOUT_S 5                  /* writing the map of a big code cache */
#define SIGQUIT_MASK_BIT (1ULL << (SIGQUIT - 1))

static const char JVM_REQUEST[] = "1\0jcmd\0Compiler.perfmap\0\0"; /* + the final NUL */

bool agt_jvm_maps_jvm(const agt_proc_t *p)
{
    for (size_t i = 0; i < p->n_maps; i++) {
        const char *slash = strrchr(p->maps[i].path, '/');
        if (slash && strcmp(slash + 1, "libjvm.so") == 0)
            return true;
    }
    return false;
}

/* Whether the process catches SIGQUIT, and its uid and gid (status file). */
static bool catches_sigquit(const char *procfs, const agt_proc_t *p, uid_t *uid, gid_t *gid)
{
    char path[128], line[256];
    snprintf(path, sizeof(path), "%s/%u/status", procfs, p->pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    bool catches = false;
    unsigned long long mask;
    unsigned long a, b;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "SigCgt: %llx", &mask) == 1)
            catches = (mask & SIGQUIT_MASK_BIT) != 0;
        else if (sscanf(line, "Uid: %lu %lu", &a, &b) == 2)
            *uid = (uid_t)b; /* effective */
        else if (sscanf(line, "Gid: %lu %lu", &a, &b) == 2)
            *gid = (gid_t)b;
    }
    fclose(f);
    return catches;
}

static void jvm_tmp_path(const char *procfs, const agt_proc_t *p, const char *name, char *out,
                         size_t cap)
{
    snprintf(out, cap, "%s/%u/root/tmp/%s%u", procfs, p->pid, name, p->nspid);
}

/* Step 1: the trigger file and the signal. */
static int start_listener(const char *procfs, agt_proc_t *p)
{
    uid_t uid = 0;
    gid_t gid = 0;
    if (!catches_sigquit(procfs, p, &uid, &gid))
        return LC_EUNSUPPORTED;
    char path[256];
    jvm_tmp_path(procfs, p, ".attach_pid", path, sizeof(path));
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    int rc = fchown(fd, uid, gid) ? -errno : 0;
    close(fd);
    if (!rc && kill((pid_t)p->pid, SIGQUIT) != 0)
        rc = -errno;
    if (rc)
        unlink(path);
    return rc;
}

/* Step 2: the request on the listener's socket; 0 once the JVM answered 0. */
static int request_perfmap(const char *procfs, const agt_proc_t *p)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    char path[256];
    jvm_tmp_path(procfs, p, ".java_pid", path, sizeof(path));
    if (strlen(path) >= sizeof(addr.sun_path))
        return LC_ETOOBIG;
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct timeval tv = {JVM_REPLY_TIMEOUT_S, 0};
    (void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int rc = connect(fd, (struct sockaddr *)&addr, sizeof(addr)) ? -errno : 0;
    if (!rc && write(fd, JVM_REQUEST, sizeof(JVM_REQUEST)) != (ssize_t)sizeof(JVM_REQUEST))
        rc = -EIO;
    char reply[64] = "";
    ssize_t n = rc ? -1 : read(fd, reply, sizeof(reply) - 1);
    close(fd);
    if (rc)
        return rc;
    if (n <= 0)
        return -EIO;
    reply[n] = '\0';
    return reply[0] == '0' && (reply[1] == '\n' || reply[1] == '\0') ? 0 : LC_EINPUT;
}

void agt_jvm_refresh(const char *procfs, agt_proc_t *p, int64_t now_ns, agt_jvm_stats_t *stats)
{
    if (p->jvm_asked_ns && now_ns - p->jvm_asked_ns < JVM_REFRESH_NS)
        return;
    char trigger[256];
    jvm_tmp_path(procfs, p, ".attach_pid", trigger, sizeof(trigger));
    int rc = request_perfmap(procfs, p);
    if (rc == 0) {
        stats->requests_ok++;
        p->jvm_asked_ns = now_ns;
        p->jvm_signalled_ns = 0;
        unlink(trigger);
        return;
    }
    if (p->jvm_signalled_ns && now_ns - p->jvm_signalled_ns < JVM_ATTACH_WAIT_NS)
        return;                /* the listener is starting: try again at the next drain */
    if (p->jvm_signalled_ns) { /* it never came: attach disabled, or not a HotSpot */
        stats->requests_failed++;
        p->jvm_asked_ns = now_ns; /* retry after a refresh period, not every drain */
        p->jvm_signalled_ns = 0;
        unlink(trigger);
        LC_LOG_INFO("agent: JVM attach listener did not start pid=%u", p->pid);
        return;
    }
    rc = start_listener(procfs, p);
    if (rc) {
        stats->requests_failed++;
        p->jvm_asked_ns = now_ns;
        LC_LOG_INFO("agent: cannot ask the JVM for its perf map pid=%u err=\"%s\"", p->pid,
                    lc_strerror(rc));
        return;
    }
    p->jvm_signalled_ns = now_ns;
}
