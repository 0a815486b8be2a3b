/* SPDX-License-Identifier: MIT */
/* The prefetch scheduler's decisions (prefetch/schedule.c) on hand-made layer orders: the
 * window the prefetcher moves after a fetch (limited by the bucket of elements ahead, by the
 * gathered elements allowed live, by the lookahead and by the end of the recorded step), the
 * keep decision at a release (reuse across the forward/backward turn, within the reuse
 * distance, never over max_live) and the eviction victim (the unheld gathered layer needed
 * furthest ahead). The order is recorded the way the prefetcher records it
 * (zt_layer_order_observe for every fetch, zt_layer_order_end_step at the step's end), so the
 * tests also pin down what the decisions see of a first step, a deviation and a step's end.
 * Every expected value is worked out by hand in the comment beside it. */
#include "prefetch/layer_order.h"
#include "prefetch/schedule.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#define F ZT_FORWARD
#define B ZT_BACKWARD
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Four layers, forward 0..3 then backward 3..0: the order of a plain training step. */
static const zt_layer_order_entry fb4[] = {{0, F}, {1, F}, {2, F}, {3, F},
                                           {3, B}, {2, B}, {1, B}, {0, B}};

/* Records one step of `n` fetches and ends it: the order becomes the trace. */
static void record(zt_layer_order *t, const zt_layer_order_entry *e, int n)
{
    for (int i = 0; i < n; i++)
        assert_true(zt_layer_order_observe(t, e[i].layer, e[i].pass) >= 0);
    zt_layer_order_end_step(t);
}

/* Observes the first `k` fetches of the recorded step, each the expected one: afterwards
 * zt_layer_order_peek(t, 0) is entry k, as in the prefetcher right after fetch k-1. */
static void play(zt_layer_order *t, const zt_layer_order_entry *e, int k)
{
    for (int i = 0; i < k; i++)
        assert_int_equal(zt_layer_order_observe(t, e[i].layer, e[i].pass), 1);
}

/* `n` layers of `numel` elements each, nothing gathered. */
static void layers_init(zt_sched_layer *l, int n, int64_t numel)
{
    for (int i = 0; i < n; i++)
        l[i] = (zt_sched_layer){numel, 0, 0, 0, 0};
}

static void gathered(zt_sched_layer *l, int ready)
{
    l->gathered = 1;
    l->ready = ready;
}

static const int64_t unlimited = INT64_MAX / 4;

/* ---- the layer order as the decisions see it ---- */

/* The first step records and predicts nothing; the second predicts it, call by call. */
static void test_order_first_step_records_then_predicts(void **state)
{
    (void)state;
    zt_layer_order t = {0};
    zt_layer_order_entry e;
    /* no valid trace yet: every observe answers 0 (not "as expected") and peek finds none */
    for (int i = 0; i < COUNT(fb4); i++) {
        assert_int_equal(zt_layer_order_observe(&t, fb4[i].layer, fb4[i].pass), 0);
        assert_int_equal(zt_layer_order_peek(&t, 0, &e), 0);
    }
    zt_layer_order_end_step(&t);
    assert_int_equal(t.valid, 1);
    assert_int_equal(t.n, COUNT(fb4));
    /* step 2, before its first fetch: peek(k) is the recorded entry k */
    for (int k = 0; k < COUNT(fb4); k++) {
        assert_int_equal(zt_layer_order_peek(&t, k, &e), 1);
        assert_int_equal(e.layer, fb4[k].layer);
        assert_int_equal(e.pass, fb4[k].pass);
    }
    assert_int_equal(zt_layer_order_peek(&t, COUNT(fb4), &e), 0); /* past the step's end */
    assert_int_equal(zt_layer_order_peek(&t, -1, &e), 0);         /* before the position */
    /* after the first three fetches, peek(0) is the fourth (F3) and peek(1) the turn (B3) */
    play(&t, fb4, 3);
    assert_int_equal(zt_layer_order_peek(&t, 0, &e), 1);
    assert_int_equal(e.layer, 3);
    assert_int_equal(e.pass, F);
    assert_int_equal(zt_layer_order_peek(&t, 1, &e), 1);
    assert_int_equal(e.layer, 3);
    assert_int_equal(e.pass, B);
    assert_int_equal(t.deviations, 0);
    zt_layer_order_free(&t);
}

