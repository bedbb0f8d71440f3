#!/bin/sh
# The container's entry point: serve MINFER_MODEL (a known name, a path or
# hf:OWNER/REPO/FILE.gguf) on 0.0.0.0:$PORT, with the arguments given to
# the container passed on to `minfer serve`. A model baked into the image
# (/opt/minfer) is served from there; any other is pulled first into
# $MINFER_HOME, the volume (a verified file is left alone).
set -eu
model="${MINFER_MODEL:-}"
if [ -z "$model" ]; then
    echo "minfer-entrypoint: set MINFER_MODEL (e.g. qwen2.5-coder-0.5b-instruct)" >&2
    exit 2
fi
case "$model" in
    /*) ;;
    *)
        if MINFER_HOME=/opt/minfer minfer list 2>/dev/null \
            | awk -v m="$model" '$1 == m && / pulled / { found = 1 } END { exit !found }'; then
            export MINFER_HOME=/opt/minfer
        else
            minfer pull "$model"
        fi
        ;;
esac
# exec: minfer serve becomes PID 1 and gets the SIGTERM that starts its
# drain.
exec minfer serve "$model" --host 0.0.0.0 --port "${PORT:-8080}" "$@"
