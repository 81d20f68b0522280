/*
 * test_speedscope.c — speedscope uploads (pyroscope-api.md §2.9,
 * services/ingester/src/speedscope.c): the four real files of
 * testdata/speedscope/ give the stacks and values worked out by hand below
 * (in ticks: 100 per second or per `none` unit, 1 per byte), then the
 * evented/sampled rules, the deliberate departures from Pyroscope, and the
 * errors and caps.
 */
#include "lc_test.h"
#include "receive_int.h"

#define SCHEMA "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\""
#define FRAMES_ABCD                                                                                \
    "\"shared\":{\"frames\":[{\"name\":\"a\"},{\"name\":\"b\"},{\"name\":\"c\"},{\"name\":\"d\"}]" \
    "}"

/* ---------------------------------------------------------------- helpers */

/* Stacks reported for one profile, as "a;b;c" (names joined here), summed. */
typedef struct got_s {
    const ing_speedscope_t *ss;
    char keys[32][512];
    int64_t values[32];
    size_t n_keys, calls;
} got_t;

static int collect(const uint32_t *frames, size_t n, int64_t value, void *data)
{
    got_t *g = data;
    char key[512] = "";
    size_t len = 0;
    for (size_t i = 0; i < n && len < sizeof(key); i++)
        len += (size_t)snprintf(key + len, sizeof(key) - len, "%s%s", i ? ";" : "",
                                g->ss->frame_names[frames[i]]);
    g->calls++;
    for (size_t i = 0; i < g->n_keys; i++) {
        if (strcmp(g->keys[i], key) == 0) {
            g->values[i] += value;
            return 0;
        }
    }
    if (g->n_keys < 32) {
        memcpy(g->keys[g->n_keys], key, sizeof(key));
        g->values[g->n_keys++] = value;
    }
    return 0;
}

static int64_t got_value(const got_t *g, const char *key)
{
    for (size_t i = 0; i < g->n_keys; i++) {
        if (strcmp(g->keys[i], key) == 0)
            return g->values[i];
    }
    return -1;
}

typedef struct parsed_s {
    lc_arena_t *arena;
    ing_speedscope_t ss;
    lc_status_t st;
    int rc;
} parsed_t;

static void parse_bytes(parsed_t *p, const void *body, size_t len)
{
    p->arena = lc_arena_new((size_t)1 << 26);
    p->st = (lc_status_t){0};
    p->rc = ing_speedscope_parse(body, len, p->arena, &p->ss, &p->st);
    if (p->rc != 0)
        fprintf(stderr, "  parse: %s\n", p->st.msg);
}

static void parse_str(parsed_t *p, const char *json)
{
    parse_bytes(p, json, strlen(json));
}

static void parse_file(parsed_t *p, const char *name)
{
    char path[512];
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/speedscope/%s", LC_TESTDATA_DIR, name);
    unsigned char *body = lc_test_read_file(path, &len);
    LC_CHECK(body != NULL);
    parse_bytes(p, body, len);
    free(body);
}

static void parsed_free(parsed_t *p)
{
    ing_speedscope_fini(&p->ss);
    lc_arena_free(p->arena);
}

static void stacks(const parsed_t *p, size_t i, got_t *g)
{
    *g = (got_t){.ss = &p->ss};
    lc_status_t st = {0};
    LC_ASSERT_OK(ing_speedscope_stacks(&p->ss, i, collect, g, &st));
}

/* A file that must be rejected with `want` in the message. */
static void check_error(const char *json, const char *want)
{
    parsed_t p;
    p.arena = lc_arena_new((size_t)1 << 26);
    p.st = (lc_status_t){0};
    LC_ASSERT_EQ(ing_speedscope_parse(json, strlen(json), p.arena, &p.ss, &p.st), -1);
    if (!strstr(p.st.msg, want))
        fprintf(stderr, "  want \"%s\" in \"%s\"\n", want, p.st.msg);
    LC_CHECK(strstr(p.st.msg, want) != NULL);
    LC_CHECK(p.ss.doc == NULL); /* released on failure */
    lc_arena_free(p.arena);
}

/* The samples of two-sampled*.json and duplicates.json, by hand:
 *   [a,b,c] 1 + [a,b,c] 1 + [a,b,c] 3 = a;b;c 5,  [a,b,d] 4 = a;b;d 4,  [a,b] 5 = a;b 5. */