/* A fetch off the recorded order (same layer, other pass counts too) stops the predictions
 * for the rest of the step, is counted once, and the step's own order becomes the trace. */
static void test_order_deviation(void **state)
{
    (void)state;
    zt_layer_order t = {0};
    zt_layer_order_entry e;
    record(&t, fb4, COUNT(fb4));
    play(&t, fb4, 2);
    /* entry 2 is (2, F): (2, B) is the right layer in the wrong pass */
    assert_int_equal(zt_layer_order_observe(&t, 2, B), 0);
    assert_int_equal(t.deviated, 1);
    assert_int_equal(zt_layer_order_peek(&t, 0, &e), 0);
    /* the expected next fetch no longer counts as expected, and is not a second deviation */
    assert_int_equal(zt_layer_order_observe(&t, 2, F), 0);
    assert_int_equal(t.deviations, 1);
    zt_layer_order_end_step(&t);
    /* the new trace is this step's: F0 F1 B2 F2 */
    assert_int_equal(t.n, 4);
    assert_int_equal(t.deviated, 0);
    assert_int_equal(zt_layer_order_peek(&t, 2, &e), 1);
    assert_int_equal(e.layer, 2);
    assert_int_equal(e.pass, B);
    assert_int_equal(zt_layer_order_peek(&t, 3, &e), 1);
    assert_int_equal(e.pass, F);
    zt_layer_order_free(&t);
}

/* A step without training fetches (nothing observed) keeps the trace of the last one. */
static void test_order_empty_step_keeps_trace(void **state)
{
    (void)state;
    zt_layer_order t = {0};
    zt_layer_order_entry e;
    record(&t, fb4, COUNT(fb4));
    play(&t, fb4, 5);
    zt_layer_order_end_step(&t); /* a step cut short: 5 of the 8 fetches */
    assert_int_equal(t.n, 5);
    zt_layer_order_end_step(&t); /* nothing recorded: the 5-fetch trace stays, from its start */
    assert_int_equal(t.valid, 1);
    assert_int_equal(t.n, 5);
    assert_int_equal(zt_layer_order_peek(&t, 0, &e), 1);
    assert_int_equal(e.layer, 0);
    assert_int_equal(zt_layer_order_peek(&t, 4, &e), 1);
    assert_int_equal(e.layer, 3);
    assert_int_equal(e.pass, B);
    assert_int_equal(zt_layer_order_peek(&t, 5, &e), 0);
    zt_layer_order_free(&t);
}

/* ---- zt_sched_live ---- */

/* Only gathered layers that are not persistent count, at their full size. */
static void test_live_counts_gathered_unpersistent(void **state)
{
    (void)state;
    zt_sched_layer l[4] = {
        {10, 0, 1, 0, 0}, /* gathered, in flight: counts */
        {20, 1, 1, 1, 0}, /* persistent: resident outside the budget */
        {40, 0, 0, 0, 0}, /* not gathered */
        {80, 0, 1, 1, 1}, /* gathered, ready and held: counts */
    };
    assert_int_equal(zt_sched_live(l, 4), 10 + 80);
    assert_int_equal(zt_sched_live(l, 0), 0);
}

/* ---- zt_sched_window ---- */

