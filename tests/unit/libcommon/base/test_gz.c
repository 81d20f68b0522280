/*
 * test_gz.c — lc_gunzip / lc_gzip: round trips, concatenated members, corrupt
 * and truncated input, false stated sizes (both inflate paths), and the output
 * cap (a gzip bomb must stop at the cap without allocating past it).
 */
#include <string.h>

#include <zlib.h>

#include "lc/gz.h"
#include "lc_test.h"

/* Deterministic, mildly compressible test bytes. */
static void fill_pattern(uint8_t *p, size_t n)
{
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = (uint8_t)((x >> 16) % 17 + 'a');
    }
}

static void test_is_gzip(void)
{
    const uint8_t magic[] = {0x1f, 0x8b, 0x08};
    LC_CHECK(lc_gz_is_gzip(magic, sizeof(magic)));
    LC_CHECK(!lc_gz_is_gzip(magic, 1));
    LC_CHECK(!lc_gz_is_gzip((const uint8_t *)"\x1f\x8a", 2));
    LC_CHECK(!lc_gz_is_gzip(NULL, 0));
}

static void test_round_trip(void)
{
    size_t n = 300 * 1000;
    uint8_t *plain = lc_xmalloc(n);
    fill_pattern(plain, n);
    lc_buf_t gz, back;
    lc_buf_init(&gz, LC_BUF_UNLIMITED);
    lc_buf_init(&back, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_gzip(plain, n, 0, &gz));
    LC_CHECK(lc_gz_is_gzip(gz.data, gz.len));
    LC_CHECK(gz.len < n);
    LC_ASSERT_OK(lc_gunzip(gz.data, gz.len, n, &back));
    LC_ASSERT_EQ(back.len, n);
    LC_ASSERT_MEM_EQ(back.data, plain, n);

    /* Empty input compresses to a valid stream that decodes to nothing. */
    lc_buf_reset(&gz);
    lc_buf_reset(&back);
    LC_ASSERT_OK(lc_gzip(NULL, 0, 9, &gz));
    LC_ASSERT_OK(lc_gunzip(gz.data, gz.len, 10, &back));
    LC_ASSERT_EQ(back.len, 0);
    LC_ASSERT_EQ(lc_gzip(plain, 10, 10, &gz), LC_EINPUT);
    lc_buf_fini(&gz);
    lc_buf_fini(&back);
    lc_free(plain);
}

/* zlib's own one-shot gzip writer, so the decoder is tested against a second encoder. */
static void zlib_gzip(const uint8_t *in, size_t n, lc_buf_t *out)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    LC_ASSERT_EQ(deflateInit2(&zs, 1, Z_DEFLATED, 16 + 15, 8, Z_DEFAULT_STRATEGY), Z_OK);
    size_t bound = deflateBound(&zs, n) + 32;
    LC_ASSERT_OK(lc_buf_reserve(out, bound));
    zs.next_in = (Bytef *)in;
    zs.avail_in = (uInt)n;
    zs.next_out = out->data + out->len;
    zs.avail_out = (uInt)bound;
    LC_ASSERT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
    out->len += bound - zs.avail_out;
    deflateEnd(&zs);
}

static void test_multi_member(void)
{
    lc_buf_t gz, back;
    lc_buf_init(&gz, LC_BUF_UNLIMITED);
    lc_buf_init(&back, LC_BUF_UNLIMITED);
    zlib_gzip((const uint8_t *)"hello, ", 7, &gz);
    LC_ASSERT_OK(lc_gzip((const uint8_t *)"gzip ", 5, 1, &gz));
    zlib_gzip((const uint8_t *)"world", 5, &gz);
    LC_ASSERT_OK(lc_buf_puts(&back, ">")); /* gunzip appends after what is there */
    LC_ASSERT_OK(lc_gunzip(gz.data, gz.len, 100, &back));
    LC_ASSERT_EQ(back.len, 18);
    LC_ASSERT_MEM_EQ(back.data, ">hello, gzip world", 18);
    lc_buf_fini(&gz);
    lc_buf_fini(&back);
}

