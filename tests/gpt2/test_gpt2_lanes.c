/* SPDX-License-Identifier: MIT */
/* The GPU's split of the row kernels over a warp (gpt2_rows.h with lanes 32), run on the CPU:
 * 32 threads are the lanes, and the lanes' sums and maxima (GPT2_LANES_*) are butterflies of
 * the GPU's order (offsets 16, 8, .. 1) over what the 32 threads hand in, so every lane gets
 * the same total, as from the shuffles. Each split row function against the CPU kernels (one
 * lane; checked against finite differences by test_gpt2_grad), the causal softmax against a
 * double-precision reference, on rows shorter and longer than a warp and widths that are no
 * multiple of it. The gradients rows share are summed as the GPU sums them, in a fixed order:
 * the encoder's by token over a stable sort of the rows, layernorm's weights through per-warp
 * partial sums combined in warp, then block order. Element orders that the split keeps (the
 * encoder, the cross-entropy's gradient) must match bit for bit; sums the split reorders, to
 * float rounding. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test_rand.h"

enum { LANES = 32 };

static _Thread_local int emu_lane;
static pthread_barrier_t emu_barrier;
static double emu_slots[LANES];

/* The butterfly over the lanes' values: lane l adds (or takes the max of) lane l ^ o's. */
static double emu_butterfly(double x, int max, int as_float)
{
    emu_slots[emu_lane] = x;
    pthread_barrier_wait(&emu_barrier);
    double v[LANES];
    memcpy(v, emu_slots, sizeof v);
    for (int o = LANES / 2; o > 0; o >>= 1) {
        double next[LANES];
        for (int l = 0; l < LANES; l++) {
            if (as_float) /* float arithmetic, as the GPU's float shuffles */
                next[l] = max ? fmaxf((float)v[l], (float)v[l ^ o]) : (float)v[l] + (float)v[l ^ o];
            else
                next[l] = v[l] + v[l ^ o];
        }
        memcpy(v, next, sizeof v);
    }
    pthread_barrier_wait(&emu_barrier); /* every lane has read the slots */
    return v[emu_lane];
}

#define GPT2_LANES_SUMF(x, lanes) ((float)emu_butterfly((x), 0, 1))
#define GPT2_LANES_MAXF(x, lanes) ((float)emu_butterfly((x), 1, 1))
#define GPT2_LANES_SUMD(x, lanes) emu_butterfly((x), 0, 0)
#include "gpt2_kernels.h"
#include "gpt2_rows.h"

/* Runs job(lane) on 32 threads at once, one per lane. */
typedef void (*lane_job)(int lane);

static void *lane_main(void *arg)
{
    lane_job job = *(lane_job *)((void **)arg)[0];
    emu_lane = (int)(intptr_t)((void **)arg)[1];
    job(emu_lane);
    return NULL;
}

static void run_lanes(lane_job job)
{
    pthread_t th[LANES];
    void *args[LANES][2];
    assert_int_equal(pthread_barrier_init(&emu_barrier, NULL, LANES), 0);
    for (int l = 0; l < LANES; l++) {
        args[l][0] = &job;
        args[l][1] = (void *)(intptr_t)l;
        assert_int_equal(pthread_create(&th[l], NULL, lane_main, args[l]), 0);
    }
    for (int l = 0; l < LANES; l++)
        pthread_join(th[l], NULL);
    pthread_barrier_destroy(&emu_barrier);
}

/* ---- shapes and data: rows longer and shorter than a warp, widths no multiple of it ---- */
enum { B = 2, T = 40, C = 50, V = 97, N = B * T, HEADS = 3 };

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static float *randoms(size_t n) { return test_rand_floats(&rs, n, -2.0f, 2.0f); }

/* |got - want| <= tol (|want| + floor): floor is the values' scale, where a result that
 * cancels to near zero keeps the rounding of its terms */
static void expect_close(const char *what, const float *want, const float *got, size_t n,
                         double tol, double floor)
{
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]) / (fabs((double)want[i]) + floor);
        if (!(d <= tol))
            fail_msg("%s: element %zu is %.9g with 32 lanes, %.9g with one (tolerance %g)", what, i,
                     (double)got[i], (double)want[i], tol);
    }
}

