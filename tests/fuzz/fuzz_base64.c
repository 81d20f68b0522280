/*
 * fuzz_base64.c — lc_base64_decode_padded, the decoder of ad-hoc profile
 * uploads (adhocprofiles.v1: the file arrives as base64 text). Two
 * properties on every input: read as base64 text, whatever decodes has the
 * length the padding implies and encodes back to text that decodes to the
 * same bytes; read as raw bytes, encoding then decoding gives them back.
 */
#include <stdlib.h>
#include <string.h>

#include "lc/base64.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void require(bool ok)
{
    if (!ok)
        abort();
}

/* Encodes raw and decodes it again; returns the decoded copy (malloc'd). */
static uint8_t *round_trip(const uint8_t *raw, size_t len, size_t *out_len)
{
    lc_buf_t text;
    lc_buf_init(&text, LC_BUF_UNLIMITED);
    require(lc_base64_encode(raw, len, &text) == 0);
    require(text.len == (len + 2) / 3 * 4);
    uint8_t *back = malloc(text.len / 4 * 3 + 1);
    require(back != NULL);
    ptrdiff_t n = lc_base64_decode_padded((const char *)text.data, text.len, back);
    lc_buf_fini(&text);
    require(n >= 0);
    *out_len = (size_t)n;
    return back;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *decoded = malloc(size / 4 * 3 + 1);
    require(decoded != NULL);
    ptrdiff_t n = lc_base64_decode_padded((const char *)data, size, decoded);
    if (n >= 0) {
        size_t pad = size == 0 ? 0 : (data[size - 1] == '=') + (size > 1 && data[size - 2] == '=');
        require((size_t)n == size / 4 * 3 - pad);
        size_t again_len;
        uint8_t *again = round_trip(decoded, (size_t)n, &again_len);
        require(again_len == (size_t)n && memcmp(again, decoded, again_len) == 0);
        free(again);
    }
    free(decoded);
    size_t back_len;
    uint8_t *back = round_trip(data, size, &back_len);
    require(back_len == size && memcmp(back, data, size) == 0);
    free(back);
    return 0;
}