static void test_corrupt(void)
{
    lc_buf_t gz, back;
    lc_buf_init(&gz, LC_BUF_UNLIMITED);
    lc_buf_init(&back, LC_BUF_UNLIMITED);
    uint8_t plain[5000];
    fill_pattern(plain, sizeof(plain));
    LC_ASSERT_OK(lc_gzip(plain, sizeof(plain), 6, &gz));

    /* Truncated stream. */
    LC_ASSERT_EQ(lc_gunzip(gz.data, gz.len - 4, 1 << 20, &back), LC_ECORRUPT);
    LC_ASSERT_EQ(back.len, 0);
    LC_ASSERT_EQ(lc_gunzip(gz.data, 5, 1 << 20, &back), LC_ECORRUPT);
    /* Flipped byte in the deflate data or the CRC. */
    gz.data[gz.len / 2] ^= 0x55;
    LC_ASSERT_EQ(lc_gunzip(gz.data, gz.len, 1 << 20, &back), LC_ECORRUPT);
    gz.data[gz.len / 2] ^= 0x55;
    gz.data[gz.len - 6] ^= 0x01;
    LC_ASSERT_EQ(lc_gunzip(gz.data, gz.len, 1 << 20, &back), LC_ECORRUPT);
    gz.data[gz.len - 6] ^= 0x01;
    /* Garbage after a valid member. */
    LC_ASSERT_OK(lc_buf_puts(&gz, "junk"));
    LC_ASSERT_EQ(lc_gunzip(gz.data, gz.len, 1 << 20, &back), LC_ECORRUPT);
    LC_ASSERT_EQ(back.len, 0);
    /* Not gzip at all, and empty input. */
    LC_ASSERT_EQ(lc_gunzip(plain, sizeof(plain), 1 << 20, &back), LC_ECORRUPT);
    LC_ASSERT_EQ(lc_gunzip(plain, 0, 1 << 20, &back), LC_ECORRUPT);
    lc_buf_fini(&gz);
    lc_buf_fini(&back);
}

static void test_cap(void)
{
    /* 64 MiB of zeros compress to ~64 KiB: a small gzip bomb. */
    size_t n = 64u << 20;
    uint8_t *zeros = lc_xcalloc(1, n);
    lc_buf_t gz, back;
    lc_buf_init(&gz, LC_BUF_UNLIMITED);
    lc_buf_init(&back, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_gzip(zeros, n, 9, &gz));
    lc_free(zeros);
    LC_CHECK(gz.len < (1u << 20));

    size_t cap = 1u << 20;
    LC_ASSERT_EQ(lc_gunzip(gz.data, gz.len, cap, &back), LC_ETOOBIG);
    LC_ASSERT_EQ(back.len, 0);
    LC_CHECK(back.cap <= cap + 1); /* never allocated past the cap */

    /* Exactly at the cap is fine; one byte less is not. */
    lc_buf_reset(&gz);
    lc_buf_fini(&back);
    lc_buf_init(&back, LC_BUF_UNLIMITED);
    uint8_t plain[1000];
    fill_pattern(plain, sizeof(plain));
    LC_ASSERT_OK(lc_gzip(plain, sizeof(plain), 6, &gz));
    LC_ASSERT_OK(lc_gunzip(gz.data, gz.len, sizeof(plain), &back));
    LC_ASSERT_EQ(back.len, sizeof(plain));
    lc_buf_reset(&back);
    LC_ASSERT_EQ(lc_gunzip(gz.data, gz.len, sizeof(plain) - 1, &back), LC_ETOOBIG);

    /* The output buffer's own max applies too, for gunzip and gzip. */
    lc_buf_t small;
    lc_buf_init(&small, 100);
    LC_ASSERT_EQ(lc_gunzip(gz.data, gz.len, 1 << 20, &small), LC_ETOOBIG);
    LC_ASSERT_EQ(small.len, 0);
    LC_ASSERT_EQ(lc_gzip(plain, sizeof(plain), 6, &small), LC_ETOOBIG);
    LC_ASSERT_EQ(small.len, 0);
    lc_buf_fini(&small);
    lc_buf_fini(&gz);
    lc_buf_fini(&back);
}

