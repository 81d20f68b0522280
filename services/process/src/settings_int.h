/*
 * settings_int.h — the settings table of process.h, for settings.c and
 * main.c of this room only.
 */
#ifndef EMBER_SETTINGS_INT_H
#define EMBER_SETTINGS_INT_H

#include "ember_process.h"
#include "lc/cfg.h"

typedef struct ember_setting_s {
    unsigned bins; /* the ember_bin_t that take it */
    lc_cfg_entry_t entry;
} ember_setting_t;

extern const ember_setting_t ember_settings_table[];
extern const size_t ember_settings_table_len;

/* Copies the entries bin takes, in table order, into out; returns how many. */
size_t ember_settings_select(ember_bin_t bin, lc_cfg_entry_t *out, size_t cap);

#endif
