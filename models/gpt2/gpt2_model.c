/* SPDX-License-Identifier: MIT */
#include "gpt2_model.h"
#include "gpt2_attention.h"
#include "gpt2_ops.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void set_shape(gpt2_config *c, int layers, int heads, int channels, int max_seq, int vocab)
{
    c->layers = layers;
    c->heads = heads;
    c->channels = channels;
    c->max_seq = max_seq;
    c->vocab = vocab > 0 ? vocab : 50257;
    c->padded_vocab = (c->vocab + 63) / 64 * 64;
}

/* "d<L>c<C>": L layers of C channels (a multiple of 64) in heads of 64, context 1024. */
static int custom_shape(const char *name, int *layers, int *channels)
{
    char *end;
    if (name[0] != 'd' || name[1] < '1' || name[1] > '9')
        return -1;
    long l = strtol(name + 1, &end, 10);
    if (*end != 'c' || end[1] < '1' || end[1] > '9')
        return -1;
    long ch = strtol(end + 1, &end, 10);
    if (*end || l > 1024 || ch > 65536 || ch % 64)
        return -1;
    *layers = (int)l, *channels = (int)ch;
    return 0;
}

int gpt2_config_named(const char *name, int vocab, gpt2_config *c)
{
    static const struct {
        const char *name;
        int layers, heads, channels, max_seq;
    } table[] = {
        {"tiny", 2, 2, 32, 16},      {"d12", 12, 12, 768, 1024},  {"d24", 24, 16, 1024, 1024},
        {"d36", 36, 20, 1280, 1024}, {"d48", 48, 25, 1600, 1024},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(name, table[i].name) == 0) {
            set_shape(c, table[i].layers, table[i].heads, table[i].channels, table[i].max_seq,
                      vocab);
            return 0;
        }
    int layers, channels;
    if (custom_shape(name, &layers, &channels) != 0)
        return -1;
    set_shape(c, layers, channels / 64, channels, 1024, vocab);
    return 0;
}

int gpt2_layer_count(const gpt2_config *c) { return c->layers + 2; }

int gpt2_layer_param_count(const gpt2_config *c, int layer)
{
    return layer == 0 || layer == c->layers + 1 ? 2 : GPT2_BLOCK_PARAMS;
}

void gpt2_layer_name(const gpt2_config *c, int layer, char *out, size_t len)
{
    if (layer == 0)
        snprintf(out, len, "embed");
    else if (layer == c->layers + 1)
        snprintf(out, len, "ln_f");
    else
        snprintf(out, len, "h.%d", layer - 1);
}

static void set_info(gpt2_param_info *p, const char *prefix, const char *name, int64_t d0,
                     int64_t d1, float std)
{
    snprintf(p->name, sizeof p->name, "%s%s", prefix, name);
    p->ndim = d1 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1;
    p->init_std = std;
}