/* the inputs the jobs read, and their outputs */
static struct {
    int tok[N], tgt[N];
    float *wte, *wpe, *x, *w, *b, *d, *logits, *probs, *scores, *dscores;
    float *out, *mean, *rstd, *dx, *dw, *db, *dwte, *dwpe;
    double loss[N][LANES];
} g;

static void free_data(void)
{
    float *all[] = {g.wte,     g.wpe, g.x,    g.w,    g.b,  g.d,  g.logits, g.probs, g.scores,
                    g.dscores, g.out, g.mean, g.rstd, g.dx, g.dw, g.db,     g.dwte,  g.dwpe};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
    memset(&g, 0, sizeof g);
}

static int teardown(void **state)
{
    (void)state;
    free_data();
    return 0;
}

/* Fresh inputs, zeroed outputs. */
static void setup_data(void)
{
    free_data();
    for (int i = 0; i < N; i++)
        g.tok[i] = (i * 7) % 23, g.tgt[i] = (i * 5 + 3) % V; /* tokens repeat: runs per token */
    g.wte = randoms(V * C), g.wpe = randoms(T * C), g.x = randoms(N * C);
    g.w = randoms(C), g.b = randoms(C), g.d = randoms(N * V);
    g.logits = randoms(N * V), g.scores = randoms(HEADS * T * T),
    g.dscores = randoms(HEADS * T * T);
    g.out = calloc(N * V, 4), g.probs = calloc(N * V, 4), g.mean = calloc(N, 4);
    g.rstd = calloc(N, 4), g.dx = calloc(N * C, 4), g.dw = calloc(C, 4), g.db = calloc(C, 4);
    g.dwte = calloc(V * C, 4), g.dwpe = calloc(T * C, 4);
}

/* ---- encoder: the split keeps each element's order of additions ---- */
static int sorted_tok[N], sorted_rows[N]; /* the rows by token, stably (the GPU's CUB sort) */

static void sort_rows_by_token(void)
{
    int n = 0;
    for (int v = 0; v < V; v++)
        for (int r = 0; r < N; r++)
            if (g.tok[r] == v)
                sorted_tok[n] = v, sorted_rows[n++] = r;
}

static void encoder_job(int lane)
{
    for (int r = 0; r < N; r++)
        encoder_row_forward(g.out + (size_t)r * C, g.wte + (size_t)g.tok[r] * C,
                            g.wpe + (size_t)(r % T) * C, C, lane, LANES);
    for (int i = 0; i < N; i++) { /* warps per run of one token, as encoder_bwd_tokens */
        if (i > 0 && sorted_tok[i] == sorted_tok[i - 1])
            continue;
        int j = i + 1;
        while (j < N && sorted_tok[j] == sorted_tok[i])
            j++;
        for (int c0 = 0; c0 < C; c0 += LANES) /* a warp per slice of 32 columns */
            encoder_token_backward(g.dwte + (size_t)sorted_tok[i] * C + c0, g.d + c0,
                                   sorted_rows + i, j - i, C - c0 < LANES ? C - c0 : LANES, C, lane,
                                   LANES);
    }
    for (int e = lane; e < T * C; e += LANES) /* a thread per element of dwpe */
        g.dwpe[e] = encoder_position_backward(g.dwpe[e], g.d, B, T, C, e / C, e % C);
}

static void test_encoder(void **state)
{
    (void)state;
    setup_data();
    float *out = calloc(N * C, 4), *dwte = calloc(V * C, 4), *dwpe = calloc(T * C, 4);
    encoder_forward(out, g.tok, g.wte, g.wpe, B, T, C);
    encoder_backward(dwte, dwpe, g.d, g.tok, B, T, C);
    sort_rows_by_token();
    run_lanes(encoder_job);
    assert_memory_equal(out, g.out, N * C * sizeof(float));
    assert_memory_equal(dwte, g.dwte, V * C * sizeof(float));
    assert_memory_equal(dwpe, g.dwpe, T * C * sizeof(float));
    free(out), free(dwte), free(dwpe);
}

