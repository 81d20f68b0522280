/*
 * fuzz_pbstrings.c — lc_pb_strings_check on arbitrary bytes, against the
 * descriptors of a Push request (strings nested two messages deep) and a
 * settings Set request. It must stay inside the bytes it was given (a heap
 * copy of exactly their size), and answer 0 or -1 with invalid_argument;
 * an accepted Push request that protobuf-c unpacks has every label string
 * set. (Whether a NUL is found is checked by test_pbstrings.c, whose
 * inputs are built with known strings.)
 */
#include <stdlib.h>
#include <string.h>

#include "lc/alloc.h"
#include "lc/pbstrings.h"
#include "push/v1/push.pb-c.h"
#include "settings/v1/setting.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const ProtobufCMessageDescriptor *desc = (data[0] & 1)
                                                 ? &settings__v1__set_settings_request__descriptor
                                                 : &push__v1__push_request__descriptor;
    uint8_t *body = lc_xmalloc(size);
    memcpy(body, data + 1, size - 1);
    lc_status_t st = {0};
    int rc = lc_pb_strings_check(desc, body, size - 1, &st);
    if (rc != 0 && (rc != -1 || st.code != LC_CODE_INVALID_ARGUMENT))
        abort();
    if (rc == 0 && desc == &push__v1__push_request__descriptor) {
        Push__V1__PushRequest *r = push__v1__push_request__unpack(NULL, size - 1, body);
        if (r) {
            for (size_t i = 0; i < r->n_series; i++)
                for (size_t j = 0; j < r->series[i]->n_labels; j++) {
                    const Types__V1__LabelPair *l = r->series[i]->labels[j];
                    if (!l->name || !l->value)
                        abort();
                }
            push__v1__push_request__free_unpacked(r, NULL);
        }
    }
    lc_free(body);
    return 0;
}
