/*
 * fuzz_debuginfo_upload.c — the two parsers an uploaded debug file meets
 * (issue 31): Parca's Upload stream framing (ing_parca_upload_decode,
 * services/ingester/src/debuginfo_upload.c) and the ELF check
 * (lc_debuginfo_check_elf, libcommon/store/src/debuginfo_elf.c). The first
 * byte picks: even, the input is a gRPC stream whose file is then checked
 * against the build id its UploadInfo claims (bits 1 and 2: gRPC-Web framing,
 * gzip frames); odd, the rest is checked as an ELF file directly against a
 * build id it cannot have (every path up to the mismatch runs).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "symbols_int.h"

#define FUZZ_MAX_FILE (4u << 20)
#define FUZZ_MAX_INFLATED (16u << 20)

static void check_elf(const uint8_t *data, size_t len, const char *claimed)
{
    lc_status_t st = {0};
    int rc = lc_debuginfo_check_elf(data, len, claimed, FUZZ_MAX_INFLATED, &st);
    if (rc != 0 && st.code == LC_CODE_OK)
        abort(); /* a refusal must say why */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *body = data + 1;
    size_t len = size - 1;
    if (data[0] & 1) {
        check_elf(body, len, "0123456789abcdef0123456789abcdef01234567");
        return 0;
    }
    lc_arena_t *a = lc_arena_new(64u << 20);
    lc_status_t st = {0};
    ing_upload_t u = {0};
    lc_buf_init(&u.file, FUZZ_MAX_FILE);
    lc_grpc_kind_t kind = data[0] & 2 ? LC_GRPC_WEB : LC_GRPC_NATIVE;
    if (ing_parca_upload_decode(kind, body, len, data[0] & 4 ? "gzip" : NULL, a, &u, &st) == 0) {
        if (!u.build_id || u.file.len > FUZZ_MAX_FILE)
            abort();
        char id[LC_BUILD_ID_HEX_MAX + 1];
        if (lc_build_id_normalize(u.build_id, id, &st) == 0)
            check_elf(u.file.data, u.file.len, id);
    } else if (st.code == LC_CODE_OK) {
        abort();
    }
    lc_buf_fini(&u.file);
    lc_arena_free(a);
    return 0;
}
