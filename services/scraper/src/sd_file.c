/*
 * sd_file.c — file_sd_configs: target groups from JSON or YAML files, with a
 * '*' glob allowed in the file name (Prometheus's file discovery).
 *
 * Files are re-read when they change and at least every refresh_interval.
 * Change detection polls cheaply: each second a thread-pool job globs the
 * patterns and stats the files, and only parses them again when the
 * (name, size, mtime, inode) signature moved. Polling sees atomic renames,
 * which editors and config managers use, as reliably as inotify would, and
 * keeps this module free of platform watch APIs. A file that fails to parse
 * keeps its previous targets (Prometheus does the same) and the error is
 * logged.
 *
 * JSON is a subset of YAML as far as target groups go, so one libyaml parse
 * reads both.
 */
#include <glob.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "lc/alloc.h"
#include "lc/clock.h"
#include "lc/log.h"
#include "scraper_int.h"

#define FILE_SD_POLL_MS 1000
#define FILE_SD_MAX_FILES 1024

typedef struct file_state_s {
    char *path;
    scr_group_t *groups; /* last good parse */
    size_t n_groups;
} file_state_t;

typedef struct file_disc_s {
    scr_disc_t d;
    uv_loop_t *loop;
    char **patterns;
    size_t n_patterns;
    int64_t refresh_ns;
    uv_timer_t timer;
    uv_work_t work;
    bool busy, closing;
    int handles;
    uint64_t signature; /* of the files last parsed */
    int64_t last_parse_ns;
    file_state_t *files; /* owned by the work while busy */
    size_t n_files;
    /* results of the work */
    bool parsed;
    char error[LC_STATUS_MSG_MAX];
} file_disc_t;

/* ---------------------------------------------------------------- parsing */

int scr_file_sd_parse(const char *path, const char *text, size_t len, scr_group_t **groups,
                      size_t *n_groups, lc_status_t *st)
{
    *groups = NULL;
    *n_groups = 0;
    if (len > SCR_CONFIG_MAX_BYTES)
        return lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s: larger than %zu bytes", path,
                             SCR_CONFIG_MAX_BYTES);
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_parser_initialize(&parser);
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        int rc = lc_status_set(st, LC_CODE_INVALID_ARGUMENT, "%s: parse error: %s (line %zu)", path,
                               parser.problem ? parser.problem : "unknown",
                               (size_t)parser.problem_mark.line + 1);
        yaml_parser_delete(&parser);
        return rc;
    }
    scr_yaml_t y = {.doc = &doc, .st = st, .source = path};
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    char prefix[512];
    snprintf(prefix, sizeof(prefix), "%s:", path);
    int rc = root ? scr_config_groups(&y, root, "target groups", prefix, groups, n_groups) : 0;
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    if (rc) {
        for (size_t i = 0; i < *n_groups; i++)
            scr_group_fini(&(*groups)[i]);
        lc_free(*groups);
        *groups = NULL;
        *n_groups = 0;
    }
    return rc;
}

static char *scr_read_small_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *text = lc_xmalloc(SCR_CONFIG_MAX_BYTES + 1);
    *len = fread(text, 1, SCR_CONFIG_MAX_BYTES + 1, f);
    bool err = ferror(f) != 0;
    fclose(f);
    if (err) {
        lc_free(text);
        return NULL;
    }
    return text;
}

/* ---------------------------------------------------------------- the work */

static void file_state_fini(file_state_t *f)
{
    lc_free(f->path);
    for (size_t i = 0; i < f->n_groups; i++)
        scr_group_fini(&f->groups[i]);
    lc_free(f->groups);
}

/* The current matches of every pattern, sorted and de-duplicated by glob. */
static size_t list_files(const file_disc_t *fd, char ***out, uint64_t *signature)
{
    char **paths = NULL;
    size_t n = 0;
    uint64_t sig = 0;
    for (size_t i = 0; i < fd->n_patterns; i++) {
        glob_t g;
        if (glob(fd->patterns[i], 0, NULL, &g) != 0)
            continue;
        for (size_t j = 0; j < g.gl_pathc && n < FILE_SD_MAX_FILES; j++) {
            struct stat sb;
            if (stat(g.gl_pathv[j], &sb) != 0 || !S_ISREG(sb.st_mode))
                continue;
            paths = lc_xrealloc(paths, (n + 1) * sizeof(*paths));
            paths[n++] = lc_xstrdup(g.gl_pathv[j]);
            uint64_t parts[4] = {(uint64_t)sb.st_size, (uint64_t)sb.st_mtim.tv_sec,
                                 (uint64_t)sb.st_mtim.tv_nsec, (uint64_t)sb.st_ino};
            sig = lc_hash64(parts, sizeof(parts), sig);
            sig = lc_hash64(g.gl_pathv[j], strlen(g.gl_pathv[j]), sig);
        }
        globfree(&g);
    }
    *out = paths;
    *signature = sig ^ n;
    return n;
}

