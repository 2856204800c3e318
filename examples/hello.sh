#!/bin/sh
# The smallest job: say where it ran and what it was given.
echo "hello from $(hostname) at $(date -u +%H:%M:%S)"
echo "arguments: $*"