/* No recorded step (first step) or a deviated one: nothing to prefetch. */
static void test_window_needs_a_valid_trace(void **state)
{
    (void)state;
    zt_sched_limits lim = {1000, unlimited, 0};
    zt_sched_layer l[4];
    int out[8];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, -1, out, 8), 0); /* no trace */
    record(&t, fb4, COUNT(fb4));
    /* with a trace: the whole step, every layer twice (8 x 100 = 800 <= 1000) */
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, -1, out, 8), 8);
    play(&t, fb4, 1);
    assert_int_equal(zt_layer_order_observe(&t, 3, F), 0); /* F3 where F1 was expected */
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, 3, out, 8), 0);
    zt_layer_order_free(&t);
}

/* A bucket of 0 (or less) turns prefetching off, whatever the trace. */
static void test_window_bucket_zero_is_off(void **state)
{
    (void)state;
    zt_sched_limits lim = {0, unlimited, 0};
    zt_sched_layer l[4];
    int out[8];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, -1, out, 8), 0);
    lim.bucket = -1;
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, -1, out, 8), 0);
    zt_layer_order_free(&t);
}

/* The start of a step (current -1): the forward layers in order, as many as the bucket of
 * elements holds. */
static void test_window_start_of_step_by_bucket(void **state)
{
    (void)state;
    zt_sched_limits lim = {250, unlimited, 0};
    zt_sched_layer l[4];
    int out[8];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    /* F0: 100 ahead; F1: 200 <= 250; F2 would make 300 > 250: stop */
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, -1, out, 8), 2);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 1);
    /* exactly full: a bucket of 300 takes F2 too (300 is not > 300), F3 would be 400 */
    lim.bucket = 300;
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, -1, out, 8), 3);
    assert_int_equal(out[2], 2);
    zt_layer_order_free(&t);
}

/* A layer larger than the bucket still goes when it is the first of the window, alone. */
static void test_window_first_layer_always_goes(void **state)
{
    (void)state;
    zt_sched_limits lim = {50, unlimited, 0};
    zt_sched_layer l[4];
    int out[8];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    /* F0 (100 > 50) goes since nothing is ahead yet; F1 would make 200 > 50 */
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, -1, out, 8), 1);
    assert_int_equal(out[0], 0);
    zt_layer_order_free(&t);
}

/* After a fetch the window starts at the next entry; ready layers are skipped and take no
 * room in the bucket, layers in flight move on and take room. */
static void test_window_after_fetch_skips_ready(void **state)
{
    (void)state;
    zt_sched_limits lim = {250, unlimited, 0};
    zt_sched_layer l[4];
    int out[8];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    play(&t, fb4, 1); /* F0 fetched: layer 0 ready */
    gathered(&l[0], 1);
    /* next entries F1 F2 F3: F1 100, F2 200, F3 300 > 250 */
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, 0, out, 8), 2);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 2);
    /* F1 already ready: skipped without counting, so F2 100, F3 200, then B3 is layer 3
     * again (not ready): 300 > 250 stops */
    gathered(&l[1], 1);
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, 0, out, 8), 2);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[1], 3);
    /* F1 in flight (gathered, not ready): it moves on again and takes its room */
    l[1].ready = 0;
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, 0, out, 8), 2);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 2);
    zt_layer_order_free(&t);
}

/* At the forward/backward turn the next entry (B3) is the layer just fetched (F3): it is
 * skipped, it is being fetched now. */
static void test_window_skips_current_at_turn(void **state)
{
    (void)state;
    zt_sched_limits lim = {250, unlimited, 0};
    zt_sched_layer l[4];
    int out[8];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    play(&t, fb4, 4);   /* F0..F3 fetched, F0..F2 dropped at their release */
    gathered(&l[3], 0); /* the fetch of F3 has not completed: not ready, yet skipped */
    /* B3 skipped (current); B2 100; B1 200; B0 would make 300 > 250 */
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, 3, out, 8), 2);
    assert_int_equal(out[0], 2);
    assert_int_equal(out[1], 1);
    /* the same position seen as fetch of another layer: B3 is then in the window */
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, 0, out, 8), 2);
    assert_int_equal(out[0], 3);
    assert_int_equal(out[1], 2);
    zt_layer_order_free(&t);
}

