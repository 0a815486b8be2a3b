/* SPDX-License-Identifier: MIT */
/* How tests/data/ckpt-v2 was made (not built by CMake: this source, built against ztier 1.3.0's
 * checkpoint code, main at 2eedf1c, whose format is version 2, wrote the checkpoint; built
 * against a later ztier it would write that version's format). A GPT-2 of one block of 8
 * channels (vocabulary 8, context 4), initialised from seed 7, saved at step 0 on one rank:
 *   make_ckpt_v2 <root>        (then `ztier checkpoint export <root> --format safetensors
 *                               --out ckpt-v2.safetensors` with the same ztier, from the
 *                               folder holding <root>, gives tests/data/ckpt-v2.safetensors) */
#include "gpt2_ztier.h"

#include <stdio.h>

static const char *const config =
    "{\"zero_optimization\": {\"stage\": 3, \"stage3_param_persistence_threshold\": 0}, "
    "\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 0.001}}}";

int main(int argc, char **argv)
{
    if (argc != 2)
        return fprintf(stderr, "usage: make_ckpt_v2 <root>\n"), 2;
    gpt2_config c = {
        .vocab = 8, .padded_vocab = 64, .max_seq = 4, .layers = 1, .heads = 1, .channels = 8};
    zt_runtime *rt = NULL;
    gpt2_ztier g;
    zt_status st = zt_runtime_create(NULL, config, &rt);
    if (st == ZT_OK)
        st = gpt2_ztier_register(&g, rt, &c, 7);
    if (st == ZT_OK)
        st = zt_runtime_commit(rt);
    if (st == ZT_OK)
        st = zt_checkpoint_save(rt, argv[1]);
    if (st != ZT_OK)
        fprintf(stderr, "%s\n", rt ? zt_last_error(rt) : zt_status_string(st));
    zt_runtime_destroy(rt);
    return st != ZT_OK;
}
