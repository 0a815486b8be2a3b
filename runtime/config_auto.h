/* SPDX-License-Identifier: MIT */
/* The record of keys given as "auto" with no value since (zt_config.auto_keys), read and
 * pruned by the rules that derive such a key's value from other keys (the schedule's, the
 * batch sizes'). */
#ifndef ZT_RUNTIME_CONFIG_AUTO_H
#define ZT_RUNTIME_CONFIG_AUTO_H

#include "runtime/config.h"

#include <stddef.h>

/* 1 when the key whose field is at `offset` of zt_config is on the record. */
int zt_config_still_auto(const zt_config *cfg, size_t offset);

/* Takes it off the record (a value was given, or derived from other keys). */
void zt_config_forget_auto(zt_config *cfg, size_t offset);

#endif