/* The window never lets the gathered elements pass max_live: a layer still to be gathered
 * that would stops it, even the first one (the bucket's exception is the bucket's only). */
static void test_window_limited_by_max_live(void **state)
{
    (void)state;
    zt_sched_limits lim = {1000, 300, 0};
    zt_sched_layer l[4];
    int out[8];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    play(&t, fb4, 1);
    gathered(&l[0], 1); /* live 100 */
    /* F1: 200; F2: 300 (not > 300); F3 would be 400 > 300: stop */
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, 0, out, 8), 2);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 2);
    /* with layer 3 gathered too (kept from elsewhere), live is 200: only F1 fits (300) */
    gathered(&l[3], 0);
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, 0, out, 8), 1);
    assert_int_equal(out[0], 1);
    /* with live already at 300 not even the first layer fits: the window is empty */
    gathered(&l[2], 1); /* ready: skipped, but its 100 elements are live */
    assert_int_equal(zt_sched_live(l, 4), 300);
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, 0, out, 8), 0);
    zt_layer_order_free(&t);
}

/* A layer gathered but not ready is live already: moving it on adds nothing to live. */
static void test_window_in_flight_not_counted_twice(void **state)
{
    (void)state;
    zt_sched_limits lim = {1000, 200, 0};
    zt_sched_layer l[4];
    int out[8];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    gathered(&l[0], 0); /* live 100, F0 in flight */
    /* F0 moves on and adds nothing to live; F1: live 200 (not > 200); F2: 300 > 200 stops.
     * Were F0 counted again, F1 would make 300 and the window would hold F0 alone. */
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, -1, out, 8), 2);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 1);
    zt_layer_order_free(&t);
}

/* A layer used twice within the window appears twice (it moves two stages) and counts once
 * toward max_live, twice toward the bucket. */
static void test_window_layer_twice(void **state)
{
    (void)state;
    static const zt_layer_order_entry fb2[] = {{0, F}, {1, F}, {1, B}, {0, B}};
    zt_sched_limits lim = {400, 200, 0};
    zt_sched_layer l[2];
    int out[8];
    layers_init(l, 2, 100);
    zt_layer_order t = {0};
    record(&t, fb2, COUNT(fb2));
    /* F0 live 100; F1 live 200; B1 already chosen: live stays 200 (counted again it would
     * be 300 > 200 and stop); B0 likewise; the bucket reaches 400 (not > 400) */
    assert_int_equal(zt_sched_window(&lim, &t, l, 2, -1, out, 8), 4);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[1], 1);
    assert_int_equal(out[2], 1);
    assert_int_equal(out[3], 0);
    /* a bucket of 399: B0 would make 400 > 399 */
    lim.bucket = 399;
    assert_int_equal(zt_sched_window(&lim, &t, l, 2, -1, out, 8), 3);
    zt_layer_order_free(&t);
}

/* The window ends at the end of the recorded step: what follows is the next step's, not
 * known yet. */
static void test_window_end_of_step(void **state)
{
    (void)state;
    zt_sched_limits lim = {400, unlimited, 0};
    zt_sched_layer l[4];
    int out[8];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    play(&t, fb4, 6); /* ..., B3, B2 fetched: B1 and B0 remain */
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, 2, out, 8), 2);
    assert_int_equal(out[0], 1);
    assert_int_equal(out[1], 0);
    play(&t, fb4 + 6, 2); /* B1, B0: the last fetch of the step */
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, 0, out, 8), 0);
    /* the step ends: the next step's window starts again at F0 (F0..F3: 400, B3 would
     * make 500 > 400) */
    zt_layer_order_end_step(&t);
    assert_int_equal(zt_sched_window(&lim, &t, l, 4, -1, out, 8), 4);
    assert_int_equal(out[0], 0);
    assert_int_equal(out[3], 3);
    zt_layer_order_free(&t);
}

