/*
 * fuzz_multipart.c — the /ingest multipart/form-data reader
 * (services/ingester/multipart.c). Input: a Content-Type line, '\n', then the
 * body; without a usable Content-Type the boundary is sniffed from the body.
 * Every part returned must lie inside the body, and a failure must come with
 * a message.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "receive_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    if (!nl || nl - data > 512)
        return 0;
    char ct[513];
    memcpy(ct, data, (size_t)(nl - data));
    ct[nl - data] = 0;
    /* The body gets its own allocation so out-of-bounds reads are caught. */
    size_t blen = size - (size_t)(nl - data) - 1;
    uint8_t *body = malloc(blen ? blen : 1);
    memcpy(body, nl + 1, blen);
    lc_arena_t *arena = lc_arena_new(1 << 24);
    lc_status_t st = {0};
    const char *boundary;
    ing_form_t form;
    if (ing_multipart_boundary(ct, arena, &boundary, &st) == 0 ||
        ing_multipart_sniff_boundary(body, blen, arena, &boundary) == 0) {
        if (ing_multipart_parse(body, blen, boundary, arena, &form, &st) == 0) {
            for (size_t i = 0; i < form.n; i++) {
                const ing_part_t *p = &form.parts[i];
                if (p->data < body || p->data + p->len > body + blen || !p->name)
                    abort();
            }
            (void)ing_form_file(&form, "profile");
        } else if (!st.msg[0]) {
            abort();
        }
    }
    lc_arena_free(arena);
    free(body);
    return 0;
}
