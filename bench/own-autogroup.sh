#!/bin/bash
# Runs its arguments in a session of their own (a scheduler autogroup) whose nice is -15 (root only): a bench, its
# servers and its workers then take the CPUs ahead of the machine's other sessions, as if the bench had the machine.
# With kernel.sched_autogroup_enabled=1 a process's own nice counts only within its session: `nice -n -15` alone
# changes nothing against other sessions' processes.
#
#   FLOOD_SERVER=floor bench/own-autogroup.sh node --import tsx bench/watch-flood.ts 1000 20 50
exec setsid bash -c 'echo -15 > /proc/self/autogroup && exec "$@"' _ "$@"