/* No more than `max` ids are written, nor more than ZT_SCHED_LOOKAHEAD entries looked at. */
static void test_window_max_and_lookahead(void **state)
{
    (void)state;
    enum { N = ZT_SCHED_LOOKAHEAD + 6 };
    zt_layer_order_entry e[N];
    zt_sched_layer l[N];
    int out[N];
    for (int i = 0; i < N; i++)
        e[i] = (zt_layer_order_entry){i, F};
    layers_init(l, N, 1);
    zt_sched_limits lim = {1000000, unlimited, 0};
    zt_layer_order t = {0};
    record(&t, e, N);
    /* room for all N, but only the first ZT_SCHED_LOOKAHEAD entries are looked at */
    assert_int_equal(zt_sched_window(&lim, &t, l, N, -1, out, N), ZT_SCHED_LOOKAHEAD);
    assert_int_equal(out[ZT_SCHED_LOOKAHEAD - 1], ZT_SCHED_LOOKAHEAD - 1);
    /* the caller's array holds 3: three ids, the first three */
    assert_int_equal(zt_sched_window(&lim, &t, l, N, -1, out, 3), 3);
    assert_int_equal(out[2], 2);
    /* the lookahead counts entries looked at, skipped ones too: with layers 0..9 ready, the
     * window holds entries 10..63 only */
    for (int i = 0; i < 10; i++)
        gathered(&l[i], 1);
    assert_int_equal(zt_sched_window(&lim, &t, l, N, -1, out, N), ZT_SCHED_LOOKAHEAD - 10);
    assert_int_equal(out[0], 10);
    zt_layer_order_free(&t);
}

/* ---- zt_sched_keep ---- */

/* Released at the forward/backward turn, the last forward layer is the next fetch (B3):
 * kept even with a reuse distance of 0. */
static void test_keep_reuse_across_turn(void **state)
{
    (void)state;
    zt_sched_limits lim = {1000, unlimited, 0};
    zt_sched_layer l[4];
    layers_init(l, 4, 100);
    gathered(&l[3], 1);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    play(&t, fb4, 4); /* F3 fetched and released before B3 */
    /* no element comes between: distance 0 <= 0 */
    assert_int_equal(zt_sched_keep(&lim, &t, l, 4, 3), 1);
    zt_layer_order_free(&t);
}

/* The reuse distance is the elements fetched before the next use. */
static void test_keep_within_reuse_distance(void **state)
{
    (void)state;
    zt_sched_limits lim = {1000, unlimited, 200};
    zt_sched_layer l[4];
    layers_init(l, 4, 100);
    l[3].numel = 50; /* layers of different sizes: the distance is in elements */
    gathered(&l[2], 1);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    play(&t, fb4, 3); /* F2 fetched, released before F3 */
    /* F3 (50) and B3 (50) come before B2: distance 100 <= 200 */
    assert_int_equal(zt_sched_keep(&lim, &t, l, 4, 2), 1);
    lim.reuse_distance = 100; /* exactly the distance: kept */
    assert_int_equal(zt_sched_keep(&lim, &t, l, 4, 2), 1);
    lim.reuse_distance = 99;
    assert_int_equal(zt_sched_keep(&lim, &t, l, 4, 2), 0);
    zt_layer_order_free(&t);
}

/* The first layer released after its forward comes back last: F1 F2 F3 B3 B2 B1 (600)
 * before B0. */
static void test_keep_far_reuse_dropped(void **state)
{
    (void)state;
    zt_sched_limits lim = {1000, unlimited, 599};
    zt_sched_layer l[4];
    layers_init(l, 4, 100);
    gathered(&l[0], 1);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    play(&t, fb4, 1);
    assert_int_equal(zt_sched_keep(&lim, &t, l, 4, 0), 0);
    lim.reuse_distance = 600;
    assert_int_equal(zt_sched_keep(&lim, &t, l, 4, 0), 1);
    zt_layer_order_free(&t);
}

