/* SPDX-License-Identifier: MIT */
// Fused causal self-attention on the GPU (flash attention: tiles in shared memory and an
// online softmax), forward and backward, for head sizes gpt2_flash_head_size_ok accepts
// (multiples of 16 up to 128). Nothing of T x T is stored: the forward keeps each row's
// logsumexp (lse[b, h, t] = log sum_s exp(scale q_t . k_s), s <= t), from which the backward
// recomputes the softmax a tile at a time; tiles wholly after the diagonal (every key after
// every query of the tile) are never computed.
//
// A block is 256 threads as 16 x 16 (ty, tx). In a tile of scores of rows r and keys c the
// thread (ty, tx) owns rows ty + 16 i and keys tx + 16 j; a row's 16 owners are 16
// consecutive lanes of one warp, which meet in shuffle butterflies (offsets 8 .. 1). In an
// output tile of rows (or keys) and head dimensions it owns rows ty + 16 i and dimensions
// tx + 16 d (16 consecutive floats per row group: coalesced loads and stores). Tiles are kept
// with rows of HS + 1 floats so that 16 threads reading 16 rows at one column hit 16 banks.
//
// Forward: a block per (b, h, tile of BR query rows), longest (last) tiles first; it walks
// the key tiles up to its last row, holding the output rows and each row's running maximum
// and sum in registers.
// Backward (no atomics, so runs repeat bit for bit): first a block per (b, h, tile of query
// rows) for dq, which also writes D[r] = dout_r . out_r to the scratch; then a block per
// (b, h, tile of keys) for dk and dv, walking the query tiles from the diagonal on. Each
// gradient element has one writer, which adds it into dqkv.
//
// Activations (qkv, out, dout, dqkv) are fp32 or bf16 (A, the kernels' template parameter:
// gpt2_ops' bf16 activations): read through load_in and written through store_act, widened on
// the way in and rounded to nearest even once on the way out (gpt2_rows.h's bit functions);
// the tiles, the softmax statistics (lse, D) and all arithmetic stay fp32.
#include "gpt2_cuda.h"
#include "gpt2_rows.h"

#include <cuda_runtime.h>
#include <math.h>
#include <type_traits>

// Register arrays stay registers only when their loops unroll (nvcc; the stand-in's host
// compiler has no such pragma and needs none).
#ifdef __NVCC__
#define GPT2_UNROLL _Pragma("unroll")
#define GPT2_UNROLL_BY4 _Pragma("unroll 4")
#else
#define GPT2_UNROLL
#define GPT2_UNROLL_BY4
#endif

