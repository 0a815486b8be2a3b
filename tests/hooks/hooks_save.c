/* SPDX-License-Identifier: MIT */
/* Saves a checkpoint of a one-parameter model; the public API only. Linked against the
 * shipped libztier.so it saves whatever $ZT_TEST_CRASH_AT says; linked against the tests'
 * archive (the hooks compiled in) it is killed at the crash point that names.
 * usage: hooks_save <dir> */
#include "ztier.h"

#include <stdint.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s <dir>\n", argv[0]);
        return 2;
    }
    const char *config = "{\"zero_optimization\": {\"offload_param\": {\"device\": \"cpu\"},"
                         " \"offload_optimizer\": {\"device\": \"cpu\"},"
                         " \"stage3_param_persistence_threshold\": 0},"
                         " \"ztier\": {\"hbm_capacity\": \"16M\"}}";
    zt_runtime *rt = NULL;
    int layer = -1, param = -1;
    const int64_t shape[1] = {256};
    zt_status st = zt_runtime_create(NULL, config, &rt);
    if (st == ZT_OK)
        st = zt_layer_add(rt, "layer", &layer);
    if (st == ZT_OK)
        st = zt_param_add(rt, layer, "w", shape, 1, NULL, &param);
    if (st == ZT_OK)
        st = zt_runtime_commit(rt);
    if (st == ZT_OK)
        st = zt_checkpoint_save(rt, argv[1]);
    if (st != ZT_OK) {
        fprintf(stderr, "hooks_save: %s: %s\n", zt_status_string(st), zt_last_error(rt));
        zt_runtime_destroy(rt);
        return 1;
    }
    zt_runtime_destroy(rt);
    printf("saved to %s\n", argv[1]);
    return 0;
}
