/* SPDX-License-Identifier: MIT */
/* A runtime with a GPT-2 model registered (seed: its initial values) and committed, for tests
 * that are not cmocka's (the checkpoint damage and version 2 tests). ZT_OK, or the status;
 * *rt is set either way (NULL when create failed) and is the caller's to destroy. */
#ifndef ZT_TESTS_GPT2_RUNTIME_H
#define ZT_TESTS_GPT2_RUNTIME_H

#include "gpt2_ztier.h"
#include "ztier.h"

zt_status gpt2_test_runtime(const char *config, const gpt2_config *c, uint64_t seed,
                            zt_runtime **rt, gpt2_ztier *g);

#endif