namespace
{

constexpr int kSide = 16;               // threads per side of the block
constexpr int kThreads = kSide * kSide; // 256
constexpr unsigned kFull = 0xffffffffu;

// Tile sizes by head size, within the 48 KiB of static shared memory a block gets without
// opting in (scripts/check-kernel-resources.sh checks it): forward BR query rows x BC keys,
// backward BB x BB.
template <int HS> constexpr int kFwdRows = HS <= 64 ? 64 : 32;
template <int HS> constexpr int kFwdCols = HS <= 64 ? 32 : 16;
template <int HS> constexpr int kBwdSide = HS <= 64 ? 32 : 16;

// The block's shared memory, one array that each kernel carves into its tiles (one array for
// all kernels and head sizes: the stand-in keeps a checked copy of every __shared__ array per
// host thread). 41 KiB: the largest carving (flash_bwd_dkv at head size 64) fits, within the
// 48 KiB a block gets without opting in.
constexpr int kArenaFloats = 10496;
__shared__ float arena[kArenaFloats];

// A tile: the arena's elements from off on.
template <typename A> struct Part {
    A &a;
    int off;
    __device__ decltype(auto) operator[](int i) const { return a[off + i]; }
};
template <typename A> __device__ Part<A> part(A &a, int off) { return Part<A>{a, off}; }

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

int launched() { return static_cast<int>(cudaGetLastError()); }

// Every read of the kernels' inputs (q, k, v, out, dout, and dqkv where it adds) and every
// write of their outputs (out, dqkv): fp32 as is, bf16 widened / rounded once.
__device__ __forceinline__ float load_in(const float *p) { return *p; }
__device__ __forceinline__ float load_in(const gpt2_bf16 *p) { return gpt2_bf16_widen(*p); }
__device__ __forceinline__ void store_act(float *p, float v) { *p = v; }
__device__ __forceinline__ void store_act(gpt2_bf16 *p, float v) { *p = gpt2_bf16_round(v); }

// The sum and maximum of a row's 16 owners (consecutive lanes), returned to each of them.
__device__ __forceinline__ float row_sum(float v)
{
    for (int o = kSide / 2; o > 0; o >>= 1)
        v += __shfl_xor_sync(kFull, v, o);
    return v;
}
__device__ __forceinline__ float row_max(float v)
{
    for (int o = kSide / 2; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(kFull, v, o));
    return v;
}

// dst[r * (HS + 1) + d] = src[(t0 + r) * stride + d] for r < R, d < HS; rows at or past T are
// zeros. src is a head's column block of row 0 of its sequence.
template <int R, int HS, typename Tile, typename A>
__device__ __forceinline__ void load_tile(Tile &dst, const A *src, int stride, int t0, int T)
{
    for (int e = threadIdx.x; e < R * HS; e += kThreads) {
        int r = e / HS, d = e % HS;
        dst[r * (HS + 1) + d] = t0 + r < T ? load_in(src + (size_t)(t0 + r) * stride + d) : 0.0f;
    }
}

// s[i][j] = a_row(ty + 16 i) . b_row(tx + 16 j) over HS, rows of HS + 1 floats.
template <int RM, int CM, int HS, typename TA, typename TB>
__device__ __forceinline__ void tile_dots(float (&s)[RM][CM], TA &a, TB &b)
{
    int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
    GPT2_UNROLL
    for (int i = 0; i < RM; i++) {
        GPT2_UNROLL
        for (int j = 0; j < CM; j++)
            s[i][j] = 0.0f;
    }
    GPT2_UNROLL_BY4
    for (int k = 0; k < HS; k++) {
        float av[RM], bv[CM];
        GPT2_UNROLL
        for (int i = 0; i < RM; i++)
            av[i] = a[(ty + kSide * i) * (HS + 1) + k];
        GPT2_UNROLL
        for (int j = 0; j < CM; j++)
            bv[j] = b[(tx + kSide * j) * (HS + 1) + k];
        GPT2_UNROLL
        for (int i = 0; i < RM; i++) {
            GPT2_UNROLL
            for (int j = 0; j < CM; j++)
                s[i][j] += av[i] * bv[j];
        }
    }
}

// acc[i][d] += sum_{x < X} w[x * WLD + col(ty + 16 i)] * m[x * (HS + 1) + tx + 16 d] where
// col(c) = c: the transpose of w (rows x of w) times m. With TRANS false, w[(ty + 16 i) * WLD
// + x] instead (w times m).
template <bool TRANS, int X, int WLD, int RM, int DM, int HS, typename TW, typename TM>
__device__ __forceinline__ void tile_mma(float (&acc)[RM][DM], TW &w, TM &m)
{
    int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
    GPT2_UNROLL_BY4
    for (int x = 0; x < X; x++) {
        float wv[RM], mv[DM];
        GPT2_UNROLL
        for (int i = 0; i < RM; i++)
            wv[i] = TRANS ? w[x * WLD + ty + kSide * i] : w[(ty + kSide * i) * WLD + x];
        GPT2_UNROLL
        for (int d = 0; d < DM; d++)
            mv[d] = m[x * (HS + 1) + tx + kSide * d];
        GPT2_UNROLL
        for (int i = 0; i < RM; i++) {
            GPT2_UNROLL
            for (int d = 0; d < DM; d++)
                acc[i][d] += wv[i] * mv[d];
        }
    }
}

// grid (query tiles, B * NH)
template <int HS, typename A>
__global__ void __launch_bounds__(kThreads, 1)
    flash_fwd(A *out, float *lse, const A *qkv, int T, int NH, float scale)
{
    constexpr int BR = kFwdRows<HS>, BC = kFwdCols<HS>;
    constexpr int RM = BR / kSide, CM = BC / kSide, DM = HS / kSide, LD = HS + 1;
    static_assert(BR * LD + 2 * BC * LD + BR * BC <= kArenaFloats, "tiles past the arena");
    auto q_s = part(arena, 0), k_s = part(arena, BR * LD), v_s = part(arena, (BR + BC) * LD);
    auto p_s = part(arena, (BR + 2 * BC) * LD);
    int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    int r0 = (int)(gridDim.x - 1 - blockIdx.x) * BR; // the longest tiles first
    int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
    const A *base = qkv + (size_t)b * T * 3 * C + (size_t)h * HS;
    load_tile<BR, HS>(q_s, base, 3 * C, r0, T);
    float m[RM], l[RM], o[RM][DM];
    GPT2_UNROLL
    for (int i = 0; i < RM; i++) {
        m[i] = -INFINITY, l[i] = 0.0f;
        GPT2_UNROLL
        for (int d = 0; d < DM; d++)
            o[i][d] = 0.0f;
    }
    int last = (T < r0 + BR ? T : r0 + BR) - 1; // the tile's last row: no key after it is computed
    for (int c0 = 0; c0 <= last; c0 += BC) {
        __syncthreads(); // the last tile's reads of k_s, v_s, p_s are done
        load_tile<BC, HS>(k_s, base + C, 3 * C, c0, T);
        load_tile<BC, HS>(v_s, base + 2 * C, 3 * C, c0, T);
        __syncthreads();
        float s[RM][CM];
        tile_dots<RM, CM, HS>(s, q_s, k_s);
        GPT2_UNROLL
        for (int i = 0; i < RM; i++) {
            int r = r0 + ty + kSide * i;
            float mx = -INFINITY;
            GPT2_UNROLL
            for (int j = 0; j < CM; j++) {
                int c = c0 + tx + kSide * j;
                s[i][j] = c > r || c >= T ? -INFINITY : s[i][j] * scale;
                mx = fmaxf(mx, s[i][j]);
            }
            // key 0 is in every row's first tile: the maximum is finite from there on
            float mnew = fmaxf(m[i], row_max(mx));
            float alpha = expf(m[i] - mnew), sum = 0.0f;
            GPT2_UNROLL
            for (int j = 0; j < CM; j++) {
                float p = s[i][j] == -INFINITY ? 0.0f : expf(s[i][j] - mnew);
                p_s[(ty + kSide * i) * BC + tx + kSide * j] = p;
                sum += p;
            }
            l[i] = l[i] * alpha + row_sum(sum);
            m[i] = mnew;
            GPT2_UNROLL
            for (int d = 0; d < DM; d++)
                o[i][d] *= alpha;
        }
        __syncthreads();
        tile_mma<false, BC, BC, RM, DM, HS>(o, p_s, v_s);
    }
    GPT2_UNROLL
    for (int i = 0; i < RM; i++) {
        int r = r0 + ty + kSide * i;
        if (r >= T)
            continue;
        A *dst = out + ((size_t)b * T + r) * C + (size_t)h * HS;
        GPT2_UNROLL
        for (int d = 0; d < DM; d++)
            store_act(&dst[tx + kSide * d], o[i][d] / l[i]);
        if (tx == 0)
            lse[(size_t)bh * T + r] = m[i] + logf(l[i]);
    }
}

// The backward's shared pieces for rows r (queries) and keys c of a BB x BB tile: p = the
// softmax at (r, c) from the score and lse, ds = p (dp - D_r) with dp = dout_r . v_c. Masked
// (c > r, or either past T): 0.
__device__ __forceinline__ void softmax_grad(float &p, float &ds, float s, float dp, float lse_r,
                                             float d_r, int r, int c, int T, float scale)
{
    bool masked = c > r || r >= T || c >= T;
    p = masked ? 0.0f : expf(s * scale - lse_r);
    ds = p * (dp - d_r);
}

// p and ds (softmax_grad) of the thread's (row, key) pairs of the tile of query rows r0 + ...
// (q_s, do_s) and keys c0 + ... (k_s, v_s); lse_r, d_r: its rows' logsumexp and dout . out.
template <int RM, int HS, typename TQ, typename TK, typename TD, typename TV>
__device__ __forceinline__ void tile_grads(float (&p)[RM][RM], float (&ds)[RM][RM], TQ &q_s,
                                           TK &k_s, TD &do_s, TV &v_s, const float (&lse_r)[RM],
                                           const float (&d_r)[RM], int r0, int c0, int T,
                                           float scale)
{
    int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
    float s[RM][RM], dp[RM][RM];
    tile_dots<RM, RM, HS>(s, q_s, k_s);
    tile_dots<RM, RM, HS>(dp, do_s, v_s);
    GPT2_UNROLL
    for (int i = 0; i < RM; i++) {
        GPT2_UNROLL
        for (int j = 0; j < RM; j++)
            softmax_grad(p[i][j], ds[i][j], s[i][j], dp[i][j], lse_r[i], d_r[i],
                         r0 + ty + kSide * i, c0 + tx + kSide * j, T, scale);
    }
}

// dst[(t0 + ty + 16 i) * stride + tx + 16 d] += factor * acc[i][d] for the rows before T.
template <int RM, int DM, typename A>
__device__ __forceinline__ void add_rows(A *dst, int stride, int t0, int T,
                                         const float (&acc)[RM][DM], float factor)
{
    int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
    GPT2_UNROLL
    for (int i = 0; i < RM; i++) {
        int t = t0 + ty + kSide * i;
        if (t >= T)
            continue;
        GPT2_UNROLL
        for (int d = 0; d < DM; d++) {
            A *at = &dst[(size_t)t * stride + tx + kSide * d];
            store_act(at, load_in(at) + factor * acc[i][d]);
        }
    }
}

// grid (query tiles, B * NH): dq of its rows, and D of its rows into dsum.
template <int HS, typename A>
__global__ void __launch_bounds__(kThreads, 1)
    flash_bwd_dq(A *dqkv, float *dsum, const A *dout, const A *qkv, const A *out, const float *lse,
                 int T, int NH, float scale)
{
    constexpr int BB = kBwdSide<HS>;
    constexpr int RM = BB / kSide, DM = HS / kSide, LD = HS + 1;
    static_assert(4 * BB * LD + BB * BB <= kArenaFloats, "tiles past the arena");
    auto q_s = part(arena, 0), do_s = part(arena, BB * LD), k_s = part(arena, 2 * BB * LD);
    auto v_s = part(arena, 3 * BB * LD), ds_s = part(arena, 4 * BB * LD);
    int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    int r0 = (int)(gridDim.x - 1 - blockIdx.x) * BB;
    int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
    const A *base = qkv + (size_t)b * T * 3 * C + (size_t)h * HS;
    const A *dbase = dout + (size_t)b * T * C + (size_t)h * HS;
    const A *obase = out + (size_t)b * T * C + (size_t)h * HS;
    load_tile<BB, HS>(q_s, base, 3 * C, r0, T);
    load_tile<BB, HS>(do_s, dbase, C, r0, T);
    float lse_r[RM], d_r[RM], dq[RM][DM];
    GPT2_UNROLL
    for (int i = 0; i < RM; i++) {
        int r = r0 + ty + kSide * i;
        float part = 0.0f;
        GPT2_UNROLL
        for (int d = 0; d < DM && r < T; d++) {
            size_t at = (size_t)r * C + tx + kSide * d;
            part += load_in(dbase + at) * load_in(obase + at);
        }
        d_r[i] = row_sum(part);
        lse_r[i] = r < T ? lse[(size_t)bh * T + r] : 0.0f;
        if (r < T && tx == 0)
            dsum[(size_t)bh * T + r] = d_r[i];
        GPT2_UNROLL
        for (int d = 0; d < DM; d++)
            dq[i][d] = 0.0f;
    }
    int last = (T < r0 + BB ? T : r0 + BB) - 1;
    for (int c0 = 0; c0 <= last; c0 += BB) {
        __syncthreads(); // the last tile's reads of k_s, v_s, ds_s are done
        load_tile<BB, HS>(k_s, base + C, 3 * C, c0, T);
        load_tile<BB, HS>(v_s, base + 2 * C, 3 * C, c0, T);
        __syncthreads();
        float p[RM][RM], ds[RM][RM];
        tile_grads<RM, HS>(p, ds, q_s, k_s, do_s, v_s, lse_r, d_r, r0, c0, T, scale);
        GPT2_UNROLL
        for (int i = 0; i < RM; i++) {
            GPT2_UNROLL
            for (int j = 0; j < RM; j++)
                ds_s[(ty + kSide * i) * BB + tx + kSide * j] = ds[i][j];
        }
        __syncthreads();
        tile_mma<false, BB, BB, RM, DM, HS>(dq, ds_s, k_s);
    }
    add_rows(dqkv + (size_t)b * T * 3 * C + (size_t)h * HS, 3 * C, r0, T, dq, scale);
}

// grid (key tiles, B * NH): dk and dv of its keys, after flash_bwd_dq wrote D to dsum.
template <int HS, typename A>
__global__ void __launch_bounds__(kThreads, 1)
    flash_bwd_dkv(A *dqkv, const float *dsum, const A *dout, const A *qkv, const float *lse, int T,
                  int NH, float scale)
{
    constexpr int BB = kBwdSide<HS>;
    constexpr int RM = BB / kSide, DM = HS / kSide, LD = HS + 1;
    static_assert(4 * BB * LD + 2 * BB * BB + 2 * BB <= kArenaFloats, "tiles past the arena");
    auto q_s = part(arena, 0), do_s = part(arena, BB * LD), k_s = part(arena, 2 * BB * LD);
    auto v_s = part(arena, 3 * BB * LD), p_s = part(arena, 4 * BB * LD);
    auto ds_s = part(arena, 4 * BB * LD + BB * BB), lse_s = part(arena, 4 * BB * LD + 2 * BB * BB);
    auto d_s = part(arena, 4 * BB * LD + 2 * BB * BB + BB);
    int bh = blockIdx.y, b = bh / NH, h = bh % NH, C = NH * HS;
    int c0 = (int)blockIdx.x * BB; // the first key tiles have the most queries: first
    int tx = threadIdx.x % kSide, ty = threadIdx.x / kSide;
    const A *base = qkv + (size_t)b * T * 3 * C + (size_t)h * HS;
    const A *dbase = dout + (size_t)b * T * C + (size_t)h * HS;
    load_tile<BB, HS>(k_s, base + C, 3 * C, c0, T);
    load_tile<BB, HS>(v_s, base + 2 * C, 3 * C, c0, T);
    float dk[RM][DM], dv[RM][DM];
    GPT2_UNROLL
    for (int i = 0; i < RM; i++) {
        GPT2_UNROLL
        for (int d = 0; d < DM; d++)
            dk[i][d] = dv[i][d] = 0.0f;
    }
    for (int r0 = c0; r0 < T; r0 += BB) { // no query before the tile's first key sees it
        __syncthreads();                  // the last tile's reads are done
        load_tile<BB, HS>(q_s, base, 3 * C, r0, T);
        load_tile<BB, HS>(do_s, dbase, C, r0, T);
        if (threadIdx.x < BB) {
            int r = r0 + (int)threadIdx.x;
            lse_s[threadIdx.x] = r < T ? lse[(size_t)bh * T + r] : 0.0f;
            d_s[threadIdx.x] = r < T ? dsum[(size_t)bh * T + r] : 0.0f;
        }
        __syncthreads();
        float lse_r[RM], d_r[RM], p[RM][RM], ds[RM][RM];
        GPT2_UNROLL
        for (int i = 0; i < RM; i++)
            lse_r[i] = lse_s[ty + kSide * i], d_r[i] = d_s[ty + kSide * i];
        tile_grads<RM, HS>(p, ds, q_s, k_s, do_s, v_s, lse_r, d_r, r0, c0, T, scale);
        GPT2_UNROLL
        for (int i = 0; i < RM; i++) {
            GPT2_UNROLL
            for (int j = 0; j < RM; j++) {
                int at = (ty + kSide * i) * BB + tx + kSide * j;
                p_s[at] = p[i][j];
                ds_s[at] = ds[i][j];
            }
        }
        __syncthreads();
        tile_mma<true, BB, BB, RM, DM, HS>(dv, p_s, do_s);
        tile_mma<true, BB, BB, RM, DM, HS>(dk, ds_s, q_s);
    }
    A *head = dqkv + (size_t)b * T * 3 * C + (size_t)h * HS;
    add_rows(head + C, 3 * C, c0, T, dk, scale);
    add_rows(head + 2 * C, 3 * C, c0, T, dv, 1.0f);
}

unsigned tiles(int T, int side) { return static_cast<unsigned>((T + side - 1) / side); }

template <int HS, typename A>
int forward(A *out, float *lse, const A *qkv, int B, int T, int NH, cudaStream_t s)
{
    dim3 grid(tiles(T, kFwdRows<HS>), static_cast<unsigned>(B * NH));
    auto *flash_fwd_hs = flash_fwd<HS, A>; // (the stand-in's launch rewrite takes a plain name)
    flash_fwd_hs<<<grid, kThreads, 0, s>>>(out, lse, qkv, T, NH, 1.0f / sqrtf((float)HS));
    return launched();
}

template <int HS, typename A>
int backward(A *dqkv, float *dsum, const A *dout, const A *qkv, const A *out, const float *lse,
             int B, int T, int NH, cudaStream_t s)
{
    dim3 grid(tiles(T, kBwdSide<HS>), static_cast<unsigned>(B * NH));
    float scale = 1.0f / sqrtf((float)HS);
    auto *flash_bwd_dq_hs = flash_bwd_dq<HS, A>;
    auto *flash_bwd_dkv_hs = flash_bwd_dkv<HS, A>;
    flash_bwd_dq_hs<<<grid, kThreads, 0, s>>>(dqkv, dsum, dout, qkv, out, lse, T, NH, scale);
    int r = launched();
    if (r)
        return r;
    flash_bwd_dkv_hs<<<grid, kThreads, 0, s>>>(dqkv, dsum, dout, qkv, lse, T, NH, scale);
    return launched();
}

// f(std::integral_constant<int, HS>) for the call's head size HS: 0 where there is nothing to
// do, cudaErrorInvalidValue (nothing queued) where C does not split into NH heads of a size
// the kernels are instantiated for, the sizes gpt2_flash_head_size_ok accepts.
template <typename F> int with_head_size(int B, int T, int C, int NH, F &&f)
{
    if (B <= 0 || T <= 0 || NH <= 0)
        return 0;
    if (C % NH)
        return static_cast<int>(cudaErrorInvalidValue);
    switch (C / NH) {
#define GPT2_FLASH_CASE(hs) \
    case hs:                \
        return f(std::integral_constant<int, hs>{});
        GPT2_FLASH_CASE(16)
        GPT2_FLASH_CASE(32)
        GPT2_FLASH_CASE(48)
        GPT2_FLASH_CASE(64)
        GPT2_FLASH_CASE(80)
        GPT2_FLASH_CASE(96)
        GPT2_FLASH_CASE(112)
        GPT2_FLASH_CASE(128)
#undef GPT2_FLASH_CASE
    default:
        return static_cast<int>(cudaErrorInvalidValue);
    }
}

template <typename A>
int flash_forward(A *out, float *lse, const A *qkv, int B, int T, int C, int NH, void *stream)
{
    return with_head_size(B, T, C, NH, [&](auto hs) {
        return forward<decltype(hs)::value>(out, lse, qkv, B, T, NH, as_stream(stream));
    });
}

template <typename A>
int flash_backward(A *dqkv, const A *dout, const A *qkv, const A *out, const float *lse, int B,
                   int T, int C, int NH, float *scratch, void *stream)
{
    return with_head_size(B, T, C, NH, [&](auto hs) {
        return backward<decltype(hs)::value>(dqkv, scratch, dout, qkv, out, lse, B, T, NH,
                                             as_stream(stream));
    });
}

} // namespace

