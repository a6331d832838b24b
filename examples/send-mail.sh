#!/usr/bin/env bash
# A handler for examples/worker.sh, standing in for real work: it "sends" the email a job describes.
#
#   QUEUE=emails HANDLER=examples/send-mail.sh examples/worker.sh
#
# The job's payload arrives on stdin, e.g. {"to": "ada@example.com"}. What it prints on stdout (JSON)
# becomes the job's result; a non-zero exit fails the job, with stderr as the error message.
set -euo pipefail

to=$(jq -r '.to // empty')
if [ -z "$to" ]; then
  echo 'payload has no "to" address' >&2
  exit 2
fi
# The real work goes here: sendmail, or a call to your mail provider's API.
jq -nc --arg to "$to" '{sent_to: $to}'
