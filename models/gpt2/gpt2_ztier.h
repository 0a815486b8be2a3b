/* SPDX-License-Identifier: MIT */
/* GPT-2 on ztier: parameter registration, the gpt2_source that fetches and releases each
 * layer through the runtime (fp32 or bf16 parameters; compute is fp32), and weight export
 * (llm.c model file, safetensors). Uses only ztier.h. */
#ifndef ZT_GPT2_ZTIER_H
#define ZT_GPT2_ZTIER_H

#include "gpt2_model.h"
#include "gpt2_ops.h"
#include "ztier.h"

/* With bf16 parameters (bf16.enabled), a fetched layer is widened to fp32 for the fp32
 * kernels where the model computes (the ops' bf16_widen: on a GPU, a kernel on the model's
 * stream reading ztier's 16-bit device buffer), and in backward its fp32 gradients are added
 * into ztier's 16-bit gradient buffer (bf16_narrow_add) before the release, so 16 bits cross
 * the bus each way. Where the ops' matmuls take bf16 weights (matmul_forward_w16: the GPU with
 * bf16 matmuls), a block's four weight matrices are not widened: the GEMMs read ztier's 16-bit
 * device buffers as they are (gpt2_source.weights16), and their gradients go straight into
 * ztier's 16-bit gradient buffers (accumulated in fp32 by the GEMM, rounded once). One slot of fp32 scratch for the embedding (held through backward), one
 * for whichever other layer is held. */
typedef struct gpt2_widened {
    float *buf;     /* the layer's fp32 parameters, then (backward) its fp32 gradients */
    int64_t floats; /* buf's size */
    int held, backward;
    int w16;      /* a block whose weight matrices the GEMMs read in 16 bits, not widened */
    float *grads; /* in buf: the layer's fp32 gradients, after its widened parameters */
    zt_layer_view view;
} gpt2_widened;

typedef struct gpt2_ztier {
    zt_runtime *rt;
    gpt2_config c;
    int *layer_ids;                      /* per model layer */
    int (*param_ids)[GPT2_BLOCK_PARAMS]; /* per model layer */
    gpt2_ops ops;         /* where the model computes (gpt2_ztier_compute_on; the CPU's) */
    gpt2_widened wide[2]; /* bf16: the embedding's fp32 scratch, every other layer's */
    size_t wide_bytes;    /* their size in the ops' memory */
    zt_status last;       /* status of the last failed call */
    int inference;        /* forward fetches use ZT_INFERENCE (evaluation outside training) */
    /* The model's stream (a cudaStream_t with the cuda backend): fetch and release are
     * stream-ordered on it (zt_fetch_async / zt_release_async). NULL: the blocking calls. */
    void *stream;
    char error[256]; /* why the source failed when ztier itself did not ("" otherwise) */
} gpt2_ztier;

/* Registers every layer and parameter (GPT-2 initialisation from `seed`), and the shape the
 * parameters do not show as checkpoint meta values (gpt2.layers, .heads, .channels, .max_seq,
 * .vocab, .padded_vocab; zt_checkpoint_meta_set). */
zt_status gpt2_ztier_register(gpt2_ztier *g, zt_runtime *rt, const gpt2_config *c, uint64_t seed);
/* After zt_checkpoint_load: ZT_ERR_ARGUMENT (gpt2_ztier_error says which) when the checkpoint
 * recorded another head count or vocabulary than this model's; ZT_OK otherwise, and for a
 * checkpoint that recorded none. */
zt_status gpt2_ztier_check_loaded(gpt2_ztier *g);
/* Frees the bf16 scratch (with the ops it came from: call gpt2_ztier_compute_on(g, NULL)
 * first where those ops are destroyed before g). */
void gpt2_ztier_free(gpt2_ztier *g);
/* The ops the model computes with (a copy is kept; NULL: the CPU's, the default), which
 * bf16 layers are widened with, into scratch from their allocator (made at the first bf16
 * fetch, gpt2_ztier_scratch_bytes). A GPU stream (g->stream) with bf16 parameters needs the
 * GPU's ops here. Frees the scratch made with the ops before: call it with NULL before
 * destroying GPU ops. */
void gpt2_ztier_compute_on(gpt2_ztier *g, const gpt2_ops *ops);
/* Bytes of the fp32 scratch bf16 layers are widened into (0 before the first bf16 fetch),
 * in the ops' memory: device memory for the GPU's ops. */
size_t gpt2_ztier_scratch_bytes(const gpt2_ztier *g);
/* What that scratch comes to for model c (the embedding's parameters and gradients and the
 * largest block's, in fp32), before any runtime exists: for sizing a bf16 run. _on with
 * weights16 set: for ops whose GEMMs read the blocks' weight matrices in 16 bits
 * (matmul_*_w16: the GPU with bf16 matmuls), which are not widened and whose gradients go
 * straight to ztier's 16-bit buffers, so a block's slot holds only its other parameters and
 * their gradients. */
size_t gpt2_bf16_scratch_bytes(const gpt2_config *c);
size_t gpt2_bf16_scratch_bytes_on(const gpt2_config *c, int weights16);
/* A source whose get/put are zt_fetch/zt_release (errors: the zt_status, also in g->last).
 * Parameters must be ZT_F32 or ZT_BF16 (widened to fp32 with g's ops); any other dtype (fp16)
 * fails with ZT_ERR_UNSUPPORTED and a message naming the parameter. */
gpt2_source gpt2_ztier_source(gpt2_ztier *g);
/* GPT2_FULL_OFFLOAD through ztier's activation checkpoints: registers each block's
 * checkpoint of a [B,T] batch (before commit), and a store whose save/load/free are
 * zt_act_save/_load/_free (the _async forms on g->stream when it is set); a forward with
 * g->inference set saves nothing (no backward follows it). */
zt_status gpt2_ztier_register_acts(gpt2_ztier *g, int B, int T);
/* ... for the model's activations of act_bytes each (gpt2_ops' act_bytes: 2 on the GPU in bf16,
 * known before the ops exist from the device and precision); the above: 4, fp32. */
zt_status gpt2_ztier_register_acts_as(gpt2_ztier *g, int B, int T, int act_bytes);
gpt2_act_store gpt2_ztier_act_store(gpt2_ztier *g);
/* Why the last get/put failed: the source's own message, else zt_last_error(). */
const char *gpt2_ztier_error(const gpt2_ztier *g);

/* Writes fp32 weights in llm.c's model format (magic 20240326, version 3) or as
 * safetensors. Collective under MPI (every rank calls it); rank 0 writes the file beside path
 * (path.XXXXXX), syncs it and renames it over path, so a failed export (a full disk) leaves
 * the file that was there as it was and no temporary (a path that is no regular file, such as
 * a device, is written in place). When rank 0
 * cannot create or write it, rank 0 returns ZT_ERR_IO (gpt2_ztier_error names the file and
 * the cause) after taking part in every gather, so the other ranks, which return ZT_OK, never
 * wait for it. */
zt_status gpt2_export_llmc(gpt2_ztier *g, const char *path);
zt_status gpt2_export_safetensors(gpt2_ztier *g, const char *path);

/* Sets every parameter from an llm.c model file (version 3 fp32 or 5 bf16) whose shape is
 * this model's (max_seq, vocab, layers, heads, channels); the optimizer state is untouched.
 * Collective: every rank reads the file. A file that cannot be read, has another shape or
 * another length fails on every rank (ZT_ERR_ARGUMENT; gpt2_ztier_error names the file and
 * the mismatch) and leaves the parameters it had not reached as they were. */
zt_status gpt2_import_llmc(gpt2_ztier *g, const char *path);

#endif
