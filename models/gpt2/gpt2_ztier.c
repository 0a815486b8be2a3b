/* SPDX-License-Identifier: MIT */
#include "gpt2_ztier.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void free_scratch(gpt2_ztier *g);

zt_status gpt2_ztier_register(gpt2_ztier *g, zt_runtime *rt, const gpt2_config *c, uint64_t seed)
{
    memset(g, 0, sizeof *g);
    g->rt = rt;
    g->c = *c;
    int n = gpt2_layer_count(c);
    g->layer_ids = calloc((size_t)n, sizeof *g->layer_ids);
    g->param_ids = calloc((size_t)n, sizeof *g->param_ids);
    g->ops = gpt2_ops_cpu;
    if (!g->layer_ids || !g->param_ids)
        return ZT_ERR_NOMEM;
    for (int l = 0; l < n; l++) {
        char name[32];
        gpt2_layer_name(c, l, name, sizeof name);
        zt_status st = zt_layer_add(rt, name, &g->layer_ids[l]);
        for (int k = 0; st == ZT_OK && k < gpt2_layer_param_count(c, l); k++) {
            gpt2_param_info pi;
            gpt2_param_info_get(c, l, k, &pi);
            zt_init init = {ZT_INIT_NORMAL, 0.0f, pi.init_std, seed, NULL, NULL};
            if (pi.init_std <= 0)
                init = (zt_init){ZT_INIT_CONSTANT, -pi.init_std, 0.0f, seed, NULL, NULL};
            st = zt_param_add(rt, g->layer_ids[l], pi.name, pi.shape, pi.ndim, &init,
                              &g->param_ids[l][k]);
        }
        if (st != ZT_OK)
            return st;
    }
    /* what the shapes do not show, kept with every checkpoint (an llm.c export needs them) */
    const struct {
        const char *key;
        int value;
    } meta[] = {{"gpt2.layers", c->layers},     {"gpt2.heads", c->heads},
                {"gpt2.channels", c->channels}, {"gpt2.max_seq", c->max_seq},
                {"gpt2.vocab", c->vocab},       {"gpt2.padded_vocab", c->padded_vocab}};
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
        zt_status st = zt_checkpoint_meta_set(rt, meta[i].key, meta[i].value);
        if (st != ZT_OK)
            return st;
    }
    /* wte is the LM head after ln_f too, held through the backward pass (gpt2_backward):
     * commit sizes the device budget for that */
    return zt_layer_tie(rt, g->layer_ids[0], g->layer_ids[n - 1]);
}

zt_status gpt2_ztier_check_loaded(gpt2_ztier *g)
{
    const char *keys[] = {"gpt2.heads", "gpt2.vocab"};
    const int want[] = {g->c.heads, g->c.vocab};
    g->error[0] = '\0';
    for (int i = 0; i < 2; i++) {
        int64_t v = 0;
        if (zt_checkpoint_meta_get(g->rt, keys[i], &v) == ZT_OK && v != want[i]) {
            snprintf(g->error, sizeof g->error,
                     "the checkpoint's model has %s %lld, this one %d (the same shapes, another "
                     "model): give the --config and --vocab it was trained with",
                     keys[i] + 5, (long long)v, want[i]);
            return ZT_ERR_ARGUMENT;
        }
    }
    return ZT_OK;
}

void gpt2_ztier_free(gpt2_ztier *g)
{
    free(g->layer_ids);
    free(g->param_ids);
    free_scratch(g);
}

static float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- bf16 layers, widened where the model computes ---- */

/* The elements of layer l's parameters (matrices_only: of its 2-D ones). */
static int64_t layer_numel(const gpt2_config *c, int l, int matrices_only)
{
    int64_t n = 0;
    for (int k = 0; k < gpt2_layer_param_count(c, l); k++) {
        gpt2_param_info pi;
        gpt2_param_info_get(c, l, k, &pi);
        if (pi.ndim == 2 || !matrices_only)
            n += pi.shape[0] * (pi.ndim == 2 ? pi.shape[1] : 1);
    }
    return n;
}

/* Whether layer l's weight matrices go to the GEMMs in 16 bits, not widened: a block's, where
 * the ops' matmuls take bf16 weights (w16). */
static int reads_w16(const gpt2_config *c, int l, int w16)
{
    return w16 && l >= 1 && l <= c->layers;
}

