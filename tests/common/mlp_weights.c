/* SPDX-License-Identifier: MIT */
#include "mlp_weights.h"

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

zt_status mlp_weights_read(zt_runtime *rt, const minimal_model *m, mlp_weights *out)
{
    return mlp_weights_read_state(rt, m, ZT_STATE_MASTER, out);
}

zt_status mlp_weights_read_state(zt_runtime *rt, const minimal_model *m, zt_param_state state,
                                 mlp_weights *out)
{
    memset(out, 0, sizeof *out);
    for (int l = 0; l < MLP_LAYERS; l++) {
        int ids[2] = {m->weight[l], m->bias[l]};
        int64_t n[2] = {(int64_t)m->n_out[l] * m->n_in[l], m->n_out[l]};
        for (int k = 0; k < 2; k++) {
            float *w = malloc(sizeof(float) * (size_t)n[k]);
            zt_status st = w ? zt_param_read_state(rt, ids[k], state, w, n[k]) : ZT_ERR_NOMEM;
            out->w[2 * l + k] = w;
            out->n[2 * l + k] = n[k];
            if (st != ZT_OK) {
                mlp_weights_free(out);
                return st;
            }
        }
    }
    return ZT_OK;
}

void mlp_weights_free(mlp_weights *w)
{
    for (int i = 0; i < 2 * MLP_LAYERS; i++) {
        free(w->w[i]);
        w->w[i] = NULL;
    }
}

double mlp_weights_max_rel_diff(const mlp_weights *a, const mlp_weights *b)
{
    double worst = 0;
    for (int i = 0; i < 2 * MLP_LAYERS; i++)
        for (int64_t j = 0; j < a->n[i]; j++) {
            double x = a->w[i][j], y = b->w[i][j];
            if (memcmp(&a->w[i][j], &b->w[i][j], sizeof(float)) == 0)
                continue;
            double d = fabs(x - y) / fmax(fabs(y), 1e-3);
            worst = d > worst || isnan(d) ? (isnan(d) ? INFINITY : d) : worst;
        }
    return worst;
}

void mlp_weights_read_or_fail(zt_runtime *rt, const minimal_model *m, mlp_weights *out)
{
    if (mlp_weights_read(rt, m, out) != ZT_OK)
        fail_msg("zt_param_read: %s", zt_last_error(rt));
}

void mlp_weights_assert_same(const mlp_weights *a, const mlp_weights *b, const char *what)
{
    double d = mlp_weights_max_rel_diff(a, b);
    if (d != 0.0)
        fail_msg("%s: the weights differ from the reference run (largest relative %g)", what, d);
}