/* Gathered elements over max_live: nothing is kept, not even a layer needed next. */
static void test_keep_never_over_max_live(void **state)
{
    (void)state;
    zt_sched_limits lim = {1000, 200, 1000};
    zt_sched_layer l[4];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    play(&t, fb4, 4); /* at the turn: layer 3 is needed next (see the test above) */
    gathered(&l[3], 1);
    gathered(&l[2], 0); /* live 200: not over max_live, kept */
    assert_int_equal(zt_sched_keep(&lim, &t, l, 4, 3), 1);
    gathered(&l[1], 0); /* live 300 > 200: dropped */
    assert_int_equal(zt_sched_keep(&lim, &t, l, 4, 3), 0);
    /* persistent layers are outside max_live: making layer 1 persistent brings live to 200 */
    l[1].persistent = 1;
    assert_int_equal(zt_sched_keep(&lim, &t, l, 4, 3), 1);
    zt_layer_order_free(&t);
}

/* Not needed again in the recorded step, no trace, or a deviated step: dropped. */
static void test_keep_no_next_use(void **state)
{
    (void)state;
    zt_sched_limits lim = {1000, unlimited, unlimited};
    zt_sched_layer l[4];
    layers_init(l, 4, 100);
    gathered(&l[0], 1);
    zt_layer_order t = {0};
    /* first step: no trace to look in */
    assert_int_equal(zt_sched_keep(&lim, &t, l, 4, 0), 0);
    record(&t, fb4, COUNT(fb4));
    /* the step's last fetch (B0): its next use is in the next step, not looked at */
    play(&t, fb4, 8);
    assert_int_equal(zt_sched_keep(&lim, &t, l, 4, 0), 0);
    zt_layer_order_end_step(&t);
    /* a deviated step: F1 first, where F0 was expected; F0's next use is unknown */
    assert_int_equal(zt_layer_order_observe(&t, 1, F), 0);
    assert_int_equal(zt_sched_keep(&lim, &t, l, 4, 0), 0);
    zt_layer_order_free(&t);
}

/* A next use more than ZT_SCHED_LOOKAHEAD entries ahead is no next use. */
static void test_keep_lookahead(void **state)
{
    (void)state;
    /* layer 0, then `fill` other layers of 0 elements, then layer 0 again */
    enum { N = ZT_SCHED_LOOKAHEAD + 2 };
    zt_layer_order_entry e[N];
    zt_sched_layer l[N];
    zt_sched_limits lim = {1000, unlimited, 0};
    layers_init(l, N, 0);
    l[0].numel = 100;
    gathered(&l[0], 1);
    for (int fill = ZT_SCHED_LOOKAHEAD - 1; fill <= ZT_SCHED_LOOKAHEAD; fill++) {
        zt_layer_order t = {0};
        e[0] = (zt_layer_order_entry){0, F};
        for (int i = 1; i <= fill; i++)
            e[i] = (zt_layer_order_entry){i, F};
        e[fill + 1] = (zt_layer_order_entry){0, B};
        record(&t, e, fill + 2);
        play(&t, e, 1);
        /* the next use is at peek(fill): 63 is looked at (distance 0: kept), 64 is not */
        assert_int_equal(zt_sched_keep(&lim, &t, l, N, 0), fill < ZT_SCHED_LOOKAHEAD);
        zt_layer_order_free(&t);
    }
}

/* ---- zt_sched_victim ---- */

/* Mid-backward: the unheld gathered layer needed furthest ahead goes first. */
static void test_victim_furthest_next_use(void **state)
{
    (void)state;
    zt_sched_layer l[4];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    play(&t, fb4, 4); /* B3 B2 B1 B0 remain: peek 0..3 */
    for (int i = 0; i < 4; i++)
        gathered(&l[i], 1);
    l[3].held = 1; /* being used: never a victim */
    /* next uses: layer 2 at 1, layer 1 at 2, layer 0 at 3: layer 0 */
    assert_int_equal(zt_sched_victim(&t, l, 4), 0);
    l[0].gathered = 0; /* dropped: next is layer 1 */
    assert_int_equal(zt_sched_victim(&t, l, 4), 1);
    l[1].persistent = 1; /* resident: not evictable, layer 2 it is */
    assert_int_equal(zt_sched_victim(&t, l, 4), 2);
    l[2].held = 2;
    assert_int_equal(zt_sched_victim(&t, l, 4), -1); /* everything held or not gathered */
    zt_layer_order_free(&t);
}