/* Parses one file; on failure keeps prev's groups for it (moved into *st). */
static void parse_one(file_disc_t *fd, const char *path, file_state_t *prev, file_state_t *out)
{
    out->path = lc_xstrdup(path);
    size_t len = 0;
    char *text = scr_read_small_file(path, &len);
    lc_status_t st = {0};
    int rc = text ? scr_file_sd_parse(path, text, len, &out->groups, &out->n_groups, &st)
                  : lc_status_set(&st, LC_CODE_INVALID_ARGUMENT, "%s: cannot read", path);
    lc_free(text);
    if (rc) {
        snprintf(fd->error, sizeof(fd->error), "%s", st.msg);
        if (prev) { /* keep what this file said last time */
            out->groups = prev->groups;
            out->n_groups = prev->n_groups;
            prev->groups = NULL;
            prev->n_groups = 0;
        }
    }
}

static void file_work(uv_work_t *w)
{
    file_disc_t *fd = LC_CONTAINER_OF(w, file_disc_t, work);
    char **paths;
    uint64_t sig;
    size_t n = list_files(fd, &paths, &sig);
    bool refresh_due = lc_realtime_ns() - fd->last_parse_ns >= fd->refresh_ns;
    fd->parsed = false;
    fd->error[0] = '\0';
    if (sig != fd->signature || refresh_due || !fd->d.reported) {
        file_state_t *next = lc_xcalloc(n ? n : 1, sizeof(*next));
        for (size_t i = 0; i < n; i++) {
            file_state_t *prev = NULL;
            for (size_t j = 0; j < fd->n_files && !prev; j++)
                if (strcmp(fd->files[j].path, paths[i]) == 0)
                    prev = &fd->files[j];
            parse_one(fd, paths[i], prev, &next[i]);
        }
        for (size_t j = 0; j < fd->n_files; j++)
            file_state_fini(&fd->files[j]);
        lc_free(fd->files);
        fd->files = next;
        fd->n_files = n;
        fd->signature = sig;
        fd->last_parse_ns = lc_realtime_ns();
        fd->parsed = true;
    }
    scr_strings_free(paths, n);
}

/* All files' groups, copied (the discoverer owns its own array). */
static void publish_groups(file_disc_t *fd)
{
    size_t total = 0;
    for (size_t i = 0; i < fd->n_files; i++)
        total += fd->files[i].n_groups;
    scr_group_t *groups = lc_xcalloc(total ? total : 1, sizeof(*groups));
    size_t k = 0;
    for (size_t i = 0; i < fd->n_files; i++) {
        for (size_t j = 0; j < fd->files[i].n_groups; j++) {
            const scr_group_t *src = &fd->files[i].groups[j];
            scr_group_t *dst = &groups[k++];
            dst->source = lc_xstrdup(src->source);
            lc_labels_copy(&dst->labels, &src->labels);
            dst->targets = lc_xcalloc(src->n_targets ? src->n_targets : 1, sizeof(lc_labels_t));
            for (size_t t = 0; t < src->n_targets; t++)
                lc_labels_copy(&dst->targets[t], &src->targets[t]);
            dst->n_targets = src->n_targets;
        }
    }
    scr_disc_set_groups(&fd->d, groups, total);
}

static void file_disc_free(file_disc_t *fd)
{
    for (size_t j = 0; j < fd->n_files; j++)
        file_state_fini(&fd->files[j]);
    lc_free(fd->files);
    scr_strings_free(fd->patterns, fd->n_patterns);
    scr_disc_fini(&fd->d);
    lc_free(fd);
}

static void file_on_closed(uv_handle_t *h)
{
    file_disc_t *fd = h->data;
    if (--fd->handles == 0 && !fd->busy)
        file_disc_free(fd);
}

static void file_after(uv_work_t *w, int status)
{
    file_disc_t *fd = LC_CONTAINER_OF(w, file_disc_t, work);
    fd->busy = false;
    if (fd->closing) {
        if (fd->handles == 0)
            file_disc_free(fd);
        return;
    }
    LC_UNUSED(status);
    if (fd->error[0])
        scr_disc_error(&fd->d, "%s", fd->error);
    if (fd->parsed)
        publish_groups(fd);
}

static void file_tick(uv_timer_t *t)
{
    file_disc_t *fd = t->data;
    if (fd->busy || fd->closing)
        return;
    fd->busy = true;
    if (uv_queue_work(fd->loop, &fd->work, file_work, file_after) != 0)
        fd->busy = false;
}

static void file_close(scr_disc_t *d)
{
    file_disc_t *fd = (file_disc_t *)d;
    fd->closing = true;
    uv_close((uv_handle_t *)&fd->timer, file_on_closed);
}

int scr_disc_file_new(uv_loop_t *loop, const scr_file_sd_t *cfg, scr_disc_t **out)
{
    file_disc_t *fd = lc_xcalloc(1, sizeof(*fd));
    fd->d.kind = SCR_DISC_FILE;
    fd->d.key = cfg->key;
    fd->d.close = file_close;
    fd->loop = loop;
    fd->patterns = lc_xcalloc(cfg->n_files + 1, sizeof(char *));
    for (size_t i = 0; i < cfg->n_files; i++)
        fd->patterns[fd->n_patterns++] = lc_xstrdup(cfg->files[i]);
    fd->refresh_ns = cfg->refresh_ns;
    uv_timer_init(loop, &fd->timer);
    fd->timer.data = fd;
    fd->handles = 1;
    uv_timer_start(&fd->timer, file_tick, 0, FILE_SD_POLL_MS);
    *out = &fd->d;
    return 0;
}