/* Whether parameter t of such a layer (w16: reads_w16) is one of those matrices. */
static int is_w16(int w16, const zt_tensor_view *t) { return w16 && t->ndim == 2; }

static int ops_w16(const gpt2_ops *ops)
{
    return ops->matmul_forward_w16 && ops->matmul_backward_w16;
}

/* The scratch a layer is widened into: the embedding's own (it is held through the whole
 * backward pass, beside each block in turn), one for every other layer (the model holds one
 * of them at a time). */
static int slot_of(int layer) { return layer == 0 ? 0 : 1; }

/* A layer's floats in its slot: its parameters and gradients but for the matrices the GEMMs
 * read in 16 bits (and whose gradients they add into ztier's 16-bit buffers). */
static int64_t layer_floats(const gpt2_config *c, int l, int w16)
{
    return 2 * (layer_numel(c, l, 0) - (reads_w16(c, l, w16) ? layer_numel(c, l, 1) : 0));
}

/* The floats of each slot: the embedding's, and the largest other layer's. */
static void slot_floats(const gpt2_config *c, int w16, int64_t floats[2])
{
    int64_t other = 0;
    for (int l = 1; l < gpt2_layer_count(c); l++)
        other = layer_floats(c, l, w16) > other ? layer_floats(c, l, w16) : other;
    floats[0] = layer_floats(c, 0, w16);
    floats[1] = other;
}

size_t gpt2_bf16_scratch_bytes(const gpt2_config *c) { return gpt2_bf16_scratch_bytes_on(c, 0); }

size_t gpt2_bf16_scratch_bytes_on(const gpt2_config *c, int weights16)
{
    int64_t floats[2];
    slot_floats(c, weights16, floats);
    return sizeof(float) * (size_t)(floats[0] + floats[1]);
}

/* Both slots, made at the first bf16 fetch: made once, so no fetch allocates (a GPU
 * allocation would wait). */
static int make_scratch(gpt2_ztier *g)
{
    int64_t floats[2];
    slot_floats(&g->c, ops_w16(&g->ops), floats);
    for (int k = 0; k < 2; k++) {
        g->wide[k].buf = g->ops.alloc(g->ops.ctx, sizeof(float) * (size_t)floats[k]);
        if (!g->wide[k].buf)
            return -1;
        g->wide[k].floats = floats[k];
        g->wide_bytes += sizeof(float) * (size_t)floats[k];
    }
    return 0;
}

static void free_scratch(gpt2_ztier *g)
{
    for (int k = 0; k < 2; k++)
        if (g->wide[k].buf)
            g->ops.free(g->ops.ctx, g->wide[k].buf);
    memset(g->wide, 0, sizeof g->wide);
    g->wide_bytes = 0;
}

void gpt2_ztier_compute_on(gpt2_ztier *g, const gpt2_ops *ops)
{
    free_scratch(g);
    g->ops = ops ? *ops : gpt2_ops_cpu;
}

size_t gpt2_ztier_scratch_bytes(const gpt2_ztier *g) { return g->wide_bytes; }

/* Widens a bf16 layer into its slot with the ops (on the GPU: kernels on the model's stream,
 * ordered after the fetch; nothing waits), and in backward zeroes the fp32 gradients the
 * kernels add into. -1 with g->error set when the slot is taken or cannot be made. */
