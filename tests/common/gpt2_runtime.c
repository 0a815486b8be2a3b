/* SPDX-License-Identifier: MIT */
#include "gpt2_runtime.h"

zt_status gpt2_test_runtime(const char *config, const gpt2_config *c, uint64_t seed,
                            zt_runtime **rt, gpt2_ztier *g)
{
    *rt = NULL;
    zt_status st = zt_runtime_create(NULL, config, rt);
    if (st == ZT_OK)
        st = gpt2_ztier_register(g, *rt, c, seed);
    if (st == ZT_OK)
        st = zt_runtime_commit(*rt);
    return st;
}