/* ---- layernorm ---- */
/* The GPU's backward grid: blocks of 4 warps; warp w takes rows w, w + WARPS, ... into a
 * partial dw, db of its own; a block adds its warps' partials in warp order, then the blocks'
 * sums are added in block order. */
enum { LN_BLOCKS = 3, LN_WARPS_PER_BLOCK = 4, LN_WARPS = LN_BLOCKS * LN_WARPS_PER_BLOCK };
static float ln_warp_parts[LN_WARPS][2 * C], ln_block_parts[LN_BLOCKS][2 * C];

static void layernorm_job(int lane)
{
    for (int n = 0; n < N; n++)
        layernorm_row_forward(g.out + (size_t)n * C, &g.mean[n], &g.rstd[n], g.x + (size_t)n * C,
                              g.w, g.b, C, lane, LANES);
    for (int w = 0; w < LN_WARPS; w++) {
        float *mine = ln_warp_parts[w];
        for (int c = lane; c < 2 * C; c += LANES)
            mine[c] = 0.0f;
        for (int n = w; n < N; n += LN_WARPS)
            layernorm_row_backward(g.dx + (size_t)n * C, mine, mine + C, g.d + (size_t)n * C,
                                   g.x + (size_t)n * C, g.w, g.mean[n], g.rstd[n], C, lane, LANES);
    }
    pthread_barrier_wait(&emu_barrier); /* __syncthreads */
    for (int blk = 0; blk < LN_BLOCKS; blk++)
        for (int c = lane; c < 2 * C; c += LANES)
            ln_block_parts[blk][c] =
                ordered_sum(&ln_warp_parts[blk * LN_WARPS_PER_BLOCK][c], LN_WARPS_PER_BLOCK, 2 * C);
    pthread_barrier_wait(&emu_barrier); /* the next kernel */
    for (int c = lane; c < 2 * C; c += LANES) {
        float *dst = c < C ? &g.dw[c] : &g.db[c - C];
        *dst += ordered_sum(&ln_block_parts[0][c], LN_BLOCKS, 2 * C);
    }
}

static void test_layernorm(void **state)
{
    (void)state;
    setup_data();
    float *out = calloc(N * C, 4), *mean = calloc(N, 4), *rstd = calloc(N, 4);
    float *dx = calloc(N * C, 4), *dw = calloc(C, 4), *db = calloc(C, 4);
    for (int n = 0; n < N; n++) /* lane 0 must store them */
        g.mean[n] = g.rstd[n] = NAN;
    layernorm_forward(out, mean, rstd, g.x, g.w, g.b, N, C);
    layernorm_backward(dx, dw, db, g.d, g.x, g.w, mean, rstd, N, C);
    run_lanes(layernorm_job);
    expect_close("layernorm out", out, g.out, N * C, 1e-6, 1);
    expect_close("layernorm mean", mean, g.mean, N, 1e-6, 1);
    expect_close("layernorm rstd", rstd, g.rstd, N, 1e-6, 1);
    expect_close("layernorm dinp", dx, g.dx, N * C, 1e-6, 1);
    /* dw, db: sums over the N rows of terms up to about 4 */
    expect_close("layernorm dw", dw, g.dw, C, 2e-5, 1);
    expect_close("layernorm db", db, g.db, C, 2e-5, 1);
    free(out), free(mean), free(rstd), free(dx), free(dw), free(db);
}

/* ---- causal softmax: every row t = 0 .. T-1 of HEADS heads, forward then backward ---- */
static const float kScale = 0.35f;

static void softmax_job(int lane)
{
    for (int r = 0; r < HEADS * T; r++)
        causal_softmax_row_forward(g.scores + (size_t)r * T, r % T, T, kScale, lane, LANES);
    for (int r = 0; r < HEADS * T; r++)
        causal_softmax_row_backward(g.dscores + (size_t)r * T, g.scores + (size_t)r * T, r % T, T,
                                    kScale, lane, LANES);
}