/* A layer not needed again in the step beats any that is; among those, the lowest id. */
static void test_victim_not_needed_again(void **state)
{
    (void)state;
    zt_sched_layer l[4];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));
    play(&t, fb4, 7); /* only B0 remains */
    gathered(&l[0], 1);
    gathered(&l[2], 1);
    gathered(&l[3], 1);
    /* 0 is needed at peek 0, 2 and 3 never: both as far, the first found (2) goes */
    assert_int_equal(zt_sched_victim(&t, l, 4), 2);
    l[2].held = 1;
    assert_int_equal(zt_sched_victim(&t, l, 4), 3);
    l[3].held = 1;
    assert_int_equal(zt_sched_victim(&t, l, 4), 0); /* needed next, but the only one */
    zt_layer_order_free(&t);
}

/* Without a usable trace every layer is "never needed": the lowest unheld gathered id. */
static void test_victim_without_trace(void **state)
{
    (void)state;
    zt_sched_layer l[4];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    assert_int_equal(zt_sched_victim(&t, l, 4), -1); /* nothing gathered */
    gathered(&l[1], 1);
    gathered(&l[3], 0);
    assert_int_equal(zt_sched_victim(&t, l, 4), 1);
    record(&t, fb4, COUNT(fb4));
    /* a valid trace at the step's start: 1 is needed at peek 1, 3 at peek 3: 3 */
    assert_int_equal(zt_sched_victim(&t, l, 4), 3);
    /* deviated: back to the lowest id */
    assert_int_equal(zt_layer_order_observe(&t, 2, F), 0);
    assert_int_equal(zt_sched_victim(&t, l, 4), 1);
    zt_layer_order_free(&t);
}

/* Beyond the lookahead a use counts as none: it ties with a layer not used at all. */
static void test_victim_lookahead(void **state)
{
    (void)state;
    enum { N = ZT_SCHED_LOOKAHEAD + 2 };
    zt_layer_order_entry e[N];
    zt_sched_layer l[N];
    layers_init(l, N, 1);
    /* 64 fillers (layers 2..65), then layer 0: its use is at peek 64, past the lookahead */
    for (int i = 0; i < ZT_SCHED_LOOKAHEAD; i++)
        e[i] = (zt_layer_order_entry){i + 2, F};
    e[ZT_SCHED_LOOKAHEAD] = (zt_layer_order_entry){0, F};
    zt_layer_order t = {0};
    record(&t, e, ZT_SCHED_LOOKAHEAD + 1);
    gathered(&l[0], 1);                      /* used at peek 64: not seen */
    gathered(&l[1], 1);                      /* never used */
    gathered(&l[ZT_SCHED_LOOKAHEAD + 1], 1); /* used at peek 63: seen */
    /* 0 and 1 tie at "never": 0, the first, goes (were peek 64 seen, 1 would go) */
    assert_int_equal(zt_sched_victim(&t, l, N), 0);
    l[1].held = 1;
    /* 0 (unseen use) is further than 65 (peek 63) */
    assert_int_equal(zt_sched_victim(&t, l, N), 0);
    l[0].held = 1;
    assert_int_equal(zt_sched_victim(&t, l, N), ZT_SCHED_LOOKAHEAD + 1);
    zt_layer_order_free(&t);
}

/* ---- a whole step ---- */

/* A second step played the way the prefetcher plays it: at each fetch the window, at each
 * release the keep decision, with the layers' states updated by hand (a windowed layer is
 * taken to complete before its fetch). Bucket 200: two layers ahead; reuse distance 0: only
 * the turn's layer is kept; max_live unlimited. */
