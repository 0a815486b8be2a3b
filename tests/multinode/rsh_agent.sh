#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Open MPI's remote shell (--mca plm_rsh_agent) for run.sh's namespace "nodes": instead of
# ssh <host> <command>, runs <command> in the network namespace of host 10.x.y.<i>
# (${ZT_MN_PREFIX}n<i>) under its own host name node<i> (a UTS namespace), so Open MPI's
# daemon and the ranks it starts there see a machine of their own.
#   rsh_agent.sh <host address> <command words...>
set -eu
host=$1
shift
i=${host##*.}
exec ip netns exec "${ZT_MN_PREFIX:?}n$i" unshare --uts sh -c "hostname node$i && exec sh -c \"\$0\"" "$*"
