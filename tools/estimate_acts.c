/* SPDX-License-Identifier: MIT */
#include "tools/estimate_acts.h"
#include "tools/bench_common.h"
#include "gpt2_attention.h"

#include <stdio.h>

enum { N_ROWS = 4 };
static const char *const names[N_ROWS] = {"none", "selective", "full", "full+offload"};
static const int policies[N_ROWS] = {GPT2_KEEP_ALL, GPT2_SELECTIVE, GPT2_FULL, GPT2_FULL_OFFLOAD};

typedef struct act_row {
    uint64_t model;        /* the model's allocation: activations and gradient scratch */
    uint64_t per_block;    /* of it, what each block keeps to its backward */
    uint64_t store_home;   /* full+offload: the blocks' inputs in host memory or on NVMe */
    uint64_t store_device; /* full+offload: the store's device buffers at most */
    uint64_t device_total; /* with the parameters' peak */
    int largest_batch;     /* at this sequence, within the budget (0: none fits) */
} act_row;

static uint64_t store_device(const est_acts_in *in, int policy, int rows)
{
    if (policy != GPT2_FULL_OFFLOAD)
        return 0;
    int held = in->prefetch_layers + 1 < in->c.layers ? in->prefetch_layers + 1 : in->c.layers;
    return (uint64_t)held * gpt2_checkpoint_bytes_as(&in->c, rows, in->seq, in->act_bytes);
}

static uint64_t device_total(const est_acts_in *in, int policy, int rows)
{
    return in->params_peak + in->bf16_scratch +
           gpt2_activation_bytes_as(&in->c, rows, in->seq, policy, in->att_keep, in->act_bytes,
                                    in->fused_dgelu) +
           store_device(in, policy, rows);
}

static act_row row_of(const est_acts_in *in, int policy)
{
    act_row r = {0};
    r.model = gpt2_activation_bytes_as(&in->c, in->rows, in->seq, policy, in->att_keep,
                                       in->act_bytes, in->fused_dgelu);
    gpt2_config one_less = in->c;
    one_less.layers--;
    r.per_block = r.model - gpt2_activation_bytes_as(&one_less, in->rows, in->seq, policy,
                                                     in->att_keep, in->act_bytes, in->fused_dgelu);
    if (policy == GPT2_FULL_OFFLOAD)
        r.store_home = (uint64_t)in->c.layers *
                       gpt2_checkpoint_bytes_as(&in->c, in->rows, in->seq, in->act_bytes);
    r.store_device = store_device(in, policy, in->rows);
    r.device_total = device_total(in, policy, in->rows);
    int lo = 0, hi = 1 << 20; /* the bytes grow with the batch: the largest that fits */
    while (lo < hi) {
        int mid = lo + (hi - lo + 1) / 2;
        if (device_total(in, policy, mid) <= in->budget)
            lo = mid;
        else
            hi = mid - 1;
    }
    r.largest_batch = lo;
    return r;
}

/* Whether the trainer's attention keeps T floats a head rather than T x T. */
static int keeps_lse(const est_acts_in *in)
{
    return gpt2_att_floats(in->att_keep, 1, 2, in->c.channels, in->c.heads) ==
           2 * (size_t)in->c.heads;
}

/* The per-layer figure of the literature, 16-bit with dropout masks: s b h (34 + 5 a s / h). */
static double formula(const est_acts_in *in)
{
    double s = in->seq, b = in->rows, h = in->c.channels, a = in->c.heads;
    return s * b * h * (34.0 + 5.0 * a * s / h);
}

/* Whether the batch fits the device budget, and with which policies: the one that keeps the
 * most activations on the device among those that fit (the least recomputation and traffic),
 * else the least device total and how far it is over. */
static void print_verdict(const est_acts_in *in)
{
    char a[32], b[32];
    int best = -1, least = 0;
    act_row rows[N_ROWS];
    for (int k = 0; k < N_ROWS; k++) {
        rows[k] = row_of(in, policies[k]);
        if (best < 0 && rows[k].device_total <= in->budget)
            best = k;
        if (rows[k].device_total < rows[least].device_total)
            least = k;
    }
    if (best >= 0) {
        printf("  batch %d x %d fits the device budget with --checkpoint-activations %s%s: "
               "device total %s of %s (parameters on %s)\n",
               in->rows, in->seq, policies[best] == GPT2_FULL_OFFLOAD ? "full" : names[best],
               policies[best] == GPT2_FULL_OFFLOAD ? " (and --offload-activations host|nvme)" : "",
               bench_fmt_bytes(rows[best].device_total, a, sizeof a),
               bench_fmt_bytes(in->budget, b, sizeof b), in->placement);
        return;
    }
    printf("  batch %d x %d does not fit the device budget with any policy: the least is %s, "
           "device total %s of %s (parameters on %s)%s\n",
           in->rows, in->seq, names[least], bench_fmt_bytes(rows[least].device_total, a, sizeof a),
           bench_fmt_bytes(in->budget, b, sizeof b), in->placement,
           in->act_bytes == 2 ? ""
                              : "; fp32 activations: the GPU trainer's bf16 ones (--precision "
                                "bf16 with the cuda device backend) would about halve the model's "
                                "share");
}

