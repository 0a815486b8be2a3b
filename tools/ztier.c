/* SPDX-License-Identifier: MIT */
/* The `ztier` command: tier bandwidth benchmarks and runtime information. */
#include "tools/commands.h"

#include "ztier.h"

#include <stdio.h>
#include <string.h>

typedef struct command {
    const char *group; /* "bench" or NULL for top level */
    const char *name;
    int (*run)(int argc, char **argv);
    const char *help;
} command;

static const command commands[] = {
    {NULL, "info", cmd_info, "print version, build options and CPU features"},
    {NULL, "estimate", cmd_estimate,
     "the bytes each tier needs for a model, and which "
     "placements fit"},
    {NULL, "plan", cmd_plan,
     "the predicted step time of a model on a machine profile, its busy shares and critical "
     "path"},
    {NULL, "checkpoint", cmd_checkpoint,
     "inspect DIR | export DIR --format safetensors|llmc: check or export a checkpoint"},
    /* bench entries (alphabetical) */
    ZT_BENCH_COMMANDS};

static void usage(FILE *out)
{
    fprintf(out, "usage: ztier <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(out, "  %s%s%-10s %s\n", commands[i].group ? commands[i].group : "",
                commands[i].group ? " " : "", commands[i].name, commands[i].help);
    fprintf(out, "\nAdd --json to a bench or estimate command for one JSON object on the last "
                 "line.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "help") || !strcmp(argv[1], "--help")) {
        usage(stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("ztier %s\n", zt_version_string());
        return 0;
    }
    int is_group = !strcmp(argv[1], "bench");
    const char *name = is_group ? (argc > 2 ? argv[2] : "") : argv[1];
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
        const command *c = &commands[i];
        if ((c->group != NULL) != is_group || strcmp(c->name, name) != 0)
            continue;
        int skip = is_group ? 3 : 2;
        return c->run(argc - skip, argv + skip);
    }
    fprintf(stderr, "ztier: unknown command '%s%s%s'\n\n", is_group ? "bench " : "", name, "");
    usage(stderr);
    return 2;
}
