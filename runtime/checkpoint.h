/* SPDX-License-Identifier: MIT */
/* Saving and restoring every rank's optimizer state (see checkpoint.c for the format). */
#ifndef ZT_RUNTIME_CHECKPOINT_H
#define ZT_RUNTIME_CHECKPOINT_H

#include "runtime/runtime.h"

/* Collective. No layer may be held. */
zt_status zt_rt_checkpoint_save(zt_runtime *rt, const char *dir);
/* Collective. A damaged or foreign checkpoint is refused before any state changes. */
zt_status zt_rt_checkpoint_load(zt_runtime *rt, const char *dir);

#endif