static int widen(gpt2_ztier *g, int layer, const zt_layer_view *v, int backward, float **params,
                 float **grads)
{
    char name[32];
    gpt2_layer_name(&g->c, layer, name, sizeof name);
    if (!g->wide[0].buf && make_scratch(g) != 0) {
        snprintf(g->error, sizeof g->error,
                 "out of %s memory for the fp32 copies of the bf16 layers (%zu bytes; %s): "
                 "lower the device budget (ztier.hbm_capacity) or the batch",
                 g->stream ? "device" : "host", gpt2_bf16_scratch_bytes_on(&g->c, ops_w16(&g->ops)),
                 g->ops.status_text(g->ops.ctx)[0] ? g->ops.status_text(g->ops.ctx)
                                                   : "the allocation failed");
        free_scratch(g);
        return -1;
    }
    gpt2_widened *w = &g->wide[slot_of(layer)];
    /* a block's matrices go to the GEMMs in 16 bits where the ops take them so, and their
     * gradients come back into ztier's 16-bit buffers: only the other parameters are widened,
     * into the front of the slot, their gradients after them */
    int w16 = reads_w16(&g->c, layer, ops_w16(&g->ops));
    int64_t wide = 0;
    for (int k = 0; k < v->n_params; k++)
        wide += is_w16(w16, &v->params[k]) ? 0 : v->params[k].numel;
    if (w->held || 2 * wide > w->floats) { /* a caller holding layers as the model does not */
        snprintf(g->error, sizeof g->error,
                 "layer %s: its fp32 copy's scratch is %s (the model holds the embedding and one "
                 "other layer at a time)",
                 name, w->held ? "held by another layer" : "too small");
        return -1;
    }
    w->held = 1, w->backward = backward, w->view = *v, w->w16 = w16, w->grads = w->buf + wide;
    int64_t off = 0;
    for (int k = 0; k < v->n_params; k++) {
        if (is_w16(w16, &v->params[k])) { /* bf16, as they are (gpt2_source.weights16) */
            params[k] = v->params[k].data;
            if (backward)
                grads[k] = v->params[k].grad;
            continue;
        }
        params[k] = w->buf + off;
        g->ops.bf16_widen(g->ops.ctx, params[k], v->params[k].data, v->params[k].numel);
        if (backward)
            grads[k] = w->grads + off;
        off += v->params[k].numel;
    }
    if (backward)
        g->ops.zero(g->ops.ctx, w->grads, sizeof(float) * (size_t)wide);
    return 0;
}

/* Adds the layer's fp32 gradients into its bf16 gradient buffers (zeroed at fetch: rounded
 * once a micro-step; the micro-steps are summed in fp32 by ztier) and frees the slot; the
 * matrices the GEMMs read in 16 bits have had theirs added there by the GEMMs. */
static void narrow(gpt2_ztier *g, gpt2_widened *w)
{
    int64_t off = 0;
    for (int k = 0; w->backward && k < w->view.n_params; k++) {
        if (is_w16(w->w16, &w->view.params[k]))
            continue;
        g->ops.bf16_narrow_add(g->ops.ctx, w->view.params[k].grad, w->grads + off,
                               w->view.params[k].numel);
        off += w->view.params[k].numel;
    }
    w->held = 0;
}

static const char *dtype_name(zt_dtype d)
{
    return d == ZT_F32 ? "fp32" : d == ZT_BF16 ? "bf16" : d == ZT_F16 ? "fp16" : "unknown";
}

/* The dtype every parameter of the view shares, or -1 (with g->error set) when the kernels
 * cannot compute from it. */
static int view_dtype(gpt2_ztier *g, int layer, const zt_layer_view *v)
{
    zt_dtype d = v->params[0].dtype;
    for (int k = 0; k < v->n_params; k++) {
        if (v->params[k].dtype == d && (d == ZT_F32 || d == ZT_BF16))
            continue;
        char name[32];
        gpt2_layer_name(&g->c, layer, name, sizeof name);
        snprintf(g->error, sizeof g->error,
                 "layer %s: parameter %s is %s; the GPT-2 kernels compute from fp32 or bf16 "
                 "parameters (fp16 with loss scaling is not supported by the GPT-2 trainer: "
                 "use bf16.enabled instead of fp16.enabled in the DeepSpeed config)",
                 name, v->params[k].name, dtype_name(v->params[k].dtype));
        return -1;
    }
    return (int)d;
}