void gpt2_param_info_get(const gpt2_config *c, int layer, int k, gpt2_param_info *p)
{
    int64_t C = c->channels;
    if (layer == 0) {
        if (k == 0)
            set_info(p, "", "wte", c->padded_vocab, C, 0.02f);
        else /* 0.01 as in OpenAI's GPT-2 (model.py); wte and the weights use 0.02 */
            set_info(p, "", "wpe", c->max_seq, C, 0.01f);
        return;
    }
    if (layer == c->layers + 1) {
        set_info(p, "ln_f.", k == 0 ? "weight" : "bias", C, 0, k == 0 ? -1.0f : 0.0f);
        return;
    }
    char prefix[32];
    snprintf(prefix, sizeof prefix, "h.%d.", layer - 1);
    float proj_std = 0.02f / sqrtf(2.0f * (float)c->layers); /* GPT-2's residual scaling */
    switch (k) {
    case P_LN1W:
        set_info(p, prefix, "ln_1.weight", C, 0, -1.0f);
        break;
    case P_LN1B:
        set_info(p, prefix, "ln_1.bias", C, 0, 0.0f);
        break;
    case P_QKVW:
        set_info(p, prefix, "attn.c_attn.weight", 3 * C, C, 0.02f);
        break;
    case P_QKVB:
        set_info(p, prefix, "attn.c_attn.bias", 3 * C, 0, 0.0f);
        break;
    case P_ATTW:
        set_info(p, prefix, "attn.c_proj.weight", C, C, proj_std);
        break;
    case P_ATTB:
        set_info(p, prefix, "attn.c_proj.bias", C, 0, 0.0f);
        break;
    case P_LN2W:
        set_info(p, prefix, "ln_2.weight", C, 0, -1.0f);
        break;
    case P_LN2B:
        set_info(p, prefix, "ln_2.bias", C, 0, 0.0f);
        break;
    case P_FCW:
        set_info(p, prefix, "mlp.c_fc.weight", 4 * C, C, 0.02f);
        break;
    case P_FCB:
        set_info(p, prefix, "mlp.c_fc.bias", 4 * C, 0, 0.0f);
        break;
    case P_PROJW:
        set_info(p, prefix, "mlp.c_proj.weight", C, 4 * C, proj_std);
        break;
    default:
        set_info(p, prefix, "mlp.c_proj.bias", C, 0, 0.0f);
        break;
    }
}

int64_t gpt2_num_params(const gpt2_config *c)
{
    int64_t n = 0;
    for (int l = 0; l < gpt2_layer_count(c); l++)
        for (int k = 0; k < gpt2_layer_param_count(c, l); k++) {
            gpt2_param_info p;
            gpt2_param_info_get(c, l, k, &p);
            n += p.shape[0] * (p.ndim == 2 ? p.shape[1] : 1);
        }
    return n;
}

double gpt2_flops_per_token(const gpt2_config *c, int T)
{
    return 6.0 * (double)gpt2_num_params(c) + 6.0 * c->layers * (double)T * c->channels;
}

/* ---- activations ---- */

/* Activations and their gradients are stored in the ops' act_bytes a value (fp32, or bf16 on
 * the GPU in GPT2_BF16: the pointers below then address 16-bit values, read by the ops as
 * such); the layernorm statistics, attention's att and the logits stay fp32. */
typedef struct block_acts {
    float *ln1, *ln1_mean, *ln1_rstd; /* [B,T,C], [B,T], [B,T] */
    float *qkv;                       /* [B,T,3C] */
    float *atty;                      /* [B,T,C] attention output before its projection */
    float *att;                       /* [B,NH,T,T] softmax or [B,NH,T] lse (att_keep) */
    float *attproj, *res2;            /* [B,T,C] */
    float *ln2, *ln2_mean, *ln2_rstd; /* [B,T,C], [B,T], [B,T] */
    float *fch, *fch_gelu;            /* [B,T,4C] */
    float *fcproj, *res3;             /* [B,T,C]; res3 is the block's output */
} block_acts;

struct gpt2_model {
    gpt2_config c;
    int B, T;
    gpt2_ops ops;                     /* where it computes */
    int policy;                       /* gpt2_policy: what each block keeps for its backward */
    int att_keep;                     /* gpt2_att_keep: what attention keeps (the ops') */
    int act;                          /* bytes of a stored activation (the ops' act_bytes) */
    int fused_dgelu;                  /* the ops' matmul_dgelu_backward: no d_fcg */
    float *ln_scratch, *gelu_scratch; /* GPT2_SELECTIVE: their one buffer each */
    size_t activation_bytes;
    char *memory;   /* one allocation carved into every tensor below */
    float *encoded; /* [B,T,C] */
    block_acts *blocks;
    gpt2_act_store store;             /* GPT2_FULL_OFFLOAD: where each block's input waits */
    float *lnf, *lnf_mean, *lnf_rstd; /* [B,T,C], [B,T], [B,T] */
    float *probs;                     /* [B,T,Vp] logits, then probabilities, then dlogits */
    float *d_a, *d_b, *d_c, *d_d;     /* [B,T,C] gradient scratch */
    float *d_qkv, *d_fch, *d_fcg;     /* [B,T,3C], [B,T,4C], [B,T,4C] (unfused GELU only) */
    int *tokens, *targets;            /* [B,T] of the last forward, in the ops' memory */
};

