/*
 * auth_bench.c — how long lc_auth_check takes to refuse a wrong bearer token
 * that shares 0, 16 or 31 leading bytes with the real one. A comparison that
 * stopped at the first differing byte would grow with the shared prefix; the
 * tokens are hashed before they are compared, so the three medians should
 * agree. A timing claim needs a quiet machine, so it lives here and not in
 * the unit tests (docs/testing.md). Prints the medians and their spread
 * (largest over smallest); exits 1 if the spread is 1.25 or more.
 * Usage: auth_bench
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lc/auth.h"

enum { ROUNDS = 101, CHECKS_PER_ROUND = 500 };

static const char real_token[] = "tok-a-rw-padding-to-32-bytes-xyz";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int load_real_token(void)
{
    uint8_t d[LC_SHA256_BYTES];
    lc_sha256(real_token, strlen(real_token), d);
    char text[256];
    int n = snprintf(text, sizeof(text), "token sha256:");
    for (int i = 0; i < LC_SHA256_BYTES; i++)
        n += snprintf(text + n, sizeof(text) - (size_t)n, "%02x", d[i]);
    snprintf(text + n, sizeof(text) - (size_t)n, " tenants=a scope=read\n");
    lc_status_t st = {0};
    return lc_auth_load_text(text, &st);
}

static bool refused(const char *authz)
{
    lc_http_header_t hd = {"authorization", authz};
    lc_http_req_t req = {.headers = &hd, .n_headers = 1};
    lc_status_t st = {0};
    const char *tenants[] = {"a"};
    return lc_auth_check(&req, false, tenants, 1, &st) != 0 && st.code == LC_CODE_UNAUTHENTICATED;
}

/* Seconds for CHECKS_PER_ROUND checks of a wrong token sharing `prefix`
 * leading bytes with the real one; negative if one was not refused. */
static double wrong_token_round(size_t prefix)
{
    char tok[64];
    snprintf(tok, sizeof(tok), "Bearer %s", real_token);
    tok[7 + prefix] = tok[7 + prefix] == 'Q' ? 'R' : 'Q';
    double t0 = now_s();
    for (int i = 0; i < CHECKS_PER_ROUND; i++)
        if (!refused(tok))
            return -1;
    return now_s() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Rounds for the three prefixes are interleaved, so load from other
 * processes hits all three alike; medians drop the outliers. */
static int measure_medians(const size_t prefixes[3], double med[3])
{
    static double by_prefix[3][ROUNDS];
    for (int r = 0; r < 10; r++) /* warm-up */
        (void)wrong_token_round(0);
    for (int r = 0; r < ROUNDS; r++)
        for (int p = 0; p < 3; p++) {
            int which = (p + r) % 3;
            by_prefix[which][r] = wrong_token_round(prefixes[which]);
            if (by_prefix[which][r] < 0)
                return -1;
        }
    for (int p = 0; p < 3; p++) {
        qsort(by_prefix[p], ROUNDS, sizeof(double), cmp_double);
        med[p] = by_prefix[p][ROUNDS / 2];
    }
    return 0;
}

int main(void)
{
    static const size_t prefixes[3] = {0, 16, 31};
    double med[3];
    if (load_real_token() != 0 || measure_medians(prefixes, med) != 0) {
        fprintf(stderr, "auth_bench: the tokens table did not behave\n");
        return 2;
    }
    double lo = med[0], hi = med[0];
    for (int p = 1; p < 3; p++) {
        lo = med[p] < lo ? med[p] : lo;
        hi = med[p] > hi ? med[p] : hi;
    }
    printf("auth: wrong token, median of %d checks: prefix 0 %.1f us, 16 %.1f us, 31 %.1f us; "
           "spread %.3f (want < 1.25)\n",
           CHECKS_PER_ROUND, med[0] * 1e6, med[1] * 1e6, med[2] * 1e6, hi / lo);
    return hi / lo < 1.25 ? 0 : 1;
}
