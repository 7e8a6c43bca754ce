#!/usr/bin/env bash
# test_lanes.sh — each file of the libraries and the CLI keeps to its lane
# (cpu < core < io < hf; core < mpi; the libraries < tools < bench, dev): no call
# circle across lanes, no include or call of a lane above, tools/ on the
# public headers.  scripts/lanes.py over $BUILD's object files says which
# files break which rule; it prints "lanes: N passed, N failed" last.
exec /usr/bin/python3 "$(dirname "$0")/../scripts/lanes.py" "${BUILD:-build}"
