/* SPDX-License-Identifier: MIT */
/* An out-of-tree program built against an installed ztier: registers one layer with a
 * constant-initialised parameter, fetches it and checks the values, takes one step.
 *   consumer [device_backend [comm_backend]]: e.g. "cuda", or "host" "mpi" under mpirun: the
 *   runtime runs on those backends (from their modules, libztier-<name>.so, when linked with
 *   libztier.so); a failure prints ztier's message. */
#include <ztier.h>

#include <stdio.h>

int main(int argc, char **argv)
{
    char config[256];
    snprintf(config, sizeof config,
             "{\"ztier\": {\"hbm_capacity\": \"8M\", \"device_backend\": \"%s\", "
             "\"comm_backend\": \"%s\"}}",
             argc > 1 ? argv[1] : "host", argc > 2 ? argv[2] : "auto");
    zt_runtime *rt = NULL;
    zt_status st = zt_runtime_create(NULL, config, &rt);
    int layer = -1, param = -1;
    int64_t shape[2] = {3, 5};
    zt_init init = {ZT_INIT_CONSTANT, 0.5f, 0.0f, 0, NULL, NULL};
    if (st == ZT_OK)
        st = zt_layer_add(rt, "layer", &layer);
    if (st == ZT_OK)
        st = zt_param_add(rt, layer, "layer.w", shape, 2, &init, &param);
    if (st == ZT_OK)
        st = zt_runtime_commit(rt);
    zt_layer_view view;
    if (st == ZT_OK)
        st = zt_fetch(rt, layer, ZT_FORWARD, &view);
    if (st != ZT_OK) {
        fprintf(stderr, "consumer: %s: %s\n", zt_status_string(st), zt_last_error(rt));
        zt_runtime_destroy(rt);
        return 1;
    }
    /* The view is in the device backend's memory (the GPU's with cuda): the values are read
     * into host memory through zt_param_read. */
    int ok = view.n_params == 1 && view.params[0].numel == 15;
    zt_release(rt, layer, ZT_FORWARD);
    float w[15] = {0};
    ok = ok && zt_param_read(rt, param, w, 15) == ZT_OK;
    for (int i = 0; ok && i < 15; i++)
        ok = w[i] == 0.5f;
    ok = ok && zt_step(rt, NULL, NULL) == ZT_OK && zt_version() == ZT_VERSION;
    zt_runtime_destroy(rt);
    printf("consumer: ztier %s %s\n", zt_version_string(), ok ? "ok" : "WRONG VALUES");
    return ok ? 0 : 1;
}
