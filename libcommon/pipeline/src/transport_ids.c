/*
 * transport_ids.c — ingest ids and partitions, one rule for every producer,
 * and what a consumer's reject errors mean (lc/transport.h).
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "lc/transport.h"

#define PARTITION_SEED 0x9e3779b97f4a7c15ULL

int lc_ingest_id_new(uint8_t id[LC_INGEST_ID_BYTES])
{
    size_t got = 0;
    while (got < LC_INGEST_ID_BYTES) {
        ssize_t n = getrandom(id + got, LC_INGEST_ID_BYTES - got, 0);
        if (n < 0 && errno != EINTR)
            return -errno;
        got += n > 0 ? (size_t)n : 0;
    }
    return 0;
}

const char *lc_transport_reject_text(int reject_err)
{
    switch (reject_err) {
    case LC_ECORRUPT:
        return "the message cannot be decoded (stream entry, IngestProfile or pprof)";
    case LC_ETOOBIG:
        return "the store refused it: a size over its limit";
    case LC_EUNSUPPORTED:
        return "the store refused it: unsupported";
    case LC_EINPUT:
        return "the store refused it: a value out of range (e.g. a total over int64) or a "
               "malformed field";
    default:
        return lc_strerror(reject_err);
    }
}

uint32_t lc_transport_partition(const char *tenant, const lc_labels_t *ls, uint32_t partitions)
{
    uint64_t h = lc_labels_hash(ls) ^ lc_hash64(tenant, strlen(tenant), PARTITION_SEED);
    return partitions > 1 ? (uint32_t)(h % partitions) : 0;
}
