/*
 * gz.c — gzip encode/decode (lc/gz.h): libdeflate where the output's size is
 * known (every encode: its bound is), zlib's streaming inflate elsewhere.
 *
 * libdeflate also compresses 1.8x (level 6) to 5x (level 1 against zlib's 6)
 * faster than zlib, whole buffers at a time: zlib's deflate at level 6 was 40%
 * of a day-long flame graph's server CPU, spent on gzip'ing the response
 * (issue 32, bench/README.md "query concurrency").
 *
 * libdeflate inflates a whole buffer 2-2.5x faster than zlib (measured on the
 * bench mix: 0.39 against 0.90 ms a profile) but needs the output buffer up
 * front; a gzip stream states its size in its trailer. So a believable hint
 * (lc_gz_size_hint, at most the deflate ratio times the input) decodes with
 * libdeflate into a buffer of that size, and a stream that does not fit (a
 * false hint, several members) takes the streaming path.
 *
 * The streaming path grows the output buffer itself, in steps that never
 * pass the caller's cap, instead of going through lc_buf_reserve's doubling:
 * a gzip bomb then costs at most max_out bytes of memory before it is
 * rejected. zlib counts input in uInt, so inputs larger than 4 GiB are fed
 * in slices.
 */
#include <limits.h>
#include <string.h>

#include <libdeflate.h>
#include <zlib.h>

#include "lc/gz.h"

#define GZ_WINDOW_GZIP (16 + MAX_WBITS) /* zlib: gzip wrapper, largest window */
#define GZ_STEP_BYTES (64 * 1024)       /* first output block; later ones double */
#define GZ_SLICE_MAX ((size_t)UINT_MAX)
#define GZ_MIN_STREAM_BYTES 18 /* 10-byte header, empty deflate block, 8-byte trailer */
/* deflate cannot shrink data more than ~1032:1: a size hint above this many
 * times the compressed size is a lie not worth allocating for. */
#define GZ_MAX_RATIO 1040

bool lc_gz_is_gzip(const uint8_t *data, size_t len)
{
    return data && len >= 2 && data[0] == 0x1f && data[1] == 0x8b;
}

/* Feeds the next slice of input when zlib has used up the previous one. */
static void gz_feed_input(z_stream *zs, const uint8_t **in, size_t *left)
{
    if (zs->avail_in > 0 || *left == 0)
        return;
    size_t n = *left < GZ_SLICE_MAX ? *left : GZ_SLICE_MAX;
    zs->next_in = (Bytef *)*in;
    zs->avail_in = (uInt)n;
    *in += n;
    *left -= n;
}

/* Makes room after out->len, growing capacity to at most `limit` bytes in
 * total. Returns the free bytes (0 once the limit is reached). */
static size_t gz_out_room(lc_buf_t *out, size_t limit)
{
    if (out->cap < limit && out->cap - out->len < GZ_STEP_BYTES / 4) {
        size_t want = out->cap < GZ_STEP_BYTES ? GZ_STEP_BYTES : out->cap * 2;
        if (want > limit || want < out->cap)
            want = limit;
        out->data = lc_xrealloc(out->data, want);
        out->cap = want;
    }
    size_t end = out->cap < limit ? out->cap : limit;
    return end - out->len;
}

/* One inflate step into the free space of out. */
static int gz_inflate_step(z_stream *zs, lc_buf_t *out, size_t room)
{
    uInt avail = room < GZ_SLICE_MAX ? (uInt)room : UINT_MAX;
    zs->next_out = out->data + out->len;
    zs->avail_out = avail;
    int zrc = inflate(zs, Z_NO_FLUSH);
    out->len += avail - zs->avail_out;
    return zrc;
}

/* The inflate loop over every member; out->len may not pass limit. */
static int gz_inflate_all(z_stream *zs, const uint8_t *in, size_t len, lc_buf_t *out, size_t limit)
{
    size_t left = len;
    for (;;) {
        gz_feed_input(zs, &in, &left);
        size_t room = gz_out_room(out, limit);
        if (room == 0)
            return LC_ETOOBIG; /* output reached the cap and zlib wants more */
        int zrc = gz_inflate_step(zs, out, room);
        if (zrc == Z_STREAM_END) {
            if (zs->avail_in == 0 && left == 0)
                return 0;
            /* Another member follows (concatenated gzip files are one stream). */
            if (inflateReset(zs) != Z_OK)
                return LC_ECORRUPT;
            continue;
        }
        if (zrc == Z_BUF_ERROR && zs->avail_in == 0 && left == 0)
            return LC_ECORRUPT; /* truncated: input ended inside a member */
        if (zrc != Z_OK && zrc != Z_BUF_ERROR)
            return zrc == Z_MEM_ERROR ? LC_ETOOBIG : LC_ECORRUPT;
    }
}

