/* SPDX-License-Identifier: MIT */
/* The runtime fixture of the tests: one scratch folder per test process, configs in which
 * $SCRATCH stands for that folder, and runtimes created from such a config with a model
 * registered and committed. The runtime helpers fail the running cmocka test on an error,
 * with the step that failed and the runtime's message, so that a test states only what it
 * checks; a test destroys its runtimes itself (zt_runtime_destroy). */
#ifndef ZT_TESTS_RT_FIXTURE_H
#define ZT_TESTS_RT_FIXTURE_H

#include "ztier.h"

#include <stdint.h>

/* ---- the scratch folder ---- */

/* Makes the folder <$ZT_TEST_TMPDIR or /tmp>/<name>-<pid> (an existing one is reused) and
 * returns 0: what a cmocka setup returns. */
int rt_fixture_open(const char *name);
/* Removes the folder and everything in it; 0 on success (a cmocka teardown's return). */
int rt_fixture_close(void);
/* The folder's path ("" before rt_fixture_open). */
const char *rt_fixture_dir(void);
/* cfg with every "$SCRATCH" replaced by the folder's path, in a buffer the next call
 * reuses (for the calls that take a config but create no runtime). */
const char *rt_fixture_config(const char *cfg);

/* ---- runtimes ---- */

/* Registers a model's layers and parameters with rt. */
typedef zt_status (*rt_fixture_register_fn)(zt_runtime *rt, void *model);

/* zt_runtime_create(opts, cfg with $SCRATCH replaced); fails the test if it fails. */
zt_runtime *rt_fixture_create(const zt_options *opts, const char *cfg);
/* reg(rt, model); fails the test if it fails. */
void rt_fixture_register(zt_runtime *rt, rt_fixture_register_fn reg, void *model);
/* zt_runtime_commit; fails the test if it fails. */
void rt_fixture_commit(zt_runtime *rt);
/* The three: a committed runtime with the model registered. */
zt_runtime *rt_fixture_make(const zt_options *opts, const char *cfg, rt_fixture_register_fn reg,
                            void *model);
/* For a config that may be refused: zt_runtime_create, then (when it succeeded) the model
 * registered (a failure fails the test) and zt_runtime_commit. Returns the status of the
 * create or of the commit; *out is the runtime either way (for zt_last_error; the caller
 * destroys it). */
zt_status rt_fixture_try(const zt_options *opts, const char *cfg, rt_fixture_register_fn reg,
                         void *model, zt_runtime **out);

/* ---- the same with the minimal model of `dims` (weights from `seed`) ----
 * (examples/minimal's train.h; named by their tags here, so that tests of other models need
 * not include it) */

struct mlp_dims;
struct minimal_model;
void rt_fixture_register_mlp(zt_runtime *rt, const struct mlp_dims *dims, uint64_t seed,
                             struct minimal_model *m);
zt_runtime *rt_fixture_mlp(const zt_options *opts, const char *cfg, const struct mlp_dims *dims,
                           uint64_t seed, struct minimal_model *m);
zt_status rt_fixture_try_mlp(const zt_options *opts, const char *cfg, const struct mlp_dims *dims,
                             uint64_t seed, struct minimal_model *m, zt_runtime **out);
/* Fails the running test unless making the MLP with cfg fails with ZT_ERR_CONFIG and a
 * message that contains needle. */
void rt_fixture_expect_config_error(const char *cfg, const struct mlp_dims *dims,
                                    const char *needle);

#endif