/* The next tensor of n values of `bytes` each from base + *off (base NULL: only counted), at
 * an offset aligned for it: with 16-bit activations every tensor starts on 16 bytes; fp32
 * activations need no padding (the sizes of before, byte for byte). */
static float *carve_at(const gpt2_model *m, char *base, size_t *off, size_t n, size_t bytes)
{
    size_t align = m->act == 4 ? 4 : 16;
    *off = (*off + align - 1) / align * align;
    float *p = base ? (float *)(void *)(base + *off) : NULL;
    *off += n * bytes;
    return p;
}
/* CARVE: an activation (the ops' act bytes); CARVE_F32: fp32 whatever the activations */
#define CARVE(field, n) (field = carve_at(m, base, off, (n), (size_t)m->act))
#define CARVE_F32(field, n) (field = carve_at(m, base, off, (n), sizeof(float)))

/* A block's tensors from base + *off on (base NULL: only counted); under GPT2_SELECTIVE the
 * layernorm and GELU outputs are the shared scratch. */
static void carve_block(gpt2_model *m, block_acts *a, char *base, size_t *off)
{
    size_t BT = (size_t)m->B * m->T, C = (size_t)m->c.channels;
    size_t att = gpt2_att_floats(m->att_keep, m->B, m->T, m->c.channels, m->c.heads);
    if (m->policy == GPT2_SELECTIVE)
        a->ln1 = a->ln2 = m->ln_scratch, a->fch_gelu = m->gelu_scratch;
    else
        CARVE(a->ln1, BT * C), CARVE(a->ln2, BT * C), CARVE(a->fch_gelu, BT * 4 * C);
    CARVE_F32(a->ln1_mean, BT), CARVE_F32(a->ln1_rstd, BT);
    CARVE(a->qkv, BT * 3 * C), CARVE(a->atty, BT * C), CARVE_F32(a->att, att);
    CARVE(a->attproj, BT * C), CARVE(a->res2, BT * C);
    CARVE_F32(a->ln2_mean, BT), CARVE_F32(a->ln2_rstd, BT);
    CARVE(a->fch, BT * 4 * C);
    CARVE(a->fcproj, BT * C), CARVE(a->res3, BT * C);
}

/* Points every activation tensor into `base` (NULL: only counts) and returns the bytes used,
 * so the size of the one allocation and its carving can never disagree. */
static size_t carve(gpt2_model *m, char *base)
{
    size_t BT = (size_t)m->B * m->T, C = (size_t)m->c.channels, at = 0, *off = &at;
    CARVE(m->encoded, BT * C);
    if (m->policy ==
        GPT2_SELECTIVE) /* one buffer for every layer's layernorm output, one for GELU's */
        CARVE(m->ln_scratch, BT * C), CARVE(m->gelu_scratch, BT * 4 * C);
    if (m->policy == GPT2_FULL) { /* one block's tensors, shared; each block's output its own */
        block_acts shared;
        carve_block(m, &shared, base, off);
        for (int l = 0; l < m->c.layers; l++) {
            m->blocks[l] = shared;
            CARVE(m->blocks[l].res3, BT * C);
        }
    } else if (m->policy == GPT2_FULL_OFFLOAD) { /* ... and two outputs, alternating */
        block_acts shared;
        float *out[2];
        carve_block(m, &shared, base, off);
        CARVE(out[0], BT * C), CARVE(out[1], BT * C);
        for (int l = 0; l < m->c.layers; l++) {
            m->blocks[l] = shared;
            m->blocks[l].res3 = out[l % 2];
        }
    } else {
        for (int l = 0; l < m->c.layers; l++)
            carve_block(m, &m->blocks[l], base, off);
    }
    CARVE(m->lnf, BT * C), CARVE_F32(m->lnf_mean, BT), CARVE_F32(m->lnf_rstd, BT);
    CARVE_F32(m->probs, BT * (size_t)m->c.padded_vocab);
    CARVE(m->d_a, BT * C), CARVE(m->d_b, BT * C), CARVE(m->d_c, BT * C), CARVE(m->d_d, BT * C);
    CARVE(m->d_qkv, BT * 3 * C), CARVE(m->d_fch, BT * 4 * C);
    if (!m->fused_dgelu) /* the gradient at GELU's output, between fcproj's GEMM and GELU's */
        CARVE(m->d_fcg, BT * 4 * C);
    return at;
}
#undef CARVE
#undef CARVE_F32