/* Every member of in into out[0, cap) with libdeflate (members concatenated
 * are one stream, as for zlib). LC_ETOOBIG when they do not fit. */
static int gz_inflate_whole(const uint8_t *in, size_t len, uint8_t *out, size_t cap,
                            size_t *out_len)
{
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    if (!d)
        return LC_ETOOBIG; /* out of memory, said as zlib's Z_MEM_ERROR is */
    int rc = 0;
    size_t used_in = 0, used_out = 0;
    while (rc == 0 && used_in < len) {
        size_t member_in = 0, member_out = 0;
        enum libdeflate_result r =
            libdeflate_gzip_decompress_ex(d, in + used_in, len - used_in, out + used_out,
                                          cap - used_out, &member_in, &member_out);
        if (r == LIBDEFLATE_SUCCESS) {
            used_in += member_in;
            used_out += member_out;
        } else {
            rc = r == LIBDEFLATE_INSUFFICIENT_SPACE ? LC_ETOOBIG : LC_ECORRUPT;
        }
    }
    libdeflate_free_decompressor(d);
    *out_len = rc == 0 ? used_out : 0;
    return rc;
}

/* lc_gunzip's fast path: the stream inflated whole into room for the size
 * it states (+1, to tell "more than stated"), when that is believable and
 * within max_out. 0 when done; otherwise out is as it was, and the streaming
 * path decides (it also reports the errors). */
static int gz_gunzip_hinted(const uint8_t *in, size_t len, size_t max_out, lc_buf_t *out)
{
    size_t hint = lc_gz_size_hint(in, len);
    if (hint == 0 || hint > max_out || hint / GZ_MAX_RATIO > len)
        return -1;
    if (out->cap - out->len < hint + 1) { /* exactly: a bomb costs no more than it states */
        out->data = lc_xrealloc(out->data, out->len + hint + 1);
        out->cap = out->len + hint + 1;
    }
    size_t n;
    if (gz_inflate_whole(in, len, out->data + out->len, hint + 1, &n) != 0 || n > max_out)
        return -1;
    out->len += n;
    return 0;
}

int lc_gunzip(const uint8_t *in, size_t len, size_t max_out, lc_buf_t *out)
{
    if (!in || len == 0)
        return LC_ECORRUPT;
    size_t start = out->len;
    size_t room_max = out->max - out->len; /* the buffer's own cap applies too */
    if (max_out > room_max)
        max_out = room_max;
    /* One byte past the cap tells "exactly max_out" apart from "more than". */
    size_t limit = max_out < SIZE_MAX - start - 1 ? start + max_out + 1 : SIZE_MAX;
    if (gz_gunzip_hinted(in, len, max_out, out) == 0)
        return 0;

    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (inflateInit2(&zs, GZ_WINDOW_GZIP) != Z_OK)
        return LC_ECORRUPT;
    int rc = gz_inflate_all(&zs, in, len, out, limit);
    inflateEnd(&zs);
    if (rc == 0 && out->len - start > max_out)
        rc = LC_ETOOBIG;
    if (rc != 0)
        out->len = start; /* nothing half-decoded is left behind */
    return rc;
}

size_t lc_gz_size_hint(const uint8_t *in, size_t len)
{
    if (!lc_gz_is_gzip(in, len) || len < GZ_MIN_STREAM_BYTES)
        return 0;
    const uint8_t *t = in + len - 4; /* ISIZE: little-endian, modulo 2^32 */
    return (size_t)t[0] | (size_t)t[1] << 8 | (size_t)t[2] << 16 | (size_t)t[3] << 24;
}

int lc_gunzip_into(const uint8_t *in, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    *out_len = 0;
    if (!in || len == 0)
        return LC_ECORRUPT;
    return gz_inflate_whole(in, len, out, cap, out_len);
}

int lc_gzip(const uint8_t *in, size_t len, int level, lc_buf_t *out)
{
    if (level == 0)
        level = 6;
    if (level < 1 || level > 9 || (!in && len > 0))
        return LC_EINPUT;
    struct libdeflate_compressor *c = libdeflate_alloc_compressor(level);
    if (!c)
        return LC_ETOOBIG; /* no memory for its tables */
    size_t bound = libdeflate_gzip_compress_bound(c, len);
    size_t room = out->max - out->len;
    size_t want = bound < room ? bound : room; /* what fits under the cap may still do */
    size_t n = 0;
    if (want > 0 && lc_buf_reserve(out, want) == 0)
        n = libdeflate_gzip_compress(c, in ? in : (const uint8_t *)"", len, out->data + out->len,
                                     want);
    libdeflate_free_compressor(c);
    if (n == 0)
        return LC_ETOOBIG;
    out->len += n;
    return 0;
}