static void test_step_forward_backward(void **state)
{
    (void)state;
    zt_sched_limits lim = {200, unlimited, 0};
    zt_sched_layer l[4];
    int out[8];
    layers_init(l, 4, 100);
    zt_layer_order t = {0};
    record(&t, fb4, COUNT(fb4));

    /* expected windows after each fetch, computed from the states at that point:
     * F0: nothing ready but 0 (current): F1 F2 (200); then F1 F2 are in flight.
     * F1: F2 in flight moves on (100), F3 (200).
     * F2: F3 (100), B3 is layer 3 again, still in flight (200).
     * F3: B3 is current; B2 was dropped at its release: B2 (100), B1 (200).
     * B3: B2, B1 in flight: B2 B1.
     * B2: B1 (100), B0 (200).
     * B1: B0.
     * B0: the end of the step: nothing. */
    static const int want_n[8] = {2, 2, 2, 2, 2, 2, 1, 0};
    static const int want[8][2] = {{1, 2}, {2, 3}, {3, 3},  {2, 1},
                                   {2, 1}, {1, 0}, {0, -1}, {-1, -1}};
    /* expected keep decisions at each release: only F3 (B3 is next) */
    static const int want_keep[8] = {0, 0, 0, 1, 0, 0, 0, 0};
    for (int i = 0; i < COUNT(fb4); i++) {
        int id = fb4[i].layer;
        play(&t, fb4 + i, 1);
        if (!l[id].gathered)
            gathered(&l[id], 0); /* the fetch starts its gather, then moves the window */
        int k = zt_sched_window(&lim, &t, l, 4, id, out, 8);
        assert_int_equal(k, want_n[i]);
        for (int j = 0; j < k; j++) {
            assert_int_equal(out[j], want[i][j]);
            l[out[j]].gathered = 1; /* in flight */
        }
        l[id].ready = 1; /* the fetch waits for its layer, then it is used and released */
        int keep = zt_sched_keep(&lim, &t, l, 4, id);
        assert_int_equal(keep, want_keep[i]);
        if (!keep)
            l[id].gathered = l[id].ready = 0;
    }
    zt_layer_order_end_step(&t);
    zt_layer_order_free(&t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_first_step_records_then_predicts),
        cmocka_unit_test(test_order_deviation),
        cmocka_unit_test(test_order_empty_step_keeps_trace),
        cmocka_unit_test(test_live_counts_gathered_unpersistent),
        cmocka_unit_test(test_window_needs_a_valid_trace),
        cmocka_unit_test(test_window_bucket_zero_is_off),
        cmocka_unit_test(test_window_start_of_step_by_bucket),
        cmocka_unit_test(test_window_first_layer_always_goes),
        cmocka_unit_test(test_window_after_fetch_skips_ready),
        cmocka_unit_test(test_window_skips_current_at_turn),
        cmocka_unit_test(test_window_limited_by_max_live),
        cmocka_unit_test(test_window_in_flight_not_counted_twice),
        cmocka_unit_test(test_window_layer_twice),
        cmocka_unit_test(test_window_end_of_step),
        cmocka_unit_test(test_window_max_and_lookahead),
        cmocka_unit_test(test_keep_reuse_across_turn),
        cmocka_unit_test(test_keep_within_reuse_distance),
        cmocka_unit_test(test_keep_far_reuse_dropped),
        cmocka_unit_test(test_keep_never_over_max_live),
        cmocka_unit_test(test_keep_no_next_use),
        cmocka_unit_test(test_keep_lookahead),
        cmocka_unit_test(test_victim_furthest_next_use),
        cmocka_unit_test(test_victim_not_needed_again),
        cmocka_unit_test(test_victim_without_trace),
        cmocka_unit_test(test_victim_lookahead),
        cmocka_unit_test(test_step_forward_backward),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