static int ztier_get(void *ctx, int layer, int backward, float **params, float **grads)
{
    gpt2_ztier *g = ctx;
    zt_layer_view v;
    zt_pass pass = backward ? ZT_BACKWARD : g->inference ? ZT_INFERENCE : ZT_FORWARD;
    g->error[0] = '\0';
    zt_status st = g->stream ? zt_fetch_async(g->rt, g->layer_ids[layer], pass, g->stream, &v)
                             : zt_fetch(g->rt, g->layer_ids[layer], pass, &v);
    if (st != ZT_OK)
        return (int)(g->last = st);
    int dtype = view_dtype(g, layer, &v);
    st = dtype < 0 ? ZT_ERR_UNSUPPORTED : ZT_OK;
    if (dtype == ZT_BF16 && g->stream && g->ops.alloc == gpt2_ops_cpu.alloc) {
        /* the host cannot read a device view */
        snprintf(g->error, sizeof g->error,
                 "bf16 parameters on a GPU stream are widened by the model's GPU ops: hand them "
                 "over with gpt2_ztier_compute_on");
        st = ZT_ERR_UNSUPPORTED;
    } else if (dtype == ZT_BF16 && widen(g, layer, &v, backward, params, grads) != 0) {
        st = ZT_ERR_NOMEM;
    }
    if (st != ZT_OK) {
        if (g->stream)
            zt_release_async(g->rt, g->layer_ids[layer], pass, g->stream);
        else
            zt_release(g->rt, g->layer_ids[layer], pass);
        return (int)(g->last = st);
    }
    for (int k = 0; dtype == ZT_F32 && k < v.n_params; k++) {
        params[k] = v.params[k].data;
        if (backward)
            grads[k] = v.params[k].grad;
    }
    return 0;
}

static int ztier_put(void *ctx, int layer, int backward)
{
    gpt2_ztier *g = ctx;
    g->error[0] = '\0';
    gpt2_widened *w = &g->wide[slot_of(layer)];
    if (w->held) /* a bf16 layer: its gradients go back into ztier's before the release */
        narrow(g, w);
    zt_pass pass = backward ? ZT_BACKWARD : g->inference ? ZT_INFERENCE : ZT_FORWARD;
    zt_status st = g->stream ? zt_release_async(g->rt, g->layer_ids[layer], pass, g->stream)
                             : zt_release(g->rt, g->layer_ids[layer], pass);
    return st == ZT_OK ? 0 : (int)(g->last = st);
}

static int ztier_weights16(void *ctx, int layer)
{
    const gpt2_widened *w = &((gpt2_ztier *)ctx)->wide[slot_of(layer)];
    return w->held && w->w16;
}

gpt2_source gpt2_ztier_source(gpt2_ztier *g)
{
    return (gpt2_source){ztier_get, ztier_put, g, ztier_weights16};
}

/* ---- activation checkpoints ---- */

zt_status gpt2_ztier_register_acts(gpt2_ztier *g, int B, int T)
{
    return gpt2_ztier_register_acts_as(g, B, T, 4);
}

zt_status gpt2_ztier_register_acts_as(gpt2_ztier *g, int B, int T, int act_bytes)
{
    zt_status st = ZT_OK;
    for (int l = 1; st == ZT_OK && l <= g->c.layers; l++)
        st = zt_act_register(g->rt, g->layer_ids[l],
                             gpt2_checkpoint_bytes_as(&g->c, B, T, act_bytes));
    return st;
}

static int act_status(gpt2_ztier *g, zt_status st) { return st == ZT_OK ? 0 : (int)(g->last = st); }

static int act_save(void *ctx, int layer, const float *x, size_t bytes)
{
    gpt2_ztier *g = ctx;
    int id = g->layer_ids[layer];
    if (g->inference) /* an evaluation forward: no backward asks for it */
        return 0;
    return act_status(g, g->stream ? zt_act_save_async(g->rt, id, x, bytes, g->stream)
                                   : zt_act_save(g->rt, id, x, bytes));
}

static int act_load(void *ctx, int layer, const float **x)
{
    gpt2_ztier *g = ctx;
    int id = g->layer_ids[layer];
    void *p = NULL;
    zt_status st = g->stream ? zt_act_load_async(g->rt, id, g->stream, &p, NULL)
                             : zt_act_load(g->rt, id, &p, NULL);
    *x = p;
    return act_status(g, st);
}

static int act_free(void *ctx, int layer)
{
    gpt2_ztier *g = ctx;
    int id = g->layer_ids[layer];
    return act_status(g,
                      g->stream ? zt_act_free_async(g->rt, id, g->stream) : zt_act_free(g->rt, id));
}

gpt2_act_store gpt2_ztier_act_store(gpt2_ztier *g)
{
    return (gpt2_act_store){act_save, act_load, act_free, g};
}

const char *gpt2_ztier_error(const gpt2_ztier *g)
{
    return g->error[0] ? g->error : zt_last_error(g->rt);
}

/* ---- export ---- */

static int64_t numel(const gpt2_param_info *p)
{
    return p->shape[0] * (p->ndim == 2 ? p->shape[1] : 1);
}