/* act_bytes as the ops give it: 2 (bf16) or 4 */
static int act_size(int act_bytes) { return act_bytes == 2 ? 2 : 4; }

size_t gpt2_checkpoint_bytes(const gpt2_config *c, int B, int T)
{
    return gpt2_checkpoint_bytes_as(c, B, T, 4);
}

size_t gpt2_checkpoint_bytes_as(const gpt2_config *c, int B, int T, int act_bytes)
{
    return (size_t)B * T * c->channels * (size_t)act_size(act_bytes);
}

size_t gpt2_model_checkpoint_bytes(const gpt2_model *m)
{
    return gpt2_checkpoint_bytes_as(&m->c, m->B, m->T, m->act);
}

void gpt2_model_set_store(gpt2_model *m, const gpt2_act_store *store) { m->store = *store; }

int gpt2_policy_parse(const char *name)
{
    return !strcmp(name, "none")        ? GPT2_KEEP_ALL
           : !strcmp(name, "selective") ? GPT2_SELECTIVE
           : !strcmp(name, "full")      ? GPT2_FULL
                                        : -1;
}

gpt2_model *gpt2_model_create_on(const gpt2_config *c, int B, int T, const gpt2_ops *ops,
                                 int policy)
{
    if (B < 1 || T < 1 || T > c->max_seq || c->heads < 1 || c->channels % c->heads ||
        policy < GPT2_KEEP_ALL || policy > GPT2_FULL_OFFLOAD)
        return NULL;
    gpt2_model *m = calloc(1, sizeof *m);
    size_t BT = (size_t)B * T;
    if (!m)
        return NULL;
    m->ops = *ops;
    m->policy = policy;
    m->att_keep = ops->att_keep;
    m->act = act_size(ops->act_bytes);
    m->fused_dgelu = ops->matmul_dgelu_backward != NULL;
    if (!(m->blocks = calloc((size_t)c->layers, sizeof *m->blocks)) ||
        !(m->tokens = ops->alloc(ops->ctx, BT * sizeof(int))) ||
        !(m->targets = ops->alloc(ops->ctx, BT * sizeof(int)))) {
        gpt2_model_destroy(m);
        return NULL;
    }
    m->c = *c;
    m->B = B;
    m->T = T;
    m->activation_bytes = carve(m, NULL);
    if (!(m->memory = ops->alloc(ops->ctx, m->activation_bytes))) {
        gpt2_model_destroy(m);
        return NULL;
    }
    carve(m, m->memory);
    return m;
}

size_t gpt2_activation_bytes(const gpt2_config *c, int B, int T, int policy)
{
    return gpt2_activation_bytes_on(c, B, T, policy, GPT2_ATT_PROBS);
}

size_t gpt2_activation_bytes_on(const gpt2_config *c, int B, int T, int policy, int att_keep)
{
    return gpt2_activation_bytes_as(c, B, T, policy, att_keep, 4, 0);
}

