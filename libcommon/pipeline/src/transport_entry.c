/*
 * transport_entry.c — lean stream entries (lc/transport_entry.h): a zstd
 * frame of the message behind an 8-byte versioned header.
 *
 * zstd level 2: on the bench's profiles about 0.9 of gzip level 1's size
 * (level 1: about 0.95, at the same speed), several times faster to
 * compress than gzip, and decompression costs a fraction of the pprof decode
 * that follows it. The compression context lives per thread
 * (receivers encode on the thread pool), reused for every entry.
 */
#include <errno.h>
#include <string.h>
#include <zstd.h>

#include "lc/alloc.h"
#include "lc/transport_entry.h"

#define LE_LEVEL 2

static const uint8_t LE_MAGIC[3] = {0x00, 'E', 'L'};

/* One per thread, for the thread's life (a thread pool's threads live as long
 * as the process). */
static _Thread_local ZSTD_CCtx *le_cctx;

size_t lc_entry_bound(size_t len)
{
    return LC_ENTRY_HEADER_BYTES + ZSTD_compressBound(len);
}

bool lc_entry_is_lean(const uint8_t *entry, size_t len)
{
    return len >= LC_ENTRY_HEADER_BYTES && memcmp(entry, LE_MAGIC, sizeof(LE_MAGIC)) == 0;
}

static void le_put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t le_get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* What both encoders check first; also creates this thread's context. */
static int le_prepare(size_t len, size_t cap)
{
    if (len > LC_ENTRY_MAX_MESSAGE)
        return LC_ETOOBIG;
    if (cap < LC_ENTRY_HEADER_BYTES)
        return LC_EINPUT;
    if (!le_cctx && !(le_cctx = ZSTD_createCCtx()))
        return -ENOMEM;
    return 0;
}

/* The header in front of an n-byte frame of a len-byte message. */
static void le_finish(uint8_t *out, size_t len, size_t n, size_t *out_len)
{
    memcpy(out, LE_MAGIC, sizeof(LE_MAGIC));
    out[3] = LC_ENTRY_VERSION;
    le_put_u32(out + 4, (uint32_t)len);
    *out_len = LC_ENTRY_HEADER_BYTES + n;
}

int lc_entry_encode(const uint8_t *msg, size_t len, uint8_t *out, size_t cap, size_t *out_len)
{
    int rc = le_prepare(len, cap);
    if (rc)
        return rc;
    size_t n = ZSTD_compressCCtx(le_cctx, out + LC_ENTRY_HEADER_BYTES, cap - LC_ENTRY_HEADER_BYTES,
                                 msg, len, LE_LEVEL);
    if (ZSTD_isError(n))
        return LC_EINPUT;
    le_finish(out, len, n, out_len);
    return 0;
}

/* A ProtobufCBuffer feeding zstd: protobuf-c appends tags, lengths and the
 * fields' own buffers in order; each append is compressed as it comes. */
typedef struct le_sink_s {
    ProtobufCBuffer base;
    ZSTD_outBuffer out;
    bool failed; /* zstd failed, or the output is full */
} le_sink_t;

static void le_sink_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
    le_sink_t *s = (le_sink_t *)b;
    ZSTD_inBuffer in = {data, len, 0};
    while (!s->failed && in.pos < in.size) {
        size_t rc = ZSTD_compressStream2(le_cctx, &s->out, &in, ZSTD_e_continue);
        s->failed = ZSTD_isError(rc) || (s->out.pos == s->out.size && in.pos < in.size);
    }
}

