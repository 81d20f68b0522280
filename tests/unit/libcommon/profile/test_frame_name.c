/*
 * test_frame_name.c — the name of a frame without a function (issue 31):
 * "<base name of the mapping file>+0x<file offset>", the build id when the
 * file is unnamed, the bare address without a module, and a long module cut
 * on a character boundary. Expected names are written out by hand.
 */
#include <string.h>

#include "lc/frame_name.h"
#include "lc_test.h"

static lc_frame_mapping_t mapping(const char *file, const char *build_id, uint64_t start,
                                  uint64_t offset)
{
    return (lc_frame_mapping_t){.file = file,
                                .file_len = strlen(file),
                                .build_id = build_id,
                                .build_id_len = strlen(build_id),
                                .memory_start = start,
                                .file_offset = offset};
}

static void expect(const lc_frame_mapping_t *m, uint64_t address, const char *want)
{
    char out[LC_FRAME_NAME_MAX];
    size_t len = lc_frame_address_name(m, address, out);
    LC_ASSERT_STR_EQ(out, want);
    LC_ASSERT_EQ(len, strlen(want));
}

static void test_module_and_offset(void)
{
    /* libc mapped at 0x7f0000028000 from file offset 0x28000: an address
     * 0x1234 into the mapping is at 0x29234 in the file */
    lc_frame_mapping_t libc =
        mapping("/usr/lib/x86_64-linux-gnu/libc.so.6", "deadbeef", 0x7f0000028000, 0x28000);
    expect(&libc, 0x7f0000029234, "libc.so.6+0x29234");
    lc_frame_mapping_t bare = mapping("app", "", 0x400000, 0);
    expect(&bare, 0x401000, "app+0x1000");
    lc_frame_mapping_t vdso = mapping("[vdso]", "", 0x7ffd000, 0);
    expect(&vdso, 0x7ffd0a0, "[vdso]+0xa0");
}

static void test_fallbacks(void)
{
    lc_frame_mapping_t no_file = mapping("", "2f1a9c", 0x1000, 0x10);
    expect(&no_file, 0x1800, "2f1a9c+0x810");
    lc_frame_mapping_t dir_only = mapping("/opt/", "", 0x1000, 0);
    expect(&dir_only, 0x1800, "0x1800"); /* no module name at all: the address */
    expect(NULL, 0xffffffff81000010ULL, "0xffffffff81000010");
    lc_frame_mapping_t below = mapping("app", "", 0x5000, 0x100);
    expect(&below, 0x20, "app+0x20"); /* outside the mapping: taken as an offset */
}

static void test_long_module_cut_on_a_character(void)
{
    char file[LC_FRAME_MODULE_MAX + 8];
    memset(file, 'a', LC_FRAME_MODULE_MAX - 1);
    memcpy(file + LC_FRAME_MODULE_MAX - 1, "\xc3\xa9tail", sizeof("\xc3\xa9tail"));
    lc_frame_mapping_t m = mapping(file, "", 0, 0);
    char out[LC_FRAME_NAME_MAX];
    size_t len = lc_frame_address_name(&m, 0xabc, out);
    /* the two-byte character would straddle the cut: it goes whole */
    LC_ASSERT_EQ(len, (LC_FRAME_MODULE_MAX - 1) + strlen("+0xabc"));
    LC_ASSERT_STR_EQ(out + LC_FRAME_MODULE_MAX - 1, "+0xabc");
    memset(file, 'b', sizeof(file) - 1);
    file[sizeof(file) - 1] = '\0';
    m = mapping(file, "", 0, 0);
    len = lc_frame_address_name(&m, UINT64_MAX, out);
    LC_ASSERT_EQ(len, LC_FRAME_MODULE_MAX + strlen("+0xffffffffffffffff"));
    LC_CHECK(len < LC_FRAME_NAME_MAX);
}

LC_TEST_MAIN(test_module_and_offset, test_fallbacks, test_long_module_cut_on_a_character)