extern "C" int gpt2_cuda_flash_forward(float *out, float *lse, const float *qkv, int B, int T,
                                       int C, int NH, void *stream)
{
    return flash_forward(out, lse, qkv, B, T, C, NH, stream);
}

extern "C" int gpt2_cuda_flash_forward_bf16(unsigned short *out, float *lse,
                                            const unsigned short *qkv, int B, int T, int C, int NH,
                                            void *stream)
{
    return flash_forward(out, lse, qkv, B, T, C, NH, stream);
}

extern "C" size_t gpt2_cuda_flash_backward_scratch(int B, int T, int NH)
{
    return (size_t)B * NH * T;
}

extern "C" int gpt2_cuda_flash_backward(float *dqkv, const float *dout, const float *qkv,
                                        const float *out, const float *lse, int B, int T, int C,
                                        int NH, float *scratch, void *stream)
{
    return flash_backward(dqkv, dout, qkv, out, lse, B, T, C, NH, scratch, stream);
}

extern "C" int gpt2_cuda_flash_backward_bf16(unsigned short *dqkv, const unsigned short *dout,
                                             const unsigned short *qkv, const unsigned short *out,
                                             const float *lse, int B, int T, int C, int NH,
                                             float *scratch, void *stream)
{
    return flash_backward(dqkv, dout, qkv, out, lse, B, T, C, NH, scratch, stream);
}
