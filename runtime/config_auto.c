/* SPDX-License-Identifier: MIT */
/* The record of "auto" keys (aliases share their field's offset, so one entry serves all). */
#include "runtime/config_auto.h"
#include "runtime/config_keys.h"

int zt_config_still_auto(const zt_config *cfg, size_t offset)
{
    for (int i = 0; i < cfg->n_auto_keys; i++)
        if (zt_config_keys[cfg->auto_keys[i]].offset == offset)
            return 1;
    return 0;
}

void zt_config_forget_auto(zt_config *cfg, size_t offset)
{
    for (int i = 0; i < cfg->n_auto_keys; i++)
        if (zt_config_keys[cfg->auto_keys[i]].offset == offset)
            cfg->auto_keys[i--] = cfg->auto_keys[--cfg->n_auto_keys];
}
