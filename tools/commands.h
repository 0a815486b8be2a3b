/* SPDX-License-Identifier: MIT */
/* Entry points of the `ztier` subcommands; each takes the arguments after its name and
 * returns the process exit code. One file per subcommand in tools/. */
#ifndef ZT_TOOLS_COMMANDS_H
#define ZT_TOOLS_COMMANDS_H

int cmd_info(int argc, char **argv);
int cmd_estimate(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_checkpoint(int argc, char **argv);
/* `ztier checkpoint export DIR ...` (argv[0] is "export"): exit status 0, 1 or 2 (usage). */
int cmd_checkpoint_export(int argc, char **argv);
int cmd_bench_copy(int argc, char **argv);
int cmd_bench_prefetch(int argc, char **argv);
int cmd_bench_adam(int argc, char **argv);
int cmd_bench_nvme(int argc, char **argv);
int cmd_bench_gpt2(int argc, char **argv);
int cmd_bench_quant(int argc, char **argv);
int cmd_bench_act(int argc, char **argv);
int cmd_bench_profile(int argc, char **argv);

/* Each bench subcommand adds one line here and its file to tools/CMakeLists.txt. */
#define ZT_BENCH_COMMANDS                                                                          \
    {"bench", "adam", cmd_bench_adam, "fused CPU Adam vs its traffic probe"},                      \
        {"bench", "copy", cmd_bench_copy, "host<->device copies and the fetch path vs the limit"}, \
        {"bench", "nvme", cmd_bench_nvme, "NVMe swap write/read vs fio's best depth"},             \
        {"bench", "quant", cmd_bench_quant, "ZeRO++ int8/int4 (de)quantization vs memcpy"},        \
        {"bench", "prefetch", cmd_bench_prefetch, "stall of an offloaded stack (--backend cuda)"}, \
        {"bench", "gpt2", cmd_bench_gpt2, "GPT-2 step: resident vs NVMe offload"},                 \
        {"bench", "act", cmd_bench_act, "GPT-2 full checkpoints: kept vs host vs NVMe"},           \
        {"bench", "profile", cmd_bench_profile, "the machine profile `ztier plan` reads (--out)"},

#endif
