#!/bin/sh
# A task that survives a killed cell, a killed worker and a killed
# supervisor. Every agent cell runs with a snapshot of the namespace
# taken before it (--snapshot auto, the default), so a cell killed at
# its deadline, by `agentz ctl survive kill-cell`, by the memory ceiling
# or by `kill -9` of the worker rolls the namespace back to before that
# cell and the model repairs it; the journal makes a killed supervisor resume where it
# stopped when this script runs again.
#
#   sh examples/survive-kill.sh &          (agentz on PATH, a provider set)
#   agentz ctl survive status              (from another terminal)
#   agentz ctl survive kill-cell           (the running cell is killed;
#                                           the namespace is rolled back)
#   kill -9 <the supervisor's pid>; sh examples/survive-kill.sh
#                                          (resumes from the journal)
#   agentz report ~/agentz-examples/survive-kill/journal.jsonl -o run.html
set -eu
dir=${AGENTZ_EXAMPLES:-$HOME/agentz-examples}/survive-kill
mkdir -p "$dir/workspace"
cd "$dir/workspace"
AGENTZ_RUN=survive exec agentz --journal "$dir/journal.jsonl" --resume \
    --cell-timeout 300 --grace 5 \
    --deadline 3600 --max-tokens 1000000 \
    "Estimate pi by Monte Carlo to six decimal places. Keep the running \
totals (points inside, points drawn) in Python variables and add to them \
in cells of about a minute each; print the estimate after each cell and \
save it to pi.txt. A cell may be killed from outside: when a repair \
request says the namespace was rolled back, check which totals survived \
and go on from them. Stop and quit() once two estimates in a row agree \
to six decimals."
