/*
 * ui_assets.h — the web UI's files, compiled in (generated ui_assets.c).
 */
#ifndef UI_ASSETS_H
#define UI_ASSETS_H

#include <stddef.h>

typedef struct ui_asset_s {
    const char *name; /* "index.html" or a hashed name "app.<12 hex>.js" */
    const char *content_type;
    const unsigned char *raw;
    size_t raw_len;
    const unsigned char *gz; /* the same bytes, gzip-compressed at build time */
    size_t gz_len;
} ui_asset_t;

extern const ui_asset_t ui_assets[];
extern const size_t ui_n_assets;

#endif