void est_acts_print(const est_acts_in *in)
{
    char a[32], b[32], c[32], d[32], e[32], f[32];
    printf("\nactivations per rank, batch %d x %d tokens, %s (the model's own allocation), "
           "device budget %s:\n",
           in->rows, in->seq,
           in->act_bytes == 2 ? "bf16 (fp32 layernorm statistics, logsumexp and logits)" : "fp32",
           bench_fmt_bytes(in->budget, f, sizeof f));
    printf("  %-13s %12s %12s %14s %14s %14s  %s\n", "policy", "model", "per block", "store (off)",
           "store (device)", "device total", "largest batch at this seq");
    for (int k = 0; k < N_ROWS; k++) {
        act_row r = row_of(in, policies[k]);
        printf("  %-13s %12s %12s %14s %14s %14s  %d\n", names[k],
               bench_fmt_bytes(r.model, a, sizeof a), bench_fmt_bytes(r.per_block, b, sizeof b),
               bench_fmt_bytes(r.store_home, c, sizeof c),
               bench_fmt_bytes(r.store_device, d, sizeof d),
               bench_fmt_bytes(r.device_total, e, sizeof e), r.largest_batch);
    }
    double fl = formula(in);
    printf("  (attention keeps %s)\n",
           keeps_lse(in) ? "each row's logsumexp, T floats a head: the GPU's fused attention"
                         : "the softmax, T x T floats a head: the CPU's ops, or a GPU's at head "
                           "sizes the fused attention does not take");
    printf("  (full+offload: each block's input in ztier's store, host memory or NVMe, %d layers "
           "brought back ahead; device total includes the parameters' peak of %s; the "
           "formula s*b*h*(34+5*a*s/h), 16-bit with dropout masks: %s per layer, %s for %d)\n",
           in->prefetch_layers, bench_fmt_bytes(in->params_peak, a, sizeof a),
           bench_fmt_bytes((uint64_t)fl, b, sizeof b),
           bench_fmt_bytes((uint64_t)(fl * in->c.layers), c, sizeof c), in->c.layers);
    if (in->bf16_scratch)
        printf("  (bf16.enabled: device total includes the trainer's fp32 copies of the bf16 "
               "layers, %llu bytes: the embedding's and one other layer's parameters and "
               "gradients%s)\n",
               (unsigned long long)in->bf16_scratch,
               in->att_keep == GPT2_ATT_LSE ? ", but for the blocks' weight matrices, which the "
                                              "GPU's bf16 GEMMs read and write the gradients of "
                                              "in 16 bits (--precision bf16, the default)"
                                            : "");
    print_verdict(in);
}

json_t *est_acts_json(const est_acts_in *in)
{
    json_t *rows = json_object();
    for (int k = 0; k < N_ROWS; k++) {
        act_row r = row_of(in, policies[k]);
        json_object_set_new(
            rows, names[k],
            json_pack("{s:I, s:I, s:I, s:I, s:I, s:i}", "model", (json_int_t)r.model, "per_block",
                      (json_int_t)r.per_block, "store_home", (json_int_t)r.store_home,
                      "store_device", (json_int_t)r.store_device, "device_total",
                      (json_int_t)r.device_total, "largest_batch", r.largest_batch));
    }
    return json_pack("{s:i, s:i, s:I, s:s, s:s, s:I, s:o}", "batch_per_rank", in->rows, "seq",
                     in->seq, "formula_per_layer_16bit", (json_int_t)formula(in), "attention_keeps",
                     keeps_lse(in) ? "logsumexp" : "softmax", "activation_dtype",
                     in->act_bytes == 2 ? "bf16" : "fp32", "bf16_scratch",
                     (json_int_t)in->bf16_scratch, "policies", rows);
}
