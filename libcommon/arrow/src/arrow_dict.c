/*
 * arrow_dict.c — finding a stream's current dictionary by id: what a batch
 * (arrow_batch.c) needs of the dictionaries that arrow_stream.c keeps, in a
 * file of its own so the two do not call each other in a circle.
 */
#include "arrow_int.h"

lc_arrow_dict_t *arrow_dict_find(const lc_arrow_stream_t *s, int64_t id)
{
    for (size_t i = 0; i < s->n_dicts; i++)
        if (s->dict_fields[i]->dict_id == id)
            return s->dicts[i];
    return NULL;
}
