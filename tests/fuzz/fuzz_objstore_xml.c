/*
 * fuzz_objstore_xml.c — the bounded reader of S3's XML answers
 * (lc/objstore_xml.h). Checks that every element text handed out is within
 * the cap and NUL-terminated at its length, and that lc_xml_first agrees with the first lc_xml_each
 * call.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lc/objstore_xml.h"

typedef struct {
    char first[LC_XML_TEXT_MAX + 1];
    int n;
} seen_t;

static int check_text(void *arg, const char *text, size_t len)
{
    seen_t *s = arg;
    if (len > LC_XML_TEXT_MAX || text[len] != '\0')
        abort();
    if (s->n++ == 0)
        memcpy(s->first, text, len + 1);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[] = {"Key", "IsTruncated", "NextContinuationToken", "UploadId",
                                        "Code"};
    const char *xml = (const char *)data;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        seen_t seen = {.n = 0};
        int rc = lc_xml_each(xml, size, names[i], check_text, &seen);
        char first[LC_XML_TEXT_MAX + 1];
        int frc = lc_xml_first(xml, size, names[i], first, sizeof first);
        if (rc == 0 && seen.n > 0 && (frc != 0 || strcmp(first, seen.first) != 0))
            abort();
        if (rc == 0 && seen.n == 0 && frc != LC_ENOTFOUND)
            abort();
    }
    return 0;
}
