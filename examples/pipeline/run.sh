#!/bin/sh
# The example pipeline's job script: trains the tiny model (train.py) and leaves model.pkl
# in the current directory, which is the job's own folder, so the model ends up at
# <remote_dir>/model.pkl, where the pipeline fetches it from.
#
# hpcbridge stages only this script into the job's folder, so train.py is found by an
# absolute path, the first of:
#   $PIPELINE_DIR                              set by flow.py when the job runs on this machine
#   $HPCBRIDGE_REMOTE_REPO/examples/pipeline   the deployed repository on a cluster (the
#                                              REMOTE_REPO setting; submit() passes it on)
#   the folder of this script                  when run by hand: sh examples/pipeline/run.sh
# The interpreter is $PIPELINE_PYTHON, else python3.  Arguments go to train.py (--dummy ...).
set -eu
if [ -n "${PIPELINE_DIR:-}" ]; then
  dir=$PIPELINE_DIR
elif [ -n "${HPCBRIDGE_REMOTE_REPO:-}" ]; then
  dir=$HPCBRIDGE_REMOTE_REPO/examples/pipeline
else
  dir=$(CDPATH='' cd -- "$(dirname -- "$0")" && pwd)
fi
if [ ! -f "$dir/train.py" ]; then
  echo "run.sh: no train.py in $dir (set PIPELINE_DIR or HPCBRIDGE_REMOTE_REPO)" >&2
  exit 2
fi
echo "run.sh: $dir/train.py on $(hostname) in $(pwd)"
exec "${PIPELINE_PYTHON:-python3}" "$dir/train.py" "$@"
