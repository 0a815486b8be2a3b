#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Reference tables for ztier's DeepSpeed-compatibility tests, computed by DeepSpeed's own code.

How to run (only when DeepSpeed changes; CI reads the committed tables and needs no DeepSpeed):
    python3 -m venv /tmp/dsvenv
    DS_BUILD_OPS=0 /tmp/dsvenv/bin/pip install torch deepspeed
    /tmp/dsvenv/bin/python tests/deepspeed/gen_tables.py   # from the repository root

It writes
  tests/deepspeed/data/lr_schedules.json  read by tests/unit/test_lr_schedule.c
  tests/deepspeed/data/batch_rules.json   read by tests/config/test_batch_rules.c
and names the DeepSpeed and torch versions in each.

lr_schedules.json: for each case, DeepSpeed's scheduler class from deepspeed.runtime.lr_schedules,
built the way DeepSpeedEngine builds it from the config's "scheduler" section
(getattr(lr_schedules, type)(optimizer, **params)), on a torch AdamW with lr BASE_LR, then
stepped as DeepSpeedEngine._take_model_step does: optimizer.step(), then lr_scheduler.step().
Row k-1 holds the lr (and betas) in the optimizer's param group while optimizer step k runs,
k = 1..STEPS; that is what ztier's zt_step_info.lr of step k reports. A case whose constructor
raises records the error instead (ztier must refuse the config).