int lc_entry_encode_pb(const ProtobufCMessage *m, uint8_t *out, size_t cap, size_t *out_len)
{
    size_t len = protobuf_c_message_get_packed_size(m);
    int rc = le_prepare(len, cap);
    if (rc)
        return rc;
    ZSTD_CCtx_reset(le_cctx, ZSTD_reset_session_only);
    ZSTD_CCtx_setParameter(le_cctx, ZSTD_c_compressionLevel, LE_LEVEL);
    ZSTD_CCtx_setPledgedSrcSize(le_cctx, len); /* the frame states the size */
    le_sink_t s = {.base = {.append = le_sink_append},
                   .out = {out + LC_ENTRY_HEADER_BYTES, cap - LC_ENTRY_HEADER_BYTES, 0}};
    protobuf_c_message_pack_to_buffer(m, &s.base);
    ZSTD_inBuffer none = {NULL, 0, 0};
    size_t left = 1;
    while (!s.failed && left) {
        left = ZSTD_compressStream2(le_cctx, &s.out, &none, ZSTD_e_end);
        s.failed = ZSTD_isError(left) || (left && s.out.pos == s.out.size);
    }
    if (s.failed) {
        ZSTD_CCtx_reset(le_cctx, ZSTD_reset_session_only);
        return LC_EINPUT;
    }
    le_finish(out, len, s.out.pos, out_len);
    return 0;
}

uint8_t *lc_entry_pack(const ProtobufCMessage *m, bool lean, lc_entry_alloc_fn alloc, void *ctx,
                       size_t *len)
{
    size_t size = protobuf_c_message_get_packed_size(m);
    if (!lean) {
        uint8_t *data = alloc(ctx, size ? size : 1);
        if (data)
            *len = protobuf_c_message_pack(m, data);
        return data;
    }
    /* The entry reserves its bound (about the packed size), as packing does. */
    size_t cap = lc_entry_bound(size);
    uint8_t *data = alloc(ctx, cap);
    if (!data || lc_entry_encode_pb(m, data, cap, len) != 0)
        return NULL;
    return data;
}

struct lc_entry_decoder_s {
    ZSTD_DCtx *dctx;
    size_t max;
    uint8_t *buf;
    size_t cap;
};

lc_entry_decoder_t *lc_entry_decoder_new(size_t max_message)
{
    lc_entry_decoder_t *d = lc_xcalloc(1, sizeof(*d));
    d->max = max_message ? max_message : LC_ENTRY_MAX_MESSAGE;
    d->dctx = ZSTD_createDCtx();
    if (!d->dctx) {
        lc_free(d);
        return NULL;
    }
    return d;
}

void lc_entry_decoder_free(lc_entry_decoder_t *d)
{
    if (!d)
        return;
    ZSTD_freeDCtx(d->dctx);
    lc_free(d->buf);
    lc_free(d);
}

int lc_entry_decode(lc_entry_decoder_t *d, const uint8_t *entry, size_t len, const uint8_t **msg,
                    size_t *msg_len, const char **why)
{
    *why = NULL;
    if (!lc_entry_is_lean(entry, len)) {
        *msg = entry; /* v1: the message itself */
        *msg_len = len;
        return 0;
    }
    if (entry[3] != LC_ENTRY_VERSION) {
        *why = "unknown stream entry version";
        return LC_ECORRUPT;
    }
    size_t want = le_get_u32(entry + 4);
    if (want > d->max) {
        *why = "stream entry over the message size limit";
        return LC_ETOOBIG;
    }
    const uint8_t *frame = entry + LC_ENTRY_HEADER_BYTES;
    size_t frame_len = len - LC_ENTRY_HEADER_BYTES;
    unsigned long long declared = ZSTD_getFrameContentSize(frame, frame_len);
    if (declared != want) {
        *why = "stream entry length disagrees with its zstd frame";
        return LC_ECORRUPT;
    }
    d->buf = lc_xgrow(d->buf, &d->cap, want ? want : 1, 1);
    size_t got = ZSTD_decompressDCtx(d->dctx, d->buf, want, frame, frame_len);
    if (ZSTD_isError(got) || got != want) {
        *why = "stream entry is not a valid zstd frame";
        return LC_ECORRUPT;
    }
    *msg = d->buf;
    *msg_len = want;
    return 0;
}