static void check_abcd(const got_t *g, int64_t ticks_per_unit, int64_t copies)
{
    LC_ASSERT_EQ(g->n_keys, 3);
    LC_ASSERT_EQ(got_value(g, "a;b;c"), 5 * ticks_per_unit * copies);
    LC_ASSERT_EQ(got_value(g, "a;b;d"), 4 * ticks_per_unit * copies);
    LC_ASSERT_EQ(got_value(g, "a;b"), 5 * ticks_per_unit * copies);
}

/* ---------------------------------------------------------------- testdata */

/* simple.speedscope.json, one evented profile in unit none. Walking its events
 * (time: stack open during the interval before the event):
 *   O a@0, O b@0, O c@0 | C c@2: a;b;c +2 | O d@2: a;b +0 | C d@6: a;b;d +4 |
 *   O c@6: a;b +0 | C c@9: a;b;c +3 | C b@14: a;b +5 | C a@14: a +0
 * so a;b;c 5, a;b;d 4, a;b 5 units: x100 ticks. Four non-zero intervals. */
static void test_simple_evented(void)
{
    parsed_t p;
    parse_file(&p, "simple.speedscope.json");
    LC_ASSERT_OK(p.rc);
    LC_ASSERT_EQ(p.ss.n_frames, 4);
    LC_ASSERT_EQ(p.ss.n_profiles, 1);
    LC_ASSERT_STR_EQ(p.ss.profiles[0].name, "simple.txt");
    LC_ASSERT_STR_EQ(p.ss.profiles[0].unit, "none");
    LC_CHECK(p.ss.profiles[0].evented);
    LC_ASSERT_EQ(ing_speedscope_default_rate(&p.ss.profiles[0]), 10000);
    got_t g;
    stacks(&p, 0, &g);
    LC_ASSERT_EQ(g.calls, 4);
    check_abcd(&g, 100, 1);
    parsed_free(&p);
}

/* two-sampled.speedscope.json: profiles "one" and "two", seconds, the same samples. */
static void test_two_sampled(void)
{
    parsed_t p;
    parse_file(&p, "two-sampled.speedscope.json");
    LC_ASSERT_OK(p.rc);
    LC_ASSERT_EQ(p.ss.n_profiles, 2);
    LC_ASSERT_STR_EQ(p.ss.profiles[0].name, "one");
    LC_ASSERT_STR_EQ(p.ss.profiles[1].name, "two");
    for (size_t i = 0; i < 2; i++) {
        LC_ASSERT_STR_EQ(p.ss.profiles[i].unit, "seconds");
        LC_CHECK(!p.ss.profiles[i].evented);
        LC_ASSERT_EQ(ing_speedscope_default_rate(&p.ss.profiles[i]), 100);
        got_t g;
        stacks(&p, i, &g);
        LC_ASSERT_EQ(g.calls, 5);
        check_abcd(&g, 100, 1);
    }
    parsed_free(&p);
}

/* two-sampled-bytes.speedscope.json: the same in bytes, 1 tick per byte, no rate. */
static void test_two_sampled_bytes(void)
{
    parsed_t p;
    parse_file(&p, "two-sampled-bytes.speedscope.json");
    LC_ASSERT_OK(p.rc);
    LC_ASSERT_EQ(p.ss.n_profiles, 2);
    for (size_t i = 0; i < 2; i++) {
        LC_ASSERT_STR_EQ(p.ss.profiles[i].unit, "bytes");
        LC_ASSERT_EQ(ing_speedscope_default_rate(&p.ss.profiles[i]), 0);
        got_t g;
        stacks(&p, i, &g);
        check_abcd(&g, 1, 1);
    }
    parsed_free(&p);
}

/* duplicates.speedscope.json: three profiles named "one", sampled, seconds,
 * startValue 0 (endValue differs, which is not part of the key): one profile
 * with every sample three times. */
static void test_duplicates_merged(void)
{
    parsed_t p;
    parse_file(&p, "duplicates.speedscope.json");
    LC_ASSERT_OK(p.rc);
    LC_ASSERT_EQ(p.ss.n_profiles, 1);
    LC_ASSERT_EQ(p.ss.profiles[0].n_members, 3);
    LC_ASSERT_STR_EQ(p.ss.profiles[0].name, "one");
    got_t g;
    stacks(&p, 0, &g);
    LC_ASSERT_EQ(g.calls, 15);
    check_abcd(&g, 100, 3);
    parsed_free(&p);
}

