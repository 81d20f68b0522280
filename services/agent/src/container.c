/*
 * container.c — from a process' cgroup to its container and service name.
 *
 * Container runtimes name the cgroup of a container after its 64-hex id,
 * whatever the driver: cgroupfs "/kubepods/burstable/pod<uid>/<id>" or
 * "/docker/<id>", systemd "/…/cri-containerd-<id>.scope",
 * "docker-<id>.scope", "crio-<id>.scope", "libpod-<id>.scope". The id is the
 * last path element that ends in 64 hex digits (after an optional
 * "<runtime>-" prefix and ".scope" suffix), as ecosystem.md §5.3 describes.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "agent_int.h"

#define CONTAINER_ID_LEN 64

void agt_cgroup_pick(const char *text, size_t len, char *out, size_t cap)
{
    const char *best = NULL;
    size_t best_len = 0;
    out[0] = '\0';
    for (const char *p = text, *end = text + len; p < end;) {
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = eol ? eol : end;
        /* "hierarchy-id:controllers:path"; v2 is "0::path". */
        const char *c1 = memchr(p, ':', (size_t)(line_end - p));
        const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(line_end - c1 - 1)) : NULL;
        if (c2) {
            const char *path = c2 + 1;
            size_t plen = (size_t)(line_end - path);
            bool v2 = c1 - p == 1 && p[0] == '0' && c2 == c1 + 1;
            bool real = plen > 1 || (plen == 1 && path[0] != '/');
            if (real && (v2 || plen > best_len)) {
                best = path;
                best_len = plen;
                if (v2)
                    break; /* the unified hierarchy is authoritative */
            }
        }
        p = eol ? eol + 1 : end;
    }
    if (best)
        snprintf(out, cap, "%.*s", (int)best_len, best);
}

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return false;
    }
    return true;
}

void agt_container_id(const char *cgroup, char out[65])
{
    out[0] = '\0';
    size_t len = strlen(cgroup);
    while (len > 0) {
        /* The element [start, len). */
        size_t start = len;
        while (start > 0 && cgroup[start - 1] != '/')
            start--;
        size_t end = len;
        if (end - start > 6 && memcmp(cgroup + end - 6, ".scope", 6) == 0)
            end -= 6;
        if (end - start >= CONTAINER_ID_LEN && all_hex(cgroup + end - CONTAINER_ID_LEN, 64)) {
            size_t id = end - CONTAINER_ID_LEN;
            if (id == start || cgroup[id - 1] == '-') {
                memcpy(out, cgroup + id, CONTAINER_ID_LEN);
                out[CONTAINER_ID_LEN] = '\0';
                return;
            }
        }
        len = start > 0 ? start - 1 : 0;
    }
}

/* The last element of a systemd unit path ending in ".service", without it. */
static bool systemd_service(const char *cgroup, char *out, size_t cap)
{
    const char *slash = strrchr(cgroup, '/');
    const char *unit = slash ? slash + 1 : cgroup;
    size_t n = strlen(unit);
    if (n <= 8 || strcmp(unit + n - 8, ".service") != 0)
        return false;
    snprintf(out, cap, "%.*s", (int)(n - 8), unit);
    return true;
}

void agt_service_name(const char *k8s_namespace, const char *k8s_container,
                      const char *container_id, const char *cgroup, const char *exe,
                      const char *comm, char *out, size_t cap)
{
    if (k8s_namespace && *k8s_namespace && k8s_container && *k8s_container) {
        snprintf(out, cap, "%s/%s", k8s_namespace, k8s_container);
        return;
    }
    if (container_id && *container_id) {
        snprintf(out, cap, "%.12s", container_id);
        return;
    }
    if (cgroup && systemd_service(cgroup, out, cap))
        return;
    const char *slash = exe ? strrchr(exe, '/') : NULL;
    const char *name = slash && slash[1] ? slash + 1 : exe;
    snprintf(out, cap, "%s", name && *name ? name : comm && *comm ? comm : "unknown");
}
