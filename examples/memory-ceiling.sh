#!/bin/sh
# A long data task under a memory ceiling: the agent builds and reduces a
# data set far bigger than the memory it may use. Cells that load it whole
# get a MemoryError (the namespace is kept: RLIMIT_DATA, and a cgroup
# where the machine gives one), and the model repairs them into chunked,
# streaming code. The journal beside the workspace lets a killed run go
# on: run this script again and it resumes.
#
#   sh examples/memory-ceiling.sh          (agentz on PATH; a provider set
#                                           up as README's quick start says)
set -eu
dir=${AGENTZ_EXAMPLES:-$HOME/agentz-examples}/memory-ceiling
mkdir -p "$dir/workspace"
cd "$dir/workspace"
exec agentz --journal "$dir/journal.jsonl" --resume \
    --memory-limit 512M --tmp-size 256M --cell-timeout 1800 \
    --deadline 14400 --max-tokens 2000000 --max-cells 200 \
    "Make a synthetic sales data set in sales/: 40 million rows of \
(date, region, product, quantity, unit_price) as CSV files of one million \
rows each, with a fixed random seed. Then compute the revenue per region \
and month and the ten best-selling products, and write them to report.md \
with how you computed them. Memory is limited to 512 MiB: work in chunks \
and stream; when a cell fails with MemoryError, change the approach. \
Keep intermediate results in files, so a later cell can go on from them. \
Then quit()."