/* ---------------------------------------------------------------- rules */

/* Fractions survive the tick factor; the time before an open event counts
 * in ticks too (O a@0, O b@1: a +1; C b@3: a;b +2; C a@4: a +1). */
static void test_fractions_and_open_gaps(void)
{
    parsed_t p;
    parse_str(&p, "{" SCHEMA "," FRAMES_ABCD ",\"profiles\":["
                  "{\"type\":\"evented\",\"name\":\"e\",\"unit\":\"milliseconds\",\"events\":["
                  "{\"type\":\"O\",\"frame\":0,\"at\":0},{\"type\":\"O\",\"frame\":1,\"at\":1},"
                  "{\"type\":\"C\",\"frame\":1,\"at\":3},{\"type\":\"C\",\"frame\":0,\"at\":4}]},"
                  "{\"type\":\"sampled\",\"name\":\"s\",\"unit\":\"milliseconds\",\"startValue\":1,"
                  "\"samples\":[[0,1],[0,1.7],[2]],\"weights\":[0.5,0.25,0.004]}]}");
    LC_ASSERT_OK(p.rc);
    got_t g;
    stacks(&p, 0, &g);
    LC_ASSERT_EQ(got_value(&g, "a"), 200);
    LC_ASSERT_EQ(got_value(&g, "a;b"), 200);
    stacks(&p, 1, &g);
    LC_ASSERT_EQ(got_value(&g, "a;b"), 75); /* 0.5 + 0.25 ms; index 1.7 is frame 1 */
    LC_ASSERT_EQ(got_value(&g, "c"), -1);   /* 0.4 ticks: nothing */
    parsed_free(&p);
}

/* Profiles are ordered by startValue (file order among equals); an empty
 * sample is a stack without frames; frames still open at the end are dropped. */
static void test_order_empty_sample_open_end(void)
{
    parsed_t p;
    parse_str(&p, "{" SCHEMA "," FRAMES_ABCD ",\"profiles\":["
                  "{\"type\":\"sampled\",\"name\":\"late\",\"unit\":\"bytes\",\"startValue\":5,"
                  "\"samples\":[[]],\"weights\":[3]},"
                  "{\"type\":\"evented\",\"name\":\"early\",\"unit\":\"seconds\",\"startValue\":1,"
                  "\"events\":[{\"type\":\"O\",\"frame\":3,\"at\":1},"
                  "{\"type\":\"O\",\"frame\":2,\"at\":2}]},"
                  "{\"type\":\"sampled\",\"name\":\"late2\",\"unit\":\"bytes\",\"startValue\":5,"
                  "\"samples\":null,\"weights\":null}]}");
    LC_ASSERT_OK(p.rc);
    LC_ASSERT_EQ(p.ss.n_profiles, 3);
    LC_ASSERT_STR_EQ(p.ss.profiles[0].name, "early");
    LC_ASSERT_STR_EQ(p.ss.profiles[1].name, "late");
    LC_ASSERT_STR_EQ(p.ss.profiles[2].name, "late2");
    got_t g;
    stacks(&p, 0, &g);
    LC_ASSERT_EQ(g.calls, 1);
    LC_ASSERT_EQ(got_value(&g, "d"), 100); /* d@1..2; c never closes */
    stacks(&p, 1, &g);
    LC_ASSERT_EQ(got_value(&g, ""), 3);
    stacks(&p, 2, &g);
    LC_ASSERT_EQ(g.calls, 0);
    parsed_free(&p);
}

/* No profiles, no frames: valid and empty. */
static void test_empty_file(void)
{
    parsed_t p;
    parse_str(&p, "{" SCHEMA ",\"shared\":null,\"profiles\":[]}");
    LC_ASSERT_OK(p.rc);
    LC_ASSERT_EQ(p.ss.n_profiles, 0);
    LC_ASSERT_EQ(p.ss.n_frames, 0);
    parsed_free(&p);
}

/* ---------------------------------------------------------------- errors */

#define PROFILE(body) "{" SCHEMA "," FRAMES_ABCD ",\"profiles\":[" body "]}"
#define EVENTED(events)                                                                            \
    PROFILE("{\"type\":\"evented\",\"name\":\"p\",\"unit\":\"none\",\"events\":[" events "]}")