/* Rank 0's output file, written beside its final name (path.XXXXXX in the same folder),
 * synced and renamed over it at the end, so a failed export (a full disk) leaves the file
 * that was there before as it was and no temporary behind. A write that fails (or the file
 * that cannot be created) is recorded, with a message naming the file, and the export goes
 * on without writing: every rank must issue all the gathers, or the others would wait in one
 * until ZT_COMM_TIMEOUT. */
typedef struct export_file {
    FILE *f;
    const char *path;
    char target[4096]; /* the file the export replaces: path, or a link's target */
    char tmp[4096];    /* the temporary beside it; "" when there is none (written in place) */
    zt_status st;      /* the first failure to write (rank 0) */
} export_file;

static void export_fail(gpt2_ztier *g, export_file *out, const char *what)
{
    int e = errno;
    if (out->st == ZT_OK) {
        out->st = ZT_ERR_IO;
        snprintf(g->error, sizeof g->error,
                 "cannot %s '%.150s': %s%s; a file there before is as it was", what, out->path,
                 strerror(e),
                 e == ENOSPC ? " (the disk is full: free space or export elsewhere)" : "");
    }
    if (out->f)
        fclose(out->f);
    out->f = NULL;
    if (out->tmp[0])
        unlink(out->tmp);
    out->tmp[0] = '\0';
}

static void export_write(gpt2_ztier *g, export_file *out, const void *p, size_t size, size_t n)
{
    if (out->f && fwrite(p, size, n, out->f) != n)
        export_fail(g, out, "write");
}

/* A path that is not a file (a device such as /dev/full, a pipe) is written in place: a
 * rename would replace the device itself. A symbolic link's target is what is replaced. */
static int write_in_place(const char *path, char *target, size_t len)
{
    struct stat sb;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
        return 1;
    char *real = lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode) ? realpath(path, NULL) : NULL;
    snprintf(target, len, "%s", real ? real : path);
    free(real);
    return 0;
}

static export_file export_open(gpt2_ztier *g, const char *path)
{
    int rank = 0, world = 1;
    zt_runtime_rank(g->rt, &rank, &world);
    export_file out = {.path = path, .st = ZT_OK};
    g->error[0] = '\0';
    if (rank != 0)
        return out;
    if (write_in_place(path, out.target, sizeof out.target)) {
        if (!(out.f = fopen(path, "wb")))
            export_fail(g, &out, "create");
        return out;
    }
    int fd = -1;
    if ((size_t)snprintf(out.tmp, sizeof out.tmp, "%s.XXXXXX", out.target) >= sizeof out.tmp)
        errno = ENAMETOOLONG;
    else
        fd = mkstemp(out.tmp);
    if (fd < 0 || fchmod(fd, 0644) != 0 || !(out.f = fdopen(fd, "wb"))) {
        if (fd >= 0)
            close(fd), unlink(out.tmp);
        out.tmp[0] = '\0';
        export_fail(g, &out, "create a temporary beside");
    }
    return out;
}

/* The folder of path, synced, so the rename survives a crash; 0 or -1 (errno). */
static int sync_folder(const char *path)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* The export's status: st (a collective's, the same on every rank), else rank 0's writes;
 * rank 0's whole file replaces path only when everything went. */
static zt_status export_close(gpt2_ztier *g, export_file *out, zt_status st)
{
    if (!out->f)
        return st != ZT_OK ? st : out->st;
    if (st != ZT_OK) { /* another rank failed: nothing replaces path */
        fclose(out->f), out->f = NULL;
        if (out->tmp[0])
            unlink(out->tmp);
        return st;
    }
    if (fflush(out->f) != 0 || (out->tmp[0] && fsync(fileno(out->f)) != 0)) {
        export_fail(g, out, "write");
        return out->st;
    }
    FILE *f = out->f;
    out->f = NULL;
    if (fclose(f) != 0) {
        export_fail(g, out, "write");
        return out->st;
    }
    if (!out->tmp[0]) /* written in place */
        return out->st;
    if (rename(out->tmp, out->target) != 0) {
        export_fail(g, out, "rename the finished export to"); /* removes tmp */
        return out->st;
    }
    out->tmp[0] = '\0';
    if (sync_folder(out->target) != 0) {
        snprintf(g->error, sizeof g->error,
                 "wrote '%s', but syncing its folder failed: %s (a crash now may lose it)",
                 out->path, strerror(errno));
        return out->st = ZT_ERR_IO;
    }
    return out->st;
}