size_t gpt2_activation_bytes_as(const gpt2_config *c, int B, int T, int policy, int att_keep,
                                int act_bytes, int fused_dgelu)
{
    gpt2_model m = {.c = *c,
                    .B = B,
                    .T = T,
                    .policy = policy,
                    .att_keep = att_keep,
                    .act = act_size(act_bytes),
                    .fused_dgelu = fused_dgelu};
    if (!(m.blocks = calloc((size_t)c->layers, sizeof *m.blocks)))
        return 0;
    size_t n = carve(&m, NULL);
    free(m.blocks);
    return n;
}

gpt2_model *gpt2_model_create(const gpt2_config *c, int B, int T)
{
    return gpt2_model_create_on(c, B, T, &gpt2_ops_cpu, 0);
}

size_t gpt2_model_activation_bytes(const gpt2_model *m) { return m->activation_bytes; }

int gpt2_model_status(const gpt2_model *m) { return m->ops.status(m->ops.ctx); }
const char *gpt2_model_status_text(const gpt2_model *m) { return m->ops.status_text(m->ops.ctx); }

void gpt2_model_destroy(gpt2_model *m)
{
    if (!m)
        return;
    if (m->memory)
        m->ops.free(m->ops.ctx, m->memory);
    if (m->tokens)
        m->ops.free(m->ops.ctx, m->tokens);
    if (m->targets)
        m->ops.free(m->ops.ctx, m->targets);
    free(m->blocks);
    free(m);
}

/* ---- forward ---- */

/* A block's matmul, its weights w fp32 or (w16) the 16-bit array the source handed out, with
 * (backward) its gradient dw in the same type. */
static void mm_forward(const gpt2_model *m, int w16, float *out, const float *inp, const float *w,
                       const float *bias, int N, int C, int OC)
{
    if (w16)
        m->ops.matmul_forward_w16(m->ops.ctx, out, inp, (const unsigned short *)w, bias, N, C, OC);
    else
        m->ops.matmul_forward(m->ops.ctx, out, inp, w, bias, N, C, OC);
}
static void mm_backward(const gpt2_model *m, int w16, float *dinp, float *dw, float *dbias,
                        const float *dout, const float *inp, const float *w, int N, int C, int OC)
{
    if (w16)
        m->ops.matmul_backward_w16(m->ops.ctx, dinp, (unsigned short *)dw, dbias, dout, inp,
                                   (const unsigned short *)w, N, C, OC);
    else
        m->ops.matmul_backward(m->ops.ctx, dinp, dw, dbias, dout, inp, w, N, C, OC);
}

/* Whether the source handed out layer's weight matrices in 16 bits (after its get). */
static int weights16(const gpt2_source *src, int layer)
{
    return src->weights16 && src->weights16(src->ctx, layer);
}

/* The block's output, res3 = res2 + fcproj, is left to whatever layernorm reads it next (the
 * next block's ln_1, or ln_f), which writes it in the same pass (residual_layernorm_forward):
 * prev, when given, is the block before, whose output `in` this block completes first. */