#define SAMPLED(samples, weights)                                                                  \
    PROFILE("{\"type\":\"sampled\",\"name\":\"p\",\"unit\":\"none\",\"samples\":" samples          \
            ",\"weights\":" weights "}")

static void test_document_errors(void)
{
    check_error("", "invalid JSON");
    check_error("{" SCHEMA "} x", "invalid JSON");
    check_error("[]", "not a JSON object");
    check_error("{\"$schema\":\"https://example.com/x.json\"}", "unknown $schema");
    check_error("{\"profiles\":[]}", "unknown $schema");
    check_error("{\"$schema\":5}", "\"$schema\" is not a string");
    check_error("{" SCHEMA ",\"shared\":{\"frames\":{}}}", "\"frames\" is not an array");
    check_error("{" SCHEMA ",\"shared\":{\"frames\":[5]}}", "a frame is not an object");
    check_error("{" SCHEMA ",\"profiles\":[1]}", "a profile is not an object");
    check_error(PROFILE("{\"type\":\"sampled\",\"name\":7}"), "\"name\" is not a string");
    check_error(PROFILE("{\"type\":\"other\",\"name\":\"p\",\"unit\":\"none\"}"),
                "profile type \"other\" is not supported");
    check_error(PROFILE("{\"type\":\"sampled\",\"name\":\"p\",\"unit\":\"hours\"}"),
                "unknown unit \"hours\"");
    check_error(PROFILE("{\"type\":\"sampled\",\"name\":\"p\"}"), "unknown unit \"\"");
}

static void test_evented_errors(void)
{
    check_error(
        EVENTED("{\"type\":\"O\",\"frame\":0,\"at\":5},{\"type\":\"C\",\"frame\":0,\"at\":4}"),
        "events out of order");
    check_error(EVENTED("{\"type\":\"C\",\"frame\":0,\"at\":1}"), "with no frame open");
    check_error(
        EVENTED("{\"type\":\"O\",\"frame\":0,\"at\":0},{\"type\":\"C\",\"frame\":1,\"at\":1}"),
        "closed at 1 while frame 0 is open");
    check_error(EVENTED("{\"type\":\"X\",\"frame\":0,\"at\":0}"), "unknown event type \"X\"");
    check_error(EVENTED("{\"type\":\"O\",\"frame\":4,\"at\":0}"), "frame index 4 is out of range");
    check_error(EVENTED("{\"type\":\"O\",\"frame\":-1,\"at\":0}"), "out of range");
    check_error(EVENTED("{\"type\":\"O\",\"frame\":\"0\",\"at\":0}"), "is not a number");
    check_error(EVENTED("5"), "an event is not an object");
    check_error(PROFILE("{\"type\":\"evented\",\"name\":\"p\",\"unit\":\"none\",\"events\":{}}"),
                "\"events\" is not an array");
    /* Two evented profiles with one key are concatenated, as Pyroscope does:
     * the second starts over at 0, which goes back in time. */
    check_error(
        PROFILE("{\"type\":\"evented\",\"name\":\"p\",\"unit\":\"none\",\"events\":["
                "{\"type\":\"O\",\"frame\":0,\"at\":0},{\"type\":\"C\",\"frame\":0,\"at\":2}]},"
                "{\"type\":\"evented\",\"name\":\"p\",\"unit\":\"none\",\"events\":["
                "{\"type\":\"O\",\"frame\":0,\"at\":0}]}"),
        "events out of order (0 after 2)");
    check_error(
        EVENTED("{\"type\":\"O\",\"frame\":0,\"at\":0},{\"type\":\"C\",\"frame\":0,\"at\":1e300}"),
        "is too large");
    /* an integer past 2^64 is a number (Go's float64), then too large a value */
    check_error(EVENTED("{\"type\":\"O\",\"frame\":0,\"at\":0},{\"type\":\"C\",\"frame\":0,"
                        "\"at\":100000000000000000000}"),
                "value 1e+20 is too large");
}

