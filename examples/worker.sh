#!/usr/bin/env bash
# A Baton worker running any command as the handler.
#
#   BATON_URL=http://127.0.0.1:8080 QUEUE=emails HANDLER=examples/send-mail.sh examples/worker.sh
#
# For each job it runs HANDLER with the job's payload (JSON) on stdin. Exit status 0 acks the job
# (HANDLER's stdout, if it is JSON, becomes the result); any other status nacks it with HANDLER's
# stderr as the error message, and the queue's backoff decides when it is retried. While HANDLER
# runs, its lease is renewed every third of LEASE_MS. SIGTERM or SIGINT stops it after the jobs in
# hand (up to DRAIN_MS; then they are given back). CONCURRENCY (1) commands run side by side.
#
# The loop is the command runner of the Python library (clients/python: `python3 -m baton work`),
# standard library only: this needs python3 (3.9 or later), nothing else.
set -uo pipefail

QUEUE=${QUEUE:-default}
HANDLER=${HANDLER:-cat}
WORKER_ID=${WORKER_ID:-sh-worker-$$}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PYTHONPATH="$here/../clients/python/src${PYTHONPATH:+:$PYTHONPATH}"

log() { printf '{"worker":"%s","event":"%s"%s}\n' "$WORKER_ID" "$1" "${2:+,$2}"; }

# In the background and waited for, so that this shell passes SIGTERM on and waits for the drain.
python3 -m baton work --queue "$QUEUE" --command "$HANDLER" --log-level debug \
  --concurrency "${CONCURRENCY:-1}" --lease-ms "${LEASE_MS:-30000}" --wait-ms "${WAIT_MS:-20000}" \
  --drain-ms "${DRAIN_MS:-25000}" --worker-id "$WORKER_ID" &
runner=$!
stopping=0
trap 'stopping=1; kill -TERM "$runner" 2> /dev/null' TERM INT
wait "$runner"
status=$?
if [ "$stopping" = 1 ]; then # the signal cut the first wait short
  wait "$runner"
  status=$?
fi
log stopped "\"exit_status\":$status"
exit "$status"