static void test_causal_softmax(void **state)
{
    (void)state;
    setup_data();
    size_t n = (size_t)HEADS * T * T;
    float *x = malloc(n * 4), *dy = malloc(n * 4), *want = malloc(n * 4), *dwant = malloc(n * 4);
    memcpy(x, g.scores, n * 4), memcpy(dy, g.dscores, n * 4);
    run_lanes(softmax_job);
    for (int r = 0; r < HEADS * T; r++) { /* the reference, in double */
        int t = r % T;
        const float *xr = x + (size_t)r * T, *dr = dy + (size_t)r * T,
                    *ar = g.scores + (size_t)r * T;
        double mx = -INFINITY, sum = 0, dot = 0;
        for (int s = 0; s <= t; s++)
            mx = fmax(mx, (double)xr[s] * kScale);
        for (int s = 0; s <= t; s++)
            sum += exp((double)xr[s] * kScale - mx);
        for (int s = 0; s <= t; s++)
            dot += (double)dr[s] * ar[s];
        for (int s = 0; s < T; s++) {
            want[(size_t)r * T + s] = s <= t ? (float)(exp((double)xr[s] * kScale - mx) / sum) : 0;
            dwant[(size_t)r * T + s] = s <= t ? (float)(ar[s] * (dr[s] - dot) * kScale) : 0;
        }
    }
    expect_close("softmax", want, g.scores, n, 1e-5, 1e-3);
    expect_close("softmax backward", dwant, g.dscores, n, 1e-5, 1e-3);
    free(x), free(dy), free(want), free(dwant);
}

/* ---- softmax + cross-entropy: each lane gets the row's loss ---- */
static void crossentropy_job(int lane)
{
    for (int n = 0; n < N; n++)
        g.loss[n][lane] = crossentropy_row_forward(
            g.probs + (size_t)n * V, g.logits + (size_t)n * V, g.tgt[n], V, lane, LANES);
}

static void crossentropy_in_place_job(int lane) /* probs over the logits, as the trainer's */
{
    for (int n = 0; n < N; n++)
        g.loss[n][lane] = crossentropy_row_forward(
            g.logits + (size_t)n * V, g.logits + (size_t)n * V, g.tgt[n], V, lane, LANES);
}

static void crossentropy_backward_job(int lane)
{
    for (int n = 0; n < N; n++)
        crossentropy_row_backward(g.out + (size_t)n * V, g.probs + (size_t)n * V, g.tgt[n], V,
                                  1.0f / N, lane, LANES);
}

static void test_crossentropy(void **state)
{
    (void)state;
    setup_data();
    float *probs = calloc(N * V, 4), *dl = calloc(N * V, 4);
    float loss = crossentropy_forward(probs, g.logits, g.tgt, N, V);
    run_lanes(crossentropy_job);
    expect_close("probs", probs, g.probs, N * V, 1e-5, 1e-3);
    double sum = 0;
    for (int n = 0; n < N; n++) {
        for (int l = 1; l < LANES; l++)
            if (g.loss[n][l] != g.loss[n][0])
                fail_msg("row %d: lane %d's loss %.17g differs from lane 0's %.17g", n, l,
                         g.loss[n][l], g.loss[n][0]);
        sum += g.loss[n][0];
    }
    assert_true(fabs(sum / N - loss) <= 1e-5 * fabs(loss));
    float *in_place = malloc(N * V * 4);
    memcpy(in_place, g.logits, N * V * 4);
    float loss_in_place = crossentropy_forward(in_place, in_place, g.tgt, N, V);
    run_lanes(crossentropy_in_place_job);
    expect_close("probs in place", in_place, g.logits, N * V, 1e-5, 1e-3);
    sum = 0;
    for (int n = 0; n < N; n++)
        sum += g.loss[n][0];
    assert_true(loss_in_place == loss);
    assert_true(fabs(sum / N - loss) <= 1e-5 * fabs(loss));
    free(in_place);
    memcpy(g.probs, probs, N * V * 4); /* the same input: the gradient is element-wise */
    crossentropy_backward(dl, probs, g.tgt, N, V);
    run_lanes(crossentropy_backward_job);
    assert_memory_equal(dl, g.out, N * V * sizeof(float));
    free(probs), free(dl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encoder),
        cmocka_unit_test(test_layernorm),
        cmocka_unit_test(test_causal_softmax),
        cmocka_unit_test(test_crossentropy),
    };
    return cmocka_run_group_tests(tests, NULL, teardown);
}