static void test_sampled_errors(void)
{
    check_error(SAMPLED("[[0]]", "[1,2]"), "1 samples but 2 weights");
    check_error(SAMPLED("[[0]]", "null"), "1 samples but 0 weights");
    check_error(SAMPLED("[[0]]", "[-1]"), "negative weight");
    check_error(SAMPLED("[[0]]", "[\"1\"]"), "a weight is not a number");
    check_error(SAMPLED("[[0,4]]", "[1]"), "frame index 4 is out of range (4 frames)");
    check_error(SAMPLED("[5]", "[1]"), "a sample is not an array");
    check_error(SAMPLED("{}", "[1]"), "\"samples\" is not an array");
}

/* ---------------------------------------------------------------- caps */

static char *repeat(const char *head, const char *item, size_t n, const char *sep, const char *tail)
{
    size_t cap = strlen(head) + n * (strlen(item) + strlen(sep) + 16) + strlen(tail) + 1;
    char *s = malloc(cap);
    size_t len = (size_t)snprintf(s, cap, "%s", head);
    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s%s", i ? sep : "", item);
    snprintf(s + len, cap - len, "%s", tail);
    return s;
}

static void check_error_owned(char *json, const char *want)
{
    check_error(json, want);
    free(json);
}

static void test_caps(void)
{
    /* the body itself */
    size_t big = ING_SPEEDSCOPE_MAX_BYTES + 1;
    char *body = malloc(big);
    memset(body, ' ', big);
    parsed_t p;
    p.arena = lc_arena_new(1 << 20);
    LC_ASSERT_EQ(ing_speedscope_parse(body, big, p.arena, &p.ss, &p.st), -1);
    LC_CHECK(strstr(p.st.msg, "profile too large") != NULL);
    lc_arena_free(p.arena);
    free(body);
    /* jansson's memory: 6M numbers in 12 MB of text would need ~290 MB */
    check_error_owned(repeat("[", "0", 6000000, ",", "]"),
                      "profile too large: speedscope file needs");
    /* profiles */
    check_error_owned(
        repeat("{" SCHEMA ",\"profiles\":[", "{}", ING_SPEEDSCOPE_MAX_PROFILES + 1, ",", "]}"),
        "more than 1024 speedscope profiles");
    /* depth: one sample of MAX + 1 frames */
    check_error_owned(repeat("{" SCHEMA "," FRAMES_ABCD ",\"profiles\":[{\"type\":\"sampled\","
                             "\"name\":\"p\",\"unit\":\"none\",\"weights\":[1],\"samples\":[[",
                             "0", ING_SPEEDSCOPE_MAX_DEPTH + 1, ",", "]]}]}"),
                      "a stack deeper than");
}

/* An evented profile re-emits its open stack at every event: MAX_DEPTH frames
 * open, then O/C pairs one unit apart each hand over ~2 x MAX_DEPTH frames. */
static void test_emitted_frames_cap(void)
{
    size_t pairs = ING_SPEEDSCOPE_MAX_STACK_FRAMES / (2 * (ING_SPEEDSCOPE_MAX_DEPTH - 1)) + 2;
    size_t opens = ING_SPEEDSCOPE_MAX_DEPTH - 1;
    size_t cap = (opens + 2 * pairs) * 48 + 4096;
    char *s = malloc(cap);
    size_t len = (size_t)snprintf(s, cap,
                                  "{" SCHEMA "," FRAMES_ABCD ",\"profiles\":[{\"type\":"
                                  "\"evented\",\"name\":\"p\",\"unit\":\"none\",\"events\":[");
    for (size_t i = 0; i < opens; i++)
        len += (size_t)snprintf(s + len, cap - len, "%s{\"type\":\"O\",\"frame\":0,\"at\":0}",
                                i ? "," : "");
    for (size_t i = 0; i < pairs; i++)
        len += (size_t)snprintf(s + len, cap - len,
                                ",{\"type\":\"O\",\"frame\":1,\"at\":%zu}"
                                ",{\"type\":\"C\",\"frame\":1,\"at\":%zu}",
                                2 * i + 1, 2 * i + 2);
    snprintf(s + len, cap - len, "]}]}");
    check_error_owned(s, "profile too large: speedscope stacks of more than");
}

LC_TEST_MAIN(test_simple_evented, test_two_sampled, test_two_sampled_bytes, test_duplicates_merged,
             test_fractions_and_open_gaps, test_order_empty_sample_open_end, test_empty_file,
             test_document_errors, test_evented_errors, test_sampled_errors, test_caps,
             test_emitted_frames_cap)
