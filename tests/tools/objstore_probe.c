/*
 * objstore_probe — one lc/objstore.h call per run, for tests/integration/
 * test_objstore.py (which judges the results with its own oracles: file bytes,
 * hashlib, the server's own view).
 *
 *   objstore_probe put KEY FILE | get KEY OUT | range KEY OFF N OUT | head KEY
 *                | delete KEY | list PREFIX | sizes PREFIX
 *
 * The store comes from the environment: OBJ_BACKEND (filesystem|s3), OBJ_DIR,
 * OBJ_ENDPOINT, OBJ_BUCKET, OBJ_PREFIX, OBJ_PAGE_KEYS, AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, OBJ_VIRTUAL_HOST (1: bucket.endpoint, else path-style),
 * OBJ_PART_MIB (part size and multipart threshold),
 * OBJ_STALL_AFTER_PART (after that part, print "stalled" and wait to be
 * killed). Exit: 0 ok, 2 not found, 3 corrupt, 1 any other error.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lc/alloc.h"
#include "lc/objstore.h"

static int exit_code(int rc)
{
    return rc == 0 ? 0 : rc == LC_ENOTFOUND ? 2 : rc == LC_ECORRUPT ? 3 : 1;
}

static void stall_after(void *arg, int part)
{
    if (part == *(int *)arg) {
        printf("stalled\n");
        fflush(stdout);
        for (;;)
            pause();
    }
}

/* A small non-negative number from the environment; 0 when unset or bad. */
static int env_int(const char *name)
{
    const char *v = getenv(name);
    char *end = NULL;
    long n = v ? strtol(v, &end, 10) : 0;
    return v && *v && *end == '\0' && n >= 0 && n <= 1 << 20 ? (int)n : 0;
}

static uint8_t *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    lc_buf_t b;
    lc_buf_init(&b, LC_BUF_UNLIMITED);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        if (lc_buf_append(&b, chunk, n) != 0)
            break;
    fclose(f);
    return lc_buf_steal(&b, len);
}

static int write_file(const char *path, const uint8_t *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 1;
    size_t w = fwrite(data, 1, len, f);
    return fclose(f) != 0 || w != len;
}

static int cmd_put(lc_objstore_t *s, char **argv)
{
    size_t len = 0;
    uint8_t *data = read_file(argv[3], &len);
    int rc = lc_objstore_put(s, argv[2], data, len);
    lc_free(data);
    return rc;
}

static int cmd_get(lc_objstore_t *s, int argc, char **argv)
{
    uint8_t *data = NULL;
    size_t len = 0;
    int rc = argc == 4 ? lc_objstore_get(s, argv[2], &data, &len)
                       : lc_objstore_get_range_unverified(s, argv[2], strtoull(argv[3], NULL, 10),
                                                          strtoull(argv[4], NULL, 10), &data, &len);
    if (rc == 0 && write_file(argv[argc - 1], data, len) != 0)
        rc = LC_EINPUT;
    lc_free(data);
    return rc;
}

/* "list": one key a line; "sizes": "<key> <size>" a line. */
static int cmd_list(lc_objstore_t *s, const char *prefix, bool with_sizes)
{
    lc_objstore_list_t l;
    int rc = lc_objstore_list(s, prefix, &l);
    for (size_t i = 0; rc == 0 && i < l.n; i++)
        if (with_sizes)
            printf("%s %" PRIu64 "\n", l.keys[i], l.sizes[i]);
        else
            printf("%s\n", l.keys[i]);
    lc_objstore_list_free(&l);
    return rc;
}

static int run(lc_objstore_t *s, int argc, char **argv)
{
    const char *cmd = argv[1];
    if (strcmp(cmd, "put") == 0 && argc == 4)
        return cmd_put(s, argv);
    if ((strcmp(cmd, "get") == 0 && argc == 4) || (strcmp(cmd, "range") == 0 && argc == 6))
        return cmd_get(s, argc, argv);
    if (strcmp(cmd, "head") == 0 && argc == 3) {
        uint64_t size = 0;
        int rc = lc_objstore_head(s, argv[2], &size);
        if (rc == 0)
            printf("%llu\n", (unsigned long long)size);
        return rc;
    }
    if (strcmp(cmd, "delete") == 0 && argc == 3)
        return lc_objstore_delete(s, argv[2]);
    if (strcmp(cmd, "list") == 0 && argc == 3)
        return cmd_list(s, argv[2], false);
    if (strcmp(cmd, "sizes") == 0 && argc == 3)
        return cmd_list(s, argv[2], true);
    fprintf(stderr, "objstore_probe: bad command\n");
    return LC_EINPUT;
}

int main(int argc, char **argv)
{
    static int stall_part;
    lc_objstore_opts_t o = {0};
    if (argc < 3 || lc_objstore_backend_parse(getenv("OBJ_BACKEND"), &o.backend) != 0)
        return 1;
    o.fs_dir = getenv("OBJ_DIR");
    o.endpoint = getenv("OBJ_ENDPOINT");
    o.bucket = getenv("OBJ_BUCKET");
    o.prefix = getenv("OBJ_PREFIX");
    o.access_key_id = getenv("AWS_ACCESS_KEY_ID");
    o.secret_access_key = getenv("AWS_SECRET_ACCESS_KEY");
    o.force_path_style = env_int("OBJ_VIRTUAL_HOST") == 0;
    o.list_page_keys = env_int("OBJ_PAGE_KEYS");
    o.part_bytes = o.multipart_threshold = (size_t)env_int("OBJ_PART_MIB") << 20;
    stall_part = env_int("OBJ_STALL_AFTER_PART");
    if (stall_part) {
        o.on_part = stall_after;
        o.on_part_arg = &stall_part;
    }
    char why[256] = "";
    lc_objstore_t *s = NULL;
    if (lc_objstore_opts_check(&o, why, sizeof why) != 0 || lc_objstore_open(&o, &s) != 0) {
        fprintf(stderr, "objstore_probe: %s\n", why[0] ? why : "open failed");
        return 1;
    }
    int rc = run(s, argc, argv);
    if (rc != 0)
        fprintf(stderr, "objstore_probe: %s: %s\n", lc_strerror(rc), lc_objstore_last_error(s));
    lc_objstore_close(s);
    return exit_code(rc);
}