/* Gathers parameter k of layer l to rank 0 (collective: the other ranks only send their
 * part, so the export moves each weight once) and there appends it to the file. */
static zt_status write_param(gpt2_ztier *g, export_file *out, int l, int k)
{
    gpt2_param_info pi;
    gpt2_param_info_get(&g->c, l, k, &pi);
    int rank = 0, world = 1;
    zt_runtime_rank(g->rt, &rank, &world);
    float *buf = rank == 0 ? malloc(sizeof(float) * (size_t)numel(&pi)) : NULL;
    if (rank == 0 && !buf)
        return ZT_ERR_NOMEM;
    zt_status st = zt_param_read_to(g->rt, g->param_ids[l][k], 0, buf, numel(&pi));
    if (st == ZT_OK)
        export_write(g, out, buf, sizeof(float), (size_t)numel(&pi));
    free(buf);
    return st;
}

zt_status gpt2_export_llmc(gpt2_ztier *g, const char *path)
{
    const gpt2_config *c = &g->c;
    export_file out = export_open(g, path);
    int32_t header[256] = {20240326,  3,        c->max_seq,  c->vocab,
                           c->layers, c->heads, c->channels, c->padded_vocab};
    export_write(g, &out, header, sizeof header, 1);
    zt_status st = ZT_OK;
    /* llm.c's order: wte, wpe, then each block tensor for all layers in turn, then ln_f */
    for (int k = 0; st == ZT_OK && k < 2; k++)
        st = write_param(g, &out, 0, k);
    for (int k = 0; st == ZT_OK && k < GPT2_BLOCK_PARAMS; k++)
        for (int l = 1; st == ZT_OK && l <= c->layers; l++)
            st = write_param(g, &out, l, k);
    for (int k = 0; st == ZT_OK && k < 2; k++)
        st = write_param(g, &out, c->layers + 1, k);
    return export_close(g, &out, st);
}

zt_status gpt2_export_safetensors(gpt2_ztier *g, const char *path)
{
    const gpt2_config *c = &g->c;
    size_t cap = 1 << 20, len = 1;
    char *json = malloc(cap);
    if (!json)
        return ZT_ERR_NOMEM;
    strcpy(json, "{");
    uint64_t offset = 0;
    for (int l = 0; l < gpt2_layer_count(c); l++)
        for (int k = 0; k < gpt2_layer_param_count(c, l); k++) {
            gpt2_param_info pi;
            gpt2_param_info_get(c, l, k, &pi);
            uint64_t bytes = (uint64_t)numel(&pi) * 4;
            char shape[64];
            snprintf(shape, sizeof shape, pi.ndim == 2 ? "[%lld,%lld]" : "[%lld]",
                     (long long)pi.shape[0], (long long)pi.shape[1]);
            len += (size_t)snprintf(
                json + len, cap - len,
                "%s\"%s\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[%llu,%llu]}",
                len > 1 ? "," : "", pi.name, shape, (unsigned long long)offset,
                (unsigned long long)(offset + bytes));
            offset += bytes;
        }
    len += (size_t)snprintf(json + len, cap - len, "}");
    while (len % 8) /* the header is padded with spaces to keep the data aligned */
        json[len++] = ' ';
    export_file out = export_open(g, path);
    uint64_t hlen = len;
    export_write(g, &out, &hlen, 8, 1);
    export_write(g, &out, json, 1, len);
    free(json);
    zt_status st = ZT_OK;
    for (int l = 0; st == ZT_OK && l < gpt2_layer_count(c); l++)
        for (int k = 0; st == ZT_OK && k < gpt2_layer_param_count(c, l); k++)
            st = write_param(g, &out, l, k);
    return export_close(g, &out, st);
}

/* ---- import ---- */

/* The llm.c header's shape against this model's: 0, or -1 with the first mismatch in
 * g->error. */
