#!/usr/bin/env bash
# A Baton worker in shell, with nothing but curl and jq.
#
#   BATON_URL=http://127.0.0.1:8080 QUEUE=emails HANDLER=examples/send-mail.sh examples/worker.sh
#
# For each job it runs HANDLER with the job's payload (JSON) on stdin. Exit status 0 acks the job
# (HANDLER's stdout, if it is JSON, becomes the result); any other status nacks it with HANDLER's
# stderr as the error message, and the queue's backoff decides when it is retried. While HANDLER
# runs, the lease is renewed every third of LEASE_MS. SIGTERM or SIGINT stops it after the job in
# hand. Needs curl and jq.
set -uo pipefail

BATON_URL=${BATON_URL:-http://127.0.0.1:8080}
QUEUE=${QUEUE:-default}
LEASE_MS=${LEASE_MS:-30000}
WAIT_MS=${WAIT_MS:-20000}
WORKER_ID=${WORKER_ID:-sh-worker-$$}
HANDLER=${HANDLER:-cat}

# Spelled out instead of `curl --json`, which needs curl 7.82 or later.
JSON=(-H 'content-type: application/json' -d)

stopping=0
trap 'stopping=1' TERM INT

log() { printf '{"worker":"%s","event":"%s"%s}\n' "$WORKER_ID" "$1" "${2:+,$2}"; }

renew_loop() { # id token: renew every third of the lease until killed
  while sleep "$(awk "BEGIN { print $LEASE_MS / 3000 }")"; do
    curl -s "$BATON_URL/v1/jobs/$1/renew" "${JSON[@]}" "{\"lease_token\": \"$2\"}" > /dev/null
  done
}

log started "\"queue\":\"$QUEUE\""
while [ "$stopping" = 0 ]; do
  # Long-poll in the background and wait for it, so a signal interrupts the wait at once.
  claim_file=$(mktemp)
  curl -s "$BATON_URL/v1/queues/$QUEUE/claim" \
    "${JSON[@]}" "{\"max_jobs\": 1, \"lease_ms\": $LEASE_MS, \"wait_ms\": $WAIT_MS, \"worker_id\": \"$WORKER_ID\"}" \
    > "$claim_file" &
  curl_pid=$!
  wait "$curl_pid" 2> /dev/null
  if [ "$stopping" = 1 ]; then
    kill "$curl_pid" 2> /dev/null # the server hands back anything it claimed for a vanished client
    rm -f "$claim_file"
    break
  fi
  job=$(jq -c '.jobs[0] // empty' "$claim_file" 2> /dev/null)
  rm -f "$claim_file"
  if [ -z "$job" ]; then continue; fi

  id=$(jq -r .id <<< "$job")
  token=$(jq -r .lease_token <<< "$job")
  log claimed "\"id\":\"$id\""
  renew_loop "$id" "$token" &
  renewer=$!

  out=$(mktemp)
  err=$(mktemp)
  jq -c .payload <<< "$job" | bash -c "$HANDLER" > "$out" 2> "$err"
  status=$?
  kill "$renewer" 2> /dev/null
  wait "$renewer" 2> /dev/null

  if [ "$status" = 0 ]; then
    result=$(jq -cs 'if length == 1 then .[0] else null end' "$out" 2> /dev/null || echo null)
    code=$(curl -s -o /dev/null -w '%{http_code}' "$BATON_URL/v1/jobs/$id/ack" \
      "${JSON[@]}" "{\"lease_token\": \"$token\", \"result\": ${result:-null}}")
    log acked "\"id\":\"$id\",\"http\":$code"
  else
    message=$(head -c 2000 "$err" | jq -Rs .)
    code=$(curl -s -o /dev/null -w '%{http_code}' "$BATON_URL/v1/jobs/$id/nack" \
      "${JSON[@]}" "{\"lease_token\": \"$token\", \"error\": {\"message\": $message, \"details\": {\"exit_status\": $status}}}")
    log nacked "\"id\":\"$id\",\"http\":$code"
  fi
  rm -f "$out" "$err"
done
log stopped