/* The stated size, and inflating into a buffer sized from it. */
static void test_size_hint_and_fixed_buffer(void)
{
    uint8_t plain[5000], out[5001];
    fill_pattern(plain, sizeof(plain));
    lc_buf_t gz;
    lc_buf_init(&gz, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_gzip(plain, sizeof(plain), 1, &gz));
    LC_ASSERT_EQ(lc_gz_size_hint(gz.data, gz.len), sizeof(plain));
    LC_ASSERT_EQ(lc_gz_size_hint(plain, sizeof(plain)), 0); /* not gzip */
    LC_ASSERT_EQ(lc_gz_size_hint(gz.data, 10), 0);          /* too short to be a stream */
    size_t n = 1;
    LC_ASSERT_OK(lc_gunzip_into(gz.data, gz.len, out, sizeof(out), &n));
    LC_ASSERT_EQ(n, sizeof(plain));
    LC_ASSERT_MEM_EQ(out, plain, sizeof(plain));
    LC_ASSERT_EQ(lc_gunzip_into(gz.data, gz.len, out, sizeof(plain) - 1, &n), LC_ETOOBIG);
    LC_ASSERT_EQ(n, 0);
    LC_ASSERT_EQ(lc_gunzip_into(gz.data, gz.len - 4, out, sizeof(out), &n), LC_ECORRUPT);
    LC_ASSERT_EQ(lc_gunzip_into(plain, sizeof(plain), out, sizeof(out), &n), LC_ECORRUPT);
    /* With a second member the hint is only the last one's size. */
    LC_ASSERT_OK(lc_gzip(plain, 100, 1, &gz));
    LC_ASSERT_EQ(lc_gz_size_hint(gz.data, gz.len), 100);
    LC_ASSERT_EQ(lc_gunzip_into(gz.data, gz.len, out, 101, &n), LC_ETOOBIG);
    /* ... and with room for both, both members come out, one after the other. */
    uint8_t both[sizeof(plain) + 100];
    LC_ASSERT_OK(lc_gunzip_into(gz.data, gz.len, both, sizeof(both), &n));
    LC_ASSERT_EQ(n, sizeof(both));
    LC_ASSERT_MEM_EQ(both, plain, sizeof(plain));
    LC_ASSERT_MEM_EQ(both + sizeof(plain), plain, 100);
    lc_buf_fini(&gz);
}

/* A trailer whose stated size is false: the whole-buffer path (libdeflate)
 * and the streaming one (zlib) must both call it corrupt, whichever runs. */
static void test_false_size(void)
{
    uint8_t plain[3000], out[4000];
    fill_pattern(plain, sizeof(plain));
    lc_buf_t gz, back;
    lc_buf_init(&gz, LC_BUF_UNLIMITED);
    lc_buf_init(&back, LC_BUF_UNLIMITED);
    LC_ASSERT_OK(lc_gzip(plain, sizeof(plain), 6, &gz));
    size_t n;
    for (int delta = -1; delta <= 1; delta += 2) {
        gz.data[gz.len - 4] = (uint8_t)(gz.data[gz.len - 4] + delta); /* ISIZE, low byte */
        LC_ASSERT_EQ(lc_gunzip(gz.data, gz.len, 1 << 20, &back), LC_ECORRUPT);
        LC_ASSERT_EQ(back.len, 0);
        LC_ASSERT_EQ(lc_gunzip_into(gz.data, gz.len, out, sizeof(out), &n), LC_ECORRUPT);
        gz.data[gz.len - 4] = (uint8_t)(gz.data[gz.len - 4] - delta);
    }
    LC_ASSERT_OK(lc_gunzip(gz.data, gz.len, 1 << 20, &back));
    LC_ASSERT_EQ(back.len, sizeof(plain));
    /* A stream stating more than the deflate ratio allows is not trusted to size anything. */
    lc_buf_reset(&gz);
    LC_ASSERT_OK(lc_gzip(plain, 10, 6, &gz));
    gz.data[gz.len - 1] = 0x7f; /* claims ~2 GiB */
    lc_buf_t capped;
    lc_buf_init(&capped, LC_BUF_UNLIMITED);
    LC_ASSERT_EQ(lc_gunzip(gz.data, gz.len, (size_t)1 << 32, &capped), LC_ECORRUPT);
    LC_CHECK(capped.cap < (1u << 20));
    lc_buf_fini(&capped);
    lc_buf_fini(&gz);
    lc_buf_fini(&back);
}

LC_TEST_MAIN(test_is_gzip, test_round_trip, test_multi_member, test_corrupt, test_cap,
             test_size_hint_and_fixed_buffer, test_false_size)