static void block_forward(const gpt2_model *m, float *const *p, int w16, block_acts *a,
                          const float *in, const block_acts *prev)
{
    int N = m->B * m->T, C = m->c.channels;
    if (prev) /* in is prev->res3 */
        m->ops.residual_layernorm_forward(m->ops.ctx, prev->res3, a->ln1, a->ln1_mean, a->ln1_rstd,
                                          prev->res2, prev->fcproj, p[P_LN1W], p[P_LN1B], N, C);
    else
        m->ops.layernorm_forward(m->ops.ctx, a->ln1, a->ln1_mean, a->ln1_rstd, in, p[P_LN1W],
                                 p[P_LN1B], N, C);
    mm_forward(m, w16, a->qkv, a->ln1, p[P_QKVW], p[P_QKVB], N, C, 3 * C);
    m->ops.attention_forward(m->ops.ctx, a->atty, a->att, a->qkv, m->B, m->T, C, m->c.heads);
    mm_forward(m, w16, a->attproj, a->atty, p[P_ATTW], p[P_ATTB], N, C, C);
    m->ops.residual_layernorm_forward(m->ops.ctx, a->res2, a->ln2, a->ln2_mean, a->ln2_rstd, in,
                                      a->attproj, p[P_LN2W], p[P_LN2B], N, C);
    if (m->ops.matmul_gelu_forward) { /* fch the pre-GELU values, as unfused */
        m->ops.matmul_gelu_forward(m->ops.ctx, a->fch_gelu, a->fch, a->ln2, p[P_FCW], w16, p[P_FCB],
                                   N, C, 4 * C);
    } else {
        mm_forward(m, w16, a->fch, a->ln2, p[P_FCW], p[P_FCB], N, C, 4 * C);
        m->ops.gelu_forward(m->ops.ctx, a->fch_gelu, a->fch, (long long)N * 4 * C);
    }
    mm_forward(m, w16, a->fcproj, a->fch_gelu, p[P_PROJW], p[P_PROJB], N, 4 * C, C);
}

int gpt2_forward(gpt2_model *m, const gpt2_source *src, const int *tokens, const int *targets,
                 float *loss)
{
    int N = m->B * m->T, C = m->c.channels, L = m->c.layers, rc;
    float *p[GPT2_BLOCK_PARAMS];
    m->ops.upload(m->ops.ctx, m->tokens, tokens, sizeof(int) * (size_t)N);
    m->ops.upload(m->ops.ctx, m->targets, targets, sizeof(int) * (size_t)N);
    if ((rc = src->get(src->ctx, 0, 0, p, NULL)))
        return rc;
    m->ops.encoder_forward(m->ops.ctx, m->encoded, m->tokens, p[0], p[1], m->B, m->T, C);
    if ((rc = src->put(src->ctx, 0, 0)))
        return rc;
    const float *x = m->encoded;
    for (int l = 0; l < L; l++) {
        if ((rc = src->get(src->ctx, l + 1, 0, p, NULL)))
            return rc;
        block_forward(m, p, weights16(src, l + 1), &m->blocks[l], x, l ? &m->blocks[l - 1] : NULL);
        if ((rc = src->put(src->ctx, l + 1, 0)))
            return rc;
        if (m->policy == GPT2_FULL_OFFLOAD && /* its input waits in the store */
            (rc = m->store.save(m->store.ctx, l + 1, x, gpt2_model_checkpoint_bytes(m))))
            return rc;
        x = m->blocks[l].res3;
    }
    if ((rc = src->get(src->ctx, L + 1, 0, p, NULL)))
        return rc;
    if (L) /* x, the last block's output, with ln_f */
        m->ops.residual_layernorm_forward(m->ops.ctx, m->blocks[L - 1].res3, m->lnf, m->lnf_mean,
                                          m->lnf_rstd, m->blocks[L - 1].res2,
                                          m->blocks[L - 1].fcproj, p[0], p[1], N, C);
    else
        m->ops.layernorm_forward(m->ops.ctx, m->lnf, m->lnf_mean, m->lnf_rstd, x, p[0], p[1], N, C);
    if ((rc = src->put(src->ctx, L + 1, 0)) || (rc = src->get(src->ctx, 0, 0, p, NULL)))
        return rc;
    if (m->ops.logits_forward) /* tied head: fp32 logits from the activations */
        m->ops.logits_forward(m->ops.ctx, m->probs, m->lnf, p[0], N, C, m->c.padded_vocab);
    else
        m->ops.matmul_forward(m->ops.ctx, m->probs, m->lnf, p[0], NULL, N, C, m->c.padded_vocab);
    if ((rc = src->put(src->ctx, 0, 0)))
        return rc;
    *loss = m->ops.crossentropy_forward(m->ops.ctx, m->probs, m->probs, m->targets, N,
                                        m->c.padded_vocab);
    return 0;
}