batch_rules.json: for train_batch_size / train_micro_batch_size_per_gpu /
gradient_accumulation_steps each given or absent, and several data-parallel world sizes,
DeepSpeedConfig's _configure_train_batch_size (its _set_batch_related_parameters and
_batch_assertion) run on an instance holding exactly those values, as DeepSpeedConfig.__init__
reads them (get_train_batch_size & co.): the three values it ends with, or its refusal.
"""
import json
import os
import sys

import torch
import deepspeed
from deepspeed.runtime import lr_schedules
from deepspeed.runtime import config as ds_config

STEPS = 300
BASE_LR = 0.01  # optimizer.params.lr
BETAS = (0.9, 0.999)  # optimizer.params.betas
HERE = os.path.dirname(os.path.abspath(__file__))

# name, scheduler type, params: every parameter docs/config.md lists, defaults, edges,
# and the steps past each schedule's end.
LR_CASES = [
    ("warmup_log", "WarmupLR", {"warmup_min_lr": 0.001, "warmup_max_lr": 0.02, "warmup_num_steps": 20}),
    ("warmup_linear", "WarmupLR",
     {"warmup_min_lr": 0.0, "warmup_max_lr": 0.005, "warmup_num_steps": 50, "warmup_type": "linear"}),
    ("warmup_defaults", "WarmupLR", {}),
    ("warmup_one_step", "WarmupLR", {"warmup_min_lr": 0.001, "warmup_max_lr": 0.02, "warmup_num_steps": 1}),
    ("warmup_zero_steps", "WarmupLR", {"warmup_num_steps": 0}),
    ("decay_log", "WarmupDecayLR",
     {"warmup_min_lr": 0.002, "warmup_max_lr": 0.03, "warmup_num_steps": 10, "total_num_steps": 200}),
    ("decay_linear", "WarmupDecayLR",
     {"warmup_min_lr": 0.0, "warmup_max_lr": 0.02, "warmup_num_steps": 30, "warmup_type": "linear",
      "total_num_steps": 250}),
    ("decay_defaults", "WarmupDecayLR", {"total_num_steps": 280}),
    ("decay_total_below_warmup", "WarmupDecayLR",
     {"warmup_max_lr": 0.02, "warmup_num_steps": 40, "total_num_steps": 25}),
    ("cosine_linear", "WarmupCosineLR",
     {"total_num_steps": 120, "warmup_num_steps": 20, "warmup_min_ratio": 0.1, "cos_min_ratio": 0.05,
      "warmup_type": "linear"}),
    ("cosine_log_short", "WarmupCosineLR", {"total_num_steps": 20, "warmup_num_steps": 5}),
    ("cosine_defaults", "WarmupCosineLR", {"total_num_steps": 1500}),
    ("cosine_total_equals_warmup", "WarmupCosineLR",
     {"total_num_steps": 30, "warmup_num_steps": 30, "cos_min_ratio": 0.2, "warmup_type": "linear"}),
    ("one_cycle", "OneCycle",
     {"cycle_min_lr": 0.001, "cycle_max_lr": 0.01, "cycle_first_step_size": 10, "cycle_second_step_size": 14,
      "decay_lr_rate": 0.3, "decay_step_size": 4, "cycle_min_mom": 0.8, "cycle_max_mom": 0.93,
      "decay_mom_rate": 0.0001}),
    ("one_cycle_defaults", "OneCycle", {"cycle_min_lr": 0.0005, "cycle_max_lr": 0.005}),
    ("one_cycle_stairs", "OneCycle",
     {"cycle_min_lr": 0.0001, "cycle_max_lr": 0.0023, "cycle_first_step_size": 40, "cycle_second_step_size": 60,
      "cycle_first_stair_count": 4, "cycle_second_stair_count": 3, "decay_lr_rate": 0.5, "decay_step_size": 10,
      "cycle_min_mom": 0.85, "cycle_max_mom": 0.95, "decay_mom_rate": 0.0002}),
    ("one_cycle_first_stairs_only", "OneCycle",
     {"cycle_min_lr": 0.001, "cycle_max_lr": 0.01, "cycle_first_step_size": 33, "cycle_second_step_size": 21,
      "cycle_first_stair_count": 5}),
    ("one_cycle_second_stairs_zero", "OneCycle",
     {"cycle_min_lr": 0.001, "cycle_max_lr": 0.01, "cycle_first_step_size": 30,
      "cycle_first_stair_count": 3, "cycle_second_stair_count": 0}),
    ("one_cycle_second_zero", "OneCycle",
     {"cycle_min_lr": 0.0001, "cycle_max_lr": 0.0099, "cycle_first_step_size": 60, "cycle_second_step_size": 0,
      "decay_lr_rate": 0.1, "decay_step_size": 20}),
    ("one_cycle_second_null", "OneCycle",
     {"cycle_min_lr": 0.0001, "cycle_max_lr": 0.0099, "cycle_first_step_size": 60, "cycle_second_step_size": None,
      "decay_lr_rate": 0.1, "decay_step_size": 20}),
    ("one_cycle_no_momentum", "OneCycle",
     {"cycle_min_lr": 0.001, "cycle_max_lr": 0.01, "cycle_first_step_size": 25, "cycle_momentum": False,
      "decay_lr_rate": 0.2, "decay_step_size": 5}),
    ("one_cycle_first_zero", "OneCycle", {"cycle_min_lr": 0.001, "cycle_max_lr": 0.01, "cycle_first_step_size": 0}),
]


def sig(x):
    """12 significant digits: the tests hold ztier to 1e-6 relative; shorter tables."""
    return float("%.12g" % float(x))


def lr_case(name, kind, params):
    p = torch.nn.Parameter(torch.zeros(4))
    opt = torch.optim.AdamW([p], lr=BASE_LR, betas=BETAS, eps=1e-20, weight_decay=0.0)
    case = {"name": name, "scheduler": {"type": kind, "params": params}}
    try:
        sched = getattr(lr_schedules, kind)(opt, **params)
    except (ValueError, AssertionError, TypeError, ZeroDivisionError) as e:
        case["error"] = "%s: %s" % (type(e).__name__, e)
        return case
    lrs, betas = [], []
    for _ in range(STEPS):
        group = opt.param_groups[0]
        lrs.append(sig(group["lr"]))
        betas.append([sig(group["betas"][0]), sig(group["betas"][1])])
        p.grad = torch.ones_like(p)
        opt.step()
        sched.step()  # as DeepSpeedEngine._take_model_step after an applied step
    case["lr"] = lrs
    if any(b != list(BETAS) for b in betas):
        case["betas"] = betas
    return case


def batch_case(tb, micro, gas, world):
    given = {}
    for key, v in (("train_batch_size", tb), ("train_micro_batch_size_per_gpu", micro),
                   ("gradient_accumulation_steps", gas)):
        if v is not None:
            given[key] = v
    c = object.__new__(ds_config.DeepSpeedConfig)  # no distributed init: world set below
    c.world_size = world
    c.train_batch_size = ds_config.get_train_batch_size(given)
    c.train_micro_batch_size_per_gpu = ds_config.get_train_micro_batch_size_per_gpu(given)
    c.gradient_accumulation_steps = ds_config.get_gradient_accumulation_steps(given)
    row = {"given": [tb, micro, gas], "world": world}
    try:
        c._configure_train_batch_size()
        row["result"] = [c.train_batch_size, c.train_micro_batch_size_per_gpu, c.gradient_accumulation_steps]
    except AssertionError as e:
        row["error"] = str(e)
    return row


def write(path, header, items):
    # one case per line: small diffs when DeepSpeed changes
    with open(path, "w") as f:
        f.write("{\n")
        for k, v in header.items():
            f.write("%s: %s,\n" % (json.dumps(k), json.dumps(v)))
        f.write('"cases": [\n')
        f.write(",\n".join(json.dumps(i, separators=(",", ":")) for i in items))
        f.write("\n]}\n")


def main():
    header = {
        "generator": "tests/deepspeed/gen_tables.py",
        "deepspeed": deepspeed.__version__,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
    }
    lr_header = dict(header, steps=STEPS, base_lr=BASE_LR, betas=list(BETAS),
                     row_k="lr[k] and betas[k] (betas only where they differ from the configured ones): the "
                           "param group's while optimizer step k+1 runs, 12 significant digits")
    write(os.path.join(HERE, "data", "lr_schedules.json"), lr_header,
          [lr_case(*c) for c in LR_CASES])
    rows = [batch_case(tb, micro, gas, world)
            for world in (1, 2, 3, 4)
            for tb in (None, 16, 24, 10)
            for micro in (None, 2, 3)
            for gas in (None, 1, 2, 4)]
    write(os.path.join(HERE, "data", "batch_rules.json"),
          dict(header, fields="given: [train_batch_size, train_micro_batch_size_per_gpu, "
                              "gradient_accumulation_steps] (null: absent); result: the same "
                              "three after DeepSpeed's rules, or error: its refusal"),
          rows)


if __name__ == "__main__":
    main()
