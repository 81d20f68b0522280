/*
 * node.c — the scraper node (scraper.h: scr_node). In `ember` (with
 * --scrape.config-file) it publishes into the ingester node's transport and
 * scrapes every target. In `ember-scraper` it publishes into the publisher
 * node's Redis transport and joins the Redis group "scraper": every replica
 * gets the live member list (sorted ids) and rendezvous hashing over it
 * assigns each target to one replica, so a scr_join or a leave moves only that
 * replica's share. A replica that gains a target waits `scrape.handover`
 * before its first scrape, long enough for the previous owner to have read
 * the same list (members are re-read every heartbeat), so no target is
 * scraped by two replicas at once.
 *
 * Stop: after the server closed (it serves /targets from the scraper), the
 * scraper stops (scrapes in flight finish and are published), then the
 * replica leaves the group (the others take its targets over after their
 * handover); the transport closes after, in its own node.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ember_process.h"
#include "lc/alloc.h"
#include "lc/log.h"
#include "lc/members.h"
#include "scraper.h"

#define NS_PER_MS 1000000LL

typedef struct scr_node_s {
    lc_proc_t *p;
    const ember_settings_t *s;
    scr_t *scr;
    bool replicated; /* ember-scraper: targets split between replicas */
    lc_members_t *members;
    bool members_seen;
    char member_id[256], member_addr[256];
} scr_node_t;

static void scr_on_members(lc_members_t *m, const lc_member_t *live, size_t n, void *data)
{
    scr_node_t *sn = data;
    LC_UNUSED(m);
    const char **ids = lc_xcalloc(n + 1, sizeof(*ids));
    for (size_t i = 0; i < n; i++)
        ids[i] = live[i].id;
    sn->members_seen = true;
    if (sn->scr)
        scr_set_members(sn->scr, ids, n);
    lc_free(ids);
}

/* Defaults: "<host name>:<HTTP port>", unique per host and stable across
 * restarts (in Kubernetes the host name is the pod name). */
static void scr_set_identity(scr_node_t *sn)
{
    char host[128] = "localhost";
    gethostname(host, sizeof(host) - 1);
    const char *colon = strrchr(sn->s->http_address, ':');
    const char *port = colon ? colon + 1 : "4042";
    const char *id = sn->s->member_id, *addr = sn->s->member_address;
    if (id && *id)
        snprintf(sn->member_id, sizeof(sn->member_id), "%s", id);
    else
        snprintf(sn->member_id, sizeof(sn->member_id), "%s:%s", host, port);
    if (addr && *addr)
        snprintf(sn->member_addr, sizeof(sn->member_addr), "%s", addr);
    else
        snprintf(sn->member_addr, sizeof(sn->member_addr), "%s:%s", host, port);
}

static int scr_join(scr_node_t *sn)
{
    lc_members_opts_t mo = {
        .url = sn->s->redis_url,
        .cluster = sn->s->redis_cluster,
        .role = "scraper",
        .self_id = sn->member_id,
        .self_addr = sn->member_addr,
        .heartbeat_ms = (uint32_t)(sn->s->heartbeat_ns / NS_PER_MS),
        .ttl_ms = (uint32_t)(sn->s->member_ttl_ns / NS_PER_MS),
        .on_change = scr_on_members,
        .change_data = sn,
    };
    int rc = lc_members_new(&sn->p->loop, &mo, &sn->members);
    if (rc)
        LC_LOG_ERROR("cannot scr_join the scraper group err=\"%s\" (member.ttl must exceed "
                     "member.heartbeat)",
                     lc_strerror(rc));
    return rc;
}

/* ember-scraper's own limits and tenant, or ember's receiver limits. */
static void scr_fill_opts(const scr_node_t *sn, scr_opts_t *o)
{
    const ember_settings_t *s = sn->s;
    scr_opts_default(o);
    o->config_file = s->scrape_config_file;
    o->transport = sn->p->transport;
    o->metrics = sn->p->metrics;
    o->httpd = sn->p->httpd;
    if (ember_clustered(s))
        o->partitions = (uint32_t)s->partitions;
    if (!sn->replicated) {
        o->max_body_bytes = (size_t)s->max_profile_bytes;
        o->max_samples = (size_t)s->max_samples;
        return;
    }
    o->tenant = s->tenant;
    o->max_body_bytes = (size_t)s->scrape_max_body_bytes;
    o->max_samples = (size_t)s->scrape_max_samples;
    o->membership = true;
    o->replica_id = sn->member_id;
    o->handover_ns = s->handover_ns;
}

static int scr_node_start(lc_proc_t *p, const void *settings, void **state)
{
    const ember_settings_t *s = settings;
    bool configured = s->scrape_config_file && *s->scrape_config_file;
    if (s->bin != EMBER_BIN_SCRAPER && !configured)
        return 0; /* ember without --scrape.config-file */
    if (!configured) {
        LC_LOG_ERROR("--config.file (the parca.yaml with scrape_configs) is required");
        return LC_EINPUT;
    }
    scr_node_t *sn = lc_xcalloc(1, sizeof(*sn));
    *state = sn;
    sn->p = p;
    sn->s = s;
    sn->replicated = s->bin == EMBER_BIN_SCRAPER;
    if (sn->replicated)
        scr_set_identity(sn);
    scr_opts_t o;
    scr_fill_opts(sn, &o);
    lc_status_t st = {0};
    if (scr_new(&p->loop, &o, &sn->scr, &st)) {
        LC_LOG_ERROR("cannot start the scraper err=\"%s\"", st.msg);
        return LC_EINPUT;
    }
    if (sn->replicated)
        LC_LOG_INFO("scraping as member=%s", sn->member_id);
    return sn->replicated ? scr_join(sn) : 0;
}

static void scr_on_left(void *data)
{
    scr_node_t *sn = data;
    sn->members = NULL;
    lc_proc_continue(sn->p);
}

static void scr_on_scraper_closed(void *data)
{
    scr_node_t *sn = data;
    sn->scr = NULL;
    if (sn->members)
        lc_members_close(sn->members, scr_on_left, sn);
    else
        lc_proc_continue(sn->p);
}

static void scr_node_close(lc_proc_t *p, void *state)
{
    scr_node_t *sn = state;
    LC_UNUSED(p);
    if (sn->scr)
        scr_close(sn->scr, scr_on_scraper_closed, sn);
    else
        scr_on_scraper_closed(sn);
}

static const char *scr_node_not_ready(void *state)
{
    scr_node_t *sn = state;
    return sn->replicated && !sn->members_seen ? "no member list yet" : NULL;
}

static void scr_node_free(void *state)
{
    lc_free(state);
}

const lc_node_ops_t scr_node = {
    .name = "scraper",
    .start = scr_node_start,
    .close = scr_node_close,
    .not_ready = scr_node_not_ready,
    .free = scr_node_free,
};
