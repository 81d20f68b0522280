/* Recording rules (issue 29): lc/promname.h judges names by Prometheus'
 * syntax (the cases are from its data model docs, written out by hand), and
 * proto/prometheus/remote.proto encodes a WriteRequest to the bytes the
 * protobuf wire format gives prompb's field numbers, assembled here by hand. */
#include <string.h>

#include "lc/promname.h"
#include "lc_test.h"
#include "prometheus/remote.pb-c.h"

static bool metric_ok(const char *s)
{
    return lc_promname_metric_valid(s, strlen(s));
}

static bool label_ok(const char *s)
{
    return lc_promname_label_valid(s, strlen(s));
}

static void test_metric_names(void)
{
    LC_CHECK(metric_ok("profiles_cpu_nanoseconds_total"));
    LC_CHECK(metric_ok("job:cpu:sum"));
    LC_CHECK(metric_ok("_x9"));
    LC_CHECK(!metric_ok(""));
    LC_CHECK(!metric_ok("9lives"));
    LC_CHECK(!metric_ok("cpu-total"));
    LC_CHECK(!metric_ok("cpu total"));
    LC_CHECK(!metric_ok("caf\xc3\xa9"));
    LC_CHECK(!lc_promname_metric_valid(NULL, 0));
    char longest[LC_PROMNAME_MAX + 2];
    memset(longest, 'a', sizeof(longest));
    LC_CHECK(lc_promname_metric_valid(longest, LC_PROMNAME_MAX));
    LC_CHECK(!lc_promname_metric_valid(longest, LC_PROMNAME_MAX + 1));
}

static void test_label_names(void)
{
    LC_CHECK(label_ok("service_name"));
    LC_CHECK(label_ok("_private"));
    LC_CHECK(!label_ok("__name__"));
    LC_CHECK(!label_ok("a:b"));
    LC_CHECK(!label_ok("1a"));
    LC_CHECK(!label_ok(""));
}

static void test_write_request_wire_bytes(void)
{
    Prometheus__Label name = PROMETHEUS__LABEL__INIT;
    name.name = "__name__";
    name.value = "m";
    Prometheus__Label *labels[] = {&name};
    Prometheus__Sample sample = PROMETHEUS__SAMPLE__INIT;
    sample.value = 1.0;
    sample.timestamp = 1000;
    Prometheus__Sample *samples[] = {&sample};
    Prometheus__TimeSeries ts = PROMETHEUS__TIME_SERIES__INIT;
    ts.n_labels = 1;
    ts.labels = labels;
    ts.n_samples = 1;
    ts.samples = samples;
    Prometheus__TimeSeries *series[] = {&ts};
    Prometheus__WriteRequest req = PROMETHEUS__WRITE_REQUEST__INIT;
    req.n_timeseries = 1;
    req.timeseries = series;

    /* field 1 (timeseries) len 29: field 1 (labels) len 13: name, value;
     * field 2 (samples) len 12: field 1 fixed64 1.0, field 2 varint 1000. */
    static const uint8_t want[] = {
        0x0a, 0x1d, 0x0a, 0x0d, 0x0a, 0x08, '_',  '_',  'n',  'a',  'm',
        'e',  '_',  '_',  0x12, 0x01, 'm',  0x12, 0x0c, 0x09, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0xf0, 0x3f, 0x10, 0xe8, 0x07,
    };
    uint8_t got[64];
    size_t n = prometheus__write_request__get_packed_size(&req);
    LC_ASSERT_EQ(n, sizeof(want));
    if (n == sizeof(want)) {
        prometheus__write_request__pack(&req, got);
        LC_CHECK(memcmp(got, want, n) == 0);
    }
}

LC_TEST_MAIN(test_metric_names, test_label_names, test_write_request_wire_bytes)