/* ---- backward ---- */

/* dout: gradient at the block's output; din receives the gradient at its input. */
static void block_backward(gpt2_model *m, float *const *p, int w16, float *const *g,
                           const block_acts *a, const float *in, const float *dout, float *din)
{
    int N = m->B * m->T, C = m->c.channels;
    size_t nc = (size_t)N * C;
    float *dres2 = m->d_c;
    /* res3 = res2 + fcproj(gelu(fc(ln2(res2)))) */
    m->ops.copy(m->ops.ctx, dres2, dout, nc * m->act);
    if (m->policy == GPT2_SELECTIVE) { /* GELU's and ln_2's outputs again, from what it kept */
        m->ops.gelu_forward(m->ops.ctx, a->fch_gelu, a->fch, (long long)N * 4 * C);
        m->ops.layernorm_forward(m->ops.ctx, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p[P_LN2W],
                                 p[P_LN2B], N, C);
    }
    if (m->ops.matmul_dgelu_backward) { /* d_fch, the gradient at the pre-GELU fch, at once */
        m->ops.matmul_dgelu_backward(m->ops.ctx, m->d_fch, g[P_PROJW], g[P_PROJB], dout,
                                     a->fch_gelu, p[P_PROJW], w16, a->fch, N, 4 * C, C);
    } else {
        m->ops.zero(m->ops.ctx, m->d_fcg, nc * 4 * m->act);
        mm_backward(m, w16, m->d_fcg, g[P_PROJW], g[P_PROJB], dout, a->fch_gelu, p[P_PROJW], N,
                    4 * C, C);
        m->ops.zero(m->ops.ctx, m->d_fch, nc * 4 * m->act);
        m->ops.gelu_backward(m->ops.ctx, m->d_fch, a->fch, m->d_fcg, (long long)N * 4 * C);
    }
    float *dln2 = din; /* scratch until din is needed */
    m->ops.zero(m->ops.ctx, dln2, nc * m->act);
    mm_backward(m, w16, dln2, g[P_FCW], g[P_FCB], m->d_fch, a->ln2, p[P_FCW], N, C, 4 * C);
    m->ops.layernorm_backward(m->ops.ctx, dres2, g[P_LN2W], g[P_LN2B], dln2, a->res2, p[P_LN2W],
                              a->ln2_mean, a->ln2_rstd, N, C);
    if (m->policy == GPT2_SELECTIVE) /* ln_1's output again */
        m->ops.layernorm_forward(m->ops.ctx, a->ln1, a->ln1_mean, a->ln1_rstd, in, p[P_LN1W],
                                 p[P_LN1B], N, C);
    /* res2 = in + attproj(attention(qkv(ln1(in)))) */
    float *datty = din;
    m->ops.zero(m->ops.ctx, datty, nc * m->act);
    mm_backward(m, w16, datty, g[P_ATTW], g[P_ATTB], dres2, a->atty, p[P_ATTW], N, C, C);
    m->ops.zero(m->ops.ctx, m->d_qkv, nc * 3 * m->act);
    m->ops.attention_backward(m->ops.ctx, m->d_qkv, datty, a->qkv, a->atty, a->att, m->B, m->T, C,
                              m->c.heads);
    float *dln1 = m->d_d;
    m->ops.zero(m->ops.ctx, dln1, nc * m->act);
    mm_backward(m, w16, dln1, g[P_QKVW], g[P_QKVB], m->d_qkv, a->ln1, p[P_QKVW], N, C, 3 * C);
    m->ops.copy(m->ops.ctx, din, dres2, nc * m->act);
    m->ops.layernorm_backward(m->ops.ctx, din, g[P_LN1W], g[P_LN1B], dln1, in, p[P_LN1W],
                              a->ln1_mean, a->ln1_rstd, N, C);
}