static int llmc_header_matches(gpt2_ztier *g, const char *path, const int32_t *h)
{
    const gpt2_config *c = &g->c;
    if (h[0] != 20240326 || (h[1] != 3 && h[1] != 5)) {
        snprintf(g->error, sizeof g->error,
                 "'%s' is not an llm.c GPT-2 model file (magic %d, version %d; expected "
                 "20240326, version 3 fp32 or 5 bf16)",
                 path, h[0], h[1]);
        return -1;
    }
    static const char *what[] = {"max_seq", "vocab", "layers", "heads", "channels", "padded_vocab"};
    const int want[] = {c->max_seq, c->vocab, c->layers, c->heads, c->channels, c->padded_vocab};
    for (int i = 0; i < 6; i++)
        if (h[2 + i] != want[i]) {
            snprintf(g->error, sizeof g->error,
                     "'%s' holds a model with %s %d, this one has %d: give the --config and "
                     "--vocab it was made with",
                     path, what[i], h[2 + i], want[i]);
            return -1;
        }
    return 0;
}

/* Parameter k of layer l from f (fp32, or bf16 widened) into buf; a read that fails leaves
 * NaNs, which zt_param_write refuses on this rank, so every rank's write fails alike. */
static void read_param(gpt2_ztier *g, FILE *f, const char *path, uint16_t *h, float *buf, int64_t n)
{
    size_t got = 0;
    if (h) { /* bf16 */
        got = fread(h, 2, (size_t)n, f);
        for (int64_t i = 0; i < n; i++)
            buf[i] = bf16_to_f32(h[i]);
    } else {
        got = fread(buf, 4, (size_t)n, f);
    }
    if (got != (size_t)n) {
        if (!g->error[0])
            snprintf(g->error, sizeof g->error, "cannot read '%s': %s", path,
                     ferror(f) ? strerror(errno) : "it ends early");
        for (int64_t i = 0; i < n; i++)
            buf[i] = NAN;
    }
}

zt_status gpt2_import_llmc(gpt2_ztier *g, const char *path)
{
    const gpt2_config *c = &g->c;
    int32_t h[256] = {0};
    g->error[0] = '\0';
    FILE *f = fopen(path, "rb");
    if (!f)
        snprintf(g->error, sizeof g->error, "cannot open '%s': %s", path, strerror(errno));
    else if (fread(h, sizeof h, 1, f) != 1)
        snprintf(g->error, sizeof g->error, "'%s' is shorter than an llm.c header", path);
    else
        llmc_header_matches(g, path, h);
    /* every rank reads the same file: the ranks agree on its header through the first write */
    int64_t largest = 1;
    for (int l = 0; l < gpt2_layer_count(c); l++)
        for (int k = 0; k < gpt2_layer_param_count(c, l); k++) {
            gpt2_param_info pi;
            gpt2_param_info_get(c, l, k, &pi);
            largest = numel(&pi) > largest ? numel(&pi) : largest;
        }
    float *buf = malloc(sizeof(float) * (size_t)largest);
    uint16_t *half = h[1] == 5 ? malloc(sizeof(uint16_t) * (size_t)largest) : NULL;
    zt_status st = buf && (h[1] != 5 || half) ? ZT_OK : ZT_ERR_NOMEM;
    for (int i = 0; st == ZT_OK && i < 4 + GPT2_BLOCK_PARAMS * c->layers; i++) {
        /* llm.c's order (gpt2_export_llmc) */
        int l = i < 2                                    ? 0
                : i >= 2 + GPT2_BLOCK_PARAMS * c->layers ? c->layers + 1
                                                         : 1 + (i - 2) % c->layers;
        int k = i < 2                                    ? i
                : i >= 2 + GPT2_BLOCK_PARAMS * c->layers ? i - 2 - GPT2_BLOCK_PARAMS * c->layers
                                                         : (i - 2) / c->layers;
        gpt2_param_info pi;
        gpt2_param_info_get(c, l, k, &pi);
        if (g->error[0]) /* nothing usable here: NaNs make every rank's write fail */
            for (int64_t e = 0; e < numel(&pi); e++)
                buf[e] = NAN;
        else
            read_param(g, f, path, half, buf, numel(&pi));
        st = zt_param_write(g->rt, g->param_ids[l][k], buf, numel(&pi));
    }
    if (st == ZT_OK && f && fgetc(f) != EOF)
        snprintf(g->error, sizeof g->error, "'%s' is longer than the model it describes", path),
            st = ZT_ERR_ARGUMENT;
    free(buf), free(half);
    if (f)
        fclose(f);
    return st;
}