int gpt2_backward(gpt2_model *m, const gpt2_source *src, void (*progress)(int layer, int total))
{
    int N = m->B * m->T, C = m->c.channels, L = m->c.layers, Vp = m->c.padded_vocab, rc;
    float *ep[2], *eg[2], *p[GPT2_BLOCK_PARAMS], *g[GPT2_BLOCK_PARAMS];
    size_t nc = (size_t)N * C;
    /* The embedding stays held from the LM head to the token embedding. */
    if ((rc = src->get(src->ctx, 0, 1, ep, eg)))
        return rc;
    m->ops.crossentropy_backward(m->ops.ctx, m->probs, m->probs, m->targets, N, Vp);
    float *dx = m->d_a, *dprev = m->d_b;
    m->ops.zero(m->ops.ctx, dprev, nc * m->act);
    if (m->ops.logits_backward)
        m->ops.logits_backward(m->ops.ctx, dprev, eg[0], m->probs, m->lnf, ep[0], N, C, Vp);
    else
        m->ops.matmul_backward(m->ops.ctx, dprev, eg[0], NULL, m->probs, m->lnf, ep[0], N, C, Vp);
    if ((rc = src->get(src->ctx, L + 1, 1, p, g)))
        return rc;
    const float *x_last = L ? m->blocks[L - 1].res3 : m->encoded;
    m->ops.zero(m->ops.ctx, dx, nc * m->act);
    m->ops.layernorm_backward(m->ops.ctx, dx, g[0], g[1], dprev, x_last, p[0], m->lnf_mean,
                              m->lnf_rstd, N, C);
    if ((rc = src->put(src->ctx, L + 1, 1)))
        return rc;
    for (int l = L - 1; l >= 0; l--) {
        if (progress)
            progress(L - l, L);
        if ((rc = src->get(src->ctx, l + 1, 1, p, g)))
            return rc;
        const float *in = l ? m->blocks[l - 1].res3 : m->encoded;
        if (m->policy == GPT2_FULL_OFFLOAD && (rc = m->store.load(m->store.ctx, l + 1, &in)))
            return rc;
        float *din = dx == m->d_a ? m->d_b : m->d_a;
        int w16 = weights16(src, l + 1);
        if (m->policy >= GPT2_FULL) /* the block's tensors again, from its kept input (its
                                     * output, which the backward does not read, is not) */
            block_forward(m, p, w16, &m->blocks[l], in, NULL);
        block_backward(m, p, w16, g, &m->blocks[l], in, dx, din);
        dx = din;
        if (m->policy == GPT2_FULL_OFFLOAD && (rc = m->store.free(m->store.ctx, l + 1)))
            return rc;
        if ((rc = src->put(src->ctx, l + 1, 1)))
            return rc;
    }
    m->ops.encoder_backward(m->ops.ctx, eg[0], eg[1], dx, m->tokens, m->B, m->T, C,
                            m->c.padded_vocab);
    return src->put(src->ctx, 0, 1);
}

static void add_call(gpt2_call *out, int max, int *n, int layer, int backward, int release)
{
    if (*n < max)
        out[*n] = (gpt2_call){layer, backward, release};
    (*n)++;
}

/* Mirrors gpt2_forward and gpt2_backward above (a test compares the two). */
int gpt2_micro_step_calls(const gpt2_config *c, gpt2_call *out, int max)
{
    int n = 0, L = c->layers;
    for (int l = 0; l <= L + 1; l++) /* embed, the blocks, ln_f */
        add_call(out, max, &n, l, 0, 0), add_call(out, max, &n, l, 0, 1);
    add_call(out, max, &n, 0, 0, 0); /* the tied LM head */
    add_call(out, max, &n, 0, 0, 1);
    add_call(out, max, &n, 0, 1, 0); /* held through the whole backward pass */
    for (int l = L + 1; l >= 1; l--)
        add_call(out, max, &n, l, 1, 0), add_call(out, max, &n, l, 1, 1);
    add_call(out, max, &n, 0, 1, 1);
    return n;
}
